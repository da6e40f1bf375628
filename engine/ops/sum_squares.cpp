// SumSquares: Σ x², a scalar; Histogram: the values' histogram (fn::Histogram). The
// compiler emits both on each parameter's gradient when a run reports gradient norms;
// they read any layout, since neither depends on where the numbers lie.
#include "engine/ops/op_helpers.h"
#include "kernels/core/functors.h"

namespace netloom {

void registerSumSquares(OpRegistry& r) {
  OpDef d;
  d.name = "SumSquares";
  d.category = "Internal";
  d.role = OpRole::Internal;
  d.doc = "The sum of the squares of every element (a squared L2 norm)";
  d.inputs = {{"x", "any tensor"}};
  d.outputs = {{"y", "a scalar"}};
  d.anyLayout = true;
  d.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{}, DType::F32, c.in[0].device};
    return true;
  };
  r.add(std::move(d));

  OpDef h;
  h.name = "Histogram";
  h.category = "Internal";
  h.role = OpRole::Internal;
  h.doc = "The minimum, the maximum and the counts of equal bins between them";
  h.inputs = {{"x", "any tensor"}};
  h.outputs = {{"y", "[min, max, count per bin]"}};
  h.anyLayout = true;
  h.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{fn::Histogram::kSize}, DType::F32, c.in[0].device};
    return true;
  };
  r.add(std::move(h));
}

}  // namespace netloom
