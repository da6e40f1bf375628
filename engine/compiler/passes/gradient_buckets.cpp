// "gradient buckets": each rank's loss gradient is weighted by its share of the
// global batch, and the gradients are summed across the ranks in buckets before
// anything reads them (insertGradientBuckets, engine/compiler/gradient_buckets.cpp).
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"

namespace netloom {
namespace {

class GradientBuckets : public Pass {
 public:
  const char* name() const override { return "gradient buckets"; }
  bool applies(const PassContext& c) const override {
    return c.updates() && c.opts.comm && c.opts.comm->size() > 1;
  }
  Result<std::string> run(PassContext& c) override {
    if (!c.scaled() && c.seed >= 0) {  // fp16's seed is the loss scale's (the optimizer pass)
      Node& seed = c.g.nodes[size_t(c.seed)];
      seed.op = &internal_ops::lossSeed();
      seed.attrs = Attrs{};
    }
    if (c.opts.zero > 0 && !c.opts.tensorComm) {
      const int parts = c.opts.zero >= 2 ? c.opts.comm->size() : 0;
      c.zeroBuckets = insertGradientBuckets(c.g, c.grads, c.opts.firstBucketBytes,
                                            c.opts.bucketBytes, "all", parts);
      for (const GradientBucket& b : c.zeroBuckets)
        c.prog.buckets.push_back({b.name, b.params.size(), b.bytes});
      return counted(c.zeroBuckets.size(), "bucket") +
             (parts ? " summed into one shard per rank (ZeRO-2) across " : " summed across ") +
             std::to_string(c.opts.comm->size()) + " ranks";
    }
    // Under tensor parallelism a whole parameter's gradient is a sum over every rank,
    // a split one's over the ranks that hold the same part.
    // A pipeline stage's parameters are its own: summed over the ranks of that stage.
    std::map<ValueId, ValueId> whole, split;
    for (const auto& [param, grad] : c.grads)
      (c.g.values[param].shard.split() || c.opts.stageComm ? split : whole)[param] = grad;
    for (const GradientBucket& b :
         insertGradientBuckets(c.g, whole, c.opts.firstBucketBytes, c.opts.bucketBytes))
      c.prog.buckets.push_back({b.name, b.params.size(), b.bytes});
    if (!split.empty() && c.opts.dataComm && c.opts.dataComm->size() > 1)
      for (const GradientBucket& b :
           insertGradientBuckets(c.g, split, c.opts.firstBucketBytes, c.opts.bucketBytes, "data"))
        c.prog.buckets.push_back({b.name, b.params.size(), b.bytes});
    return counted(c.prog.buckets.size(), "bucket") + " summed across " +
           std::to_string(c.opts.comm->size()) + " ranks";
  }
};

}  // namespace

std::unique_ptr<Pass> gradientBucketsPass() {
  return std::make_unique<GradientBuckets>();
}

}  // namespace netloom
