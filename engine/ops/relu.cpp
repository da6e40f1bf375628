// ReLU: y = max(x, 0). Its gradient reads the output, so x can be overwritten.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerReLU(OpRegistry& r) {
  r.add(ops::unaryActivation("ReLU", "Rectified linear unit: max(x, 0)", "ReLUGrad", true));
  r.add(ops::unaryGrad("ReLUGrad"));
}

}  // namespace netloom
