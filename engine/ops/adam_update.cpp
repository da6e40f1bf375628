// AdamUpdate: one Adam step (Kingma & Ba) with bias correction; weight decay is
// added to the gradient (Adam) or applied to the weights directly (AdamW).
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerAdamUpdate(OpRegistry& r) {
  OpDef d;
  d.name = "AdamUpdate";
  d.category = "Internal";
  d.role = OpRole::Optimizer;
  d.doc = "In-place Adam/AdamW step; the learning rate and step come from the step context";
  d.inputs = {{"param", "weights"}, {"grad", "gradient"}, {"state", "exp_avg, exp_avg_sq", true}};
  d.attrs = {floatAttr("beta1", 0.9, 0.0, 0.999999, "first-moment decay"),
             floatAttr("beta2", 0.999, 0.0, 0.999999, "second-moment decay"),
             floatAttr("eps", 1e-8, 0.0, 1.0, "denominator guard"),
             floatAttr("weight_decay", 0.0, 0.0, 1.0, "decay factor"),
             boolAttr("decoupled", false, "AdamW: decay the weights, not the gradient"),
             boolAttr("loss_scaled", false,
                      "the last input is the loss scale's state: unscale, or skip the step")};
  d.mutates = {0, 2, 3};
  d.infer = [](InferCtx&) { return true; };
  r.add(std::move(d));
}

}  // namespace netloom
