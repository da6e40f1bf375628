// Tanh: y = tanh(x); dy/dx = 1 - y² reads only the output.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerTanh(OpRegistry& r) {
  OpDef d = ops::unaryActivation("Tanh", "Hyperbolic tangent", "TanhGrad", true);
  d.torchForm = "torch.tanh";
  d.onnxForm = "Tanh(x)";
  r.add(std::move(d));
  r.add(ops::elementwiseGrad("TanhGrad"));
}

}  // namespace netloom
