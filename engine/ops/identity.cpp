// Identity: passes its input through; useful as a named tap or a graph output.
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerIdentity(OpRegistry& r) {
  OpDef d;
  d.name = "Identity";
  d.halfFollows = true;
  d.category = "Shape";
  d.doc = "Passes the input through unchanged";
  d.inputs = {{"x", "any tensor"}};
  d.outputs = {{"y", "the same tensor"}};
  d.inplaceable = true;
  d.view = true;
  d.elementwise = true;
  d.infer = ops::sameAsInput;
  d.grad = [](GradBuilder& b) { b.addGrad(0, b.outGrad(0)); };
  d.torch = [](const TorchCtx&) -> Result<TorchLowering> { return TorchCtx::expr("{0}"); };
  d.onnxForm = "Identity(x)";
  r.add(std::move(d));
}

}  // namespace netloom
