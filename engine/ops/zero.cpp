// ZeRO's ops (kernels/core/zero.h): a bucket's gradients summed and cut into one
// shard per data-parallel rank, and the update of this rank's shard of the bucket's
// parameters with its shard of the optimizer state, every rank then gathering the
// parameters whole.
#include "kernels/core/zero.h"

#include "engine/ops/internal_ops.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerZero(OpRegistry& r) {
  OpDef scatter =
      ops::internalOp(internal_ops::kZeroScatter,
                      "Sums a bucket of gradients across the ranks, keeping this rank's shard");
  scatter.inputs = {{"grads", "the bucket's gradients", true}};
  scatter.outputs = {{"shard", "this rank's shard of their sum"}};
  scatter.attrs = {intAttr("parts", 1, 1, 1 << 20, "the data-parallel ranks")};
  scatter.infer = [](InferCtx& c) {
    int64_t total = 0;
    for (const TensorDesc& d : c.in) total += numel(d.shape);
    c.out[0] = TensorDesc{{FlatShards(total, int(c.attrs.i("parts"))).per}, DType::F32, {}};
    return true;
  };
  r.add(std::move(scatter));

  OpDef update =
      ops::internalOp(internal_ops::kZeroUpdate,
                      "Updates this rank's shard of a bucket's parameters, then gathers them whole",
                      OpRole::Optimizer);
  update.inputs = {{"tensors",
                    "the parameters, their gradients (whole, or this rank's shard of their sum), "
                    "the state shards[, the loss scale's state]",
                    true}};
  update.attrs = {stringAttr("kind", "adam", {"adam", "sgd"}, "the optimizer"),
                  intAttr("params", 1, 1, 1 << 20, "the parameters, the first inputs"),
                  stringAttr("grads", "whole", {"whole", "shard"}, "how the gradients come"),
                  intAttr("parts", 1, 1, 1 << 20, "the data-parallel ranks"),
                  floatAttr("beta1", 0.9, 0.0, 0.999999, "Adam's first-moment decay"),
                  floatAttr("beta2", 0.999, 0.0, 0.999999, "Adam's second-moment decay"),
                  floatAttr("eps", 1e-8, 0.0, 1.0, "Adam's denominator guard"),
                  floatAttr("weight_decay", 0.0, 0.0, 1.0, "decay factor"),
                  boolAttr("decoupled", false, "AdamW: decay the weights, not the gradient"),
                  floatAttr("momentum", 0.0, 0.0, 1.0, "SGD's momentum"),
                  boolAttr("nesterov", false, "SGD: Nesterov momentum"),
                  boolAttr("loss_scaled", false, "the last input is the loss scale's state")};
  update.mutates = {0};
  update.infer = [](InferCtx&) { return true; };
  r.add(std::move(update));
}

}  // namespace netloom
