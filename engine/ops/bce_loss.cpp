// BCELoss: binary cross-entropy, on probabilities (as PyTorch's BCELoss) or, with
// from_logits, on raw scores through a stable log-sigmoid (BCEWithLogitsLoss).
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerBCELoss(OpRegistry& r) {
  AttrDef logits = boolAttr("from_logits", false, "inputs are raw scores, not probabilities");
  OpDef d;
  d.name = "BCELoss";
  d.category = "Losses";
  d.role = OpRole::Loss;
  d.doc = "Binary cross-entropy, averaged over all elements";
  d.inputs = {{"input", "probabilities (or logits)"}, {"target", "0/1 targets, same elements"}};
  d.outputs = {{"loss", "scalar"}};
  d.attrs = {logits};
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    if (c.in[1].dtype != DType::F32)
      return c.fail("expects a float32 target (set the label Input's dtype to float32)", 1);
    if (numel(c.in[0].shape) != numel(c.in[1].shape))
      return c.fail("target " + shapeToString(c.in[1].shape) + " does not match input " +
                        shapeToString(c.in[0].shape),
                    1);
    c.out[0] = TensorDesc{{}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.emit("BCELossGrad", {b.outGrad(0), b.input(0), b.input(1)}, b.attrs()));
    if (b.needsGrad(1)) {
      Attrs a = b.attrs();
      a.set("wrt_target", true);
      b.addGrad(1, b.emit("BCELossGrad", {b.outGrad(0), b.input(0), b.input(1)}, a));
    }
  };
  d.flops = [](const InferCtx& c) { return 4 * numel(c.in[0].shape); };
  r.add(std::move(d));

  OpDef g;
  g.name = "BCELossGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d input (or d loss / d target)";
  g.inputs = {{"dloss", "scalar"}, {"input", "any"}, {"target", "same elements"}};
  g.outputs = {{"dinput", "input's shape"}};
  g.attrs = {logits, boolAttr("wrt_target", false, "differentiate by the target instead")};
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
