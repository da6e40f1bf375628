// SumSquares: Σ x², a scalar. The compiler emits it on each parameter's gradient
// when a run reports gradient norms; it reads any layout, since the sum does not
// depend on where the numbers lie.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerSumSquares(OpRegistry& r) {
  OpDef d;
  d.name = "SumSquares";
  d.category = "Internal";
  d.role = OpRole::Internal;
  d.doc = "The sum of the squares of every element (a squared L2 norm)";
  d.inputs = {{"x", "any tensor"}};
  d.outputs = {{"y", "a scalar"}};
  d.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{}, DType::F32, c.in[0].device};
    return true;
  };
  r.add(std::move(d));
}

}  // namespace netloom
