// Add: element-wise sum of two tensors of the same shape (residual connections).
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerAdd(OpRegistry& r) {
  OpDef d;
  d.name = "Add";
  d.category = "Merge";
  d.doc = "Element-wise sum of two tensors of the same shape";
  d.inputs = {{"a", "first tensor"}, {"b", "second tensor, same shape as a"}};
  d.outputs = {{"y", "a + b"}};
  d.attrs = {stringAttr("activation", "none", {"none", "relu"},
                        "activation applied to the sum in the same loop (set by fusion)")};
  d.attrs.back().internal = true;
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
    ValueId dy = b.outGrad(0);
    if (b.attrs().s("activation") == "relu") dy = b.emit("ReLUGrad", {dy, b.output(0)});
    b.addGrad(0, dy);
    b.addGrad(1, dy);
  };
  d.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  d.torch = [](const TorchCtx&) -> Result<TorchLowering> { return TorchCtx::expr("{0} + {1}"); };
  r.add(std::move(d));
}

}  // namespace netloom
