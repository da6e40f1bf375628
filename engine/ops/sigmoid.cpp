// Sigmoid: y = 1 / (1 + e^-x); dy/dx = y(1 - y) reads only the output.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerSigmoid(OpRegistry& r) {
  OpDef d =
      ops::unaryActivation("Sigmoid", "Logistic sigmoid: 1 / (1 + e^-x)", "SigmoidGrad", true);
  d.torchForm = "torch.sigmoid";
  d.onnxForm = "Sigmoid(x)";
  r.add(std::move(d));
  r.add(ops::elementwiseGrad("SigmoidGrad"));
}

}  // namespace netloom
