// SgdUpdate: one SGD step on a parameter, with optional momentum (PyTorch's
// formulation: buf = μ·buf + g; Nesterov uses g + μ·buf) and L2 weight decay.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerSgdUpdate(OpRegistry& r) {
  OpDef d;
  d.name = "SgdUpdate";
  d.category = "Internal";
  d.role = OpRole::Optimizer;
  d.doc = "In-place SGD step; the learning rate comes from the step context";
  d.inputs = {{"param", "weights"}, {"grad", "gradient"}, {"state", "momentum buffer", true}};
  d.attrs = {floatAttr("momentum", 0.0, 0.0, 1.0, "momentum factor"),
             boolAttr("nesterov", false, "Nesterov momentum"),
             floatAttr("weight_decay", 0.0, 0.0, 1.0, "L2 penalty"),
             boolAttr("loss_scaled", false,
                      "the last input is the loss scale's state: unscale, or skip the step")};
  d.mutates = {0, 2};
  d.infer = [](InferCtx&) { return true; };
  r.add(std::move(d));
}

}  // namespace netloom
