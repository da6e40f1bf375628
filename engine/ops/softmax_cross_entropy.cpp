// SoftmaxCrossEntropy: mean over the batch of -log softmax(logits)[label], fused so
// the backward is one kernel: (softmax - target) / batch, with optional label smoothing.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerSoftmaxCrossEntropy(OpRegistry& r) {
  AttrDef smoothing =
      floatAttr("label_smoothing", 0.0, 0.0, 0.99, "mass spread evenly over all classes");
  OpDef d;
  d.name = "SoftmaxCrossEntropy";
  d.definesClasses = true;
  d.category = "Losses";
  d.role = OpRole::Loss;
  d.doc = "Cross-entropy of softmax(logits) against class labels, averaged over the batch";
  d.inputs = {{"logits", "batch × classes"},
              {.name = "labels", .doc = "batch, int32 class indices", .dataLabels = true}};
  d.outputs = {{"loss", "scalar"}};
  d.attrs = {smoothing};
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() != 2) return c.fail("expects batch × classes, got " + shapeToString(x), 0);
    if (!ops::requireLabels(c, 1, x[0])) return false;
    c.out[0] = TensorDesc{{}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0,
              b.emit("SoftmaxCrossEntropyGrad", {b.outGrad(0), b.input(0), b.input(1)}, b.attrs()));
  };
  d.flops = [](const InferCtx& c) { return 6 * numel(c.in[0].shape); };
  r.add(std::move(d));

  OpDef g;
  g.name = "SoftmaxCrossEntropyGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d logits";
  g.inputs = {{"dloss", "scalar"}, {"logits", "batch × classes"}, {"labels", "batch"}};
  g.outputs = {{"dlogits", "batch × classes"}};
  g.attrs = {smoothing};
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
