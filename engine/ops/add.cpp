// Add: element-wise sum of two tensors of the same shape (residual connections).
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerAdd(OpRegistry& r) {
  OpDef d;
  d.name = "Add";
  d.category = "Merge";
  d.doc = "Element-wise sum of two tensors of the same shape";
  d.inputs = {{"a", "first tensor"}, {"b", "second tensor, same shape as a"}};
  d.outputs = {{"y", "a + b"}};
  d.inplaceable = true;
  d.elementwise = true;
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0) || !ops::requireFloat(c, 1)) return false;
    if (c.in[0].shape != c.in[1].shape)
      return c.fail("shape " + shapeToString(c.in[1].shape) + " does not match input 'a' shape " +
                        shapeToString(c.in[0].shape),
                    1);
    return ops::sameAsInput(c);
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.outGrad(0));
    b.addGrad(1, b.outGrad(0));
  };
  d.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  r.add(std::move(d));
}

}  // namespace netloom
