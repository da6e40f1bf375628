// Data parallelism's ops: a bucket of gradients summed across the ranks, started
// once its last gradient is written and waited for before the optimizer reads it;
// and the loss gradient's seed weighted by this rank's share of the global batch.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerCollectives(OpRegistry& r) {
  auto bucketOp = [](const char* name, const char* doc) {
    OpDef d;
    d.name = name;
    d.category = "Internal";
    d.role = OpRole::Internal;
    d.doc = doc;
    d.inputs = {{"grads", "the bucket's gradients, summed in place", true}};
    d.attrs = {stringAttr("bucket", "", {}, "the bucket's name, the same on every rank"),
               stringAttr("group", "all", {"all", "data"},
                          "the ranks it sums over: all, or (tensor parallelism) those holding "
                          "the same parts")};
    d.mutates = {0};
    d.infer = [](InferCtx&) { return true; };
    return d;
  };
  r.add(bucketOp("BucketStart", "Starts summing a bucket of gradients across the ranks"));
  r.add(bucketOp("BucketWait", "Waits until a bucket of gradients is summed across the ranks"));

  OpDef seed;
  seed.name = "LossSeed";
  seed.category = "Internal";
  seed.role = OpRole::Internal;
  seed.doc = "The loss gradient's seed: this rank's share of the step's global batch";
  seed.outputs = {{"y", "scalar"}};
  seed.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{}, DType::F32, {}};
    return true;
  };
  r.add(std::move(seed));
}

}  // namespace netloom
