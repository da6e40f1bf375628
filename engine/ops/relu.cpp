// ReLU: y = max(x, 0). Its gradient reads the output, so x can be overwritten.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerReLU(OpRegistry& r) {
  OpDef d = ops::unaryActivation("ReLU", "Rectified linear unit: max(x, 0)", "ReLUGrad", true);
  d.epilogue = "relu";
  d.torchForm = "F.relu";
  d.onnxForm = "Relu(x)";  // Linear and BatchNorm apply it in their own kernels (fusion.cpp)
  r.add(std::move(d));
  r.add(ops::elementwiseGrad("ReLUGrad"));
}

}  // namespace netloom
