// LeakyReLU: y = x for x > 0, slope * x otherwise.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerLeakyReLU(OpRegistry& r) {
  AttrDef slope = floatAttr("negative_slope", 0.01, 0.0, 1.0, "slope for negative inputs");
  OpDef d = ops::unaryActivation("LeakyReLU", "Leaky ReLU: x if x > 0 else slope·x",
                                 "LeakyReLUGrad", false);
  d.attrs = {slope};
  d.torchForm = "F.leaky_relu";
  d.onnxForm = "LeakyRelu{alpha=negative_slope}(x)";
  r.add(std::move(d));
  r.add(ops::elementwiseGrad("LeakyReLUGrad", {slope}));
}

}  // namespace netloom
