// Dropout: in training, zeroes each element with probability p and scales the rest
// by 1/(1-p); in evaluation, the identity. The mask is a pure function of (seed,
// step, node, index), so the backward pass regenerates it instead of storing it:
// the gradient is Dropout applied to dy with the same attributes.
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerDropout(OpRegistry& r) {
  OpDef d;
  d.name = "Dropout";
  d.category = "Layers";
  d.doc = "Randomly zeroes elements while training (inverted dropout)";
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "same shape"}};
  d.attrs = {floatAttr("p", 0.5, 0.0, 0.99, "probability of zeroing an element")};
  d.inplaceable = true;
  d.elementwise = true;
  d.infer = [](InferCtx& c) { return ops::requireFloat(c, 0) && ops::sameAsInput(c); };
  d.grad = [](GradBuilder& b) { b.addGrad(0, b.emit("Dropout", {b.outGrad(0)}, b.attrs())); };
  // NetLoom's masks come from its own counter-based streams; PyTorch draws its own,
  // with the same probability and the same 1/(1-p) scaling.
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("F.dropout", {c.arg("p", pyFloat(c.attrs().f("p")), "p"),
                                        c.arg("training", "self.training", "")});
  };
  r.add(std::move(d));
}

}  // namespace netloom
