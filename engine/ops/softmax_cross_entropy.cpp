// SoftmaxCrossEntropy: the mean of -log softmax(logits)[label] over every position
// whose label is not ignore_index, classes on the last axis (batch × classes, or a
// sequence's batch × tokens × vocabulary), fused so the backward is one kernel:
// (softmax - target) / counted, with optional label smoothing, as PyTorch's
// cross_entropy with reduction 'mean'.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerSoftmaxCrossEntropy(OpRegistry& r) {
  std::vector<AttrDef> attrs = {
      floatAttr("label_smoothing", 0.0, 0.0, 0.99, "mass spread evenly over all classes"),
      intAttr("ignore_index", -100, -1e9, 1e9, "a label that counts for nothing (padding)")};
  OpDef d;
  d.name = "SoftmaxCrossEntropy";
  d.definesClasses = true;
  d.category = "Losses";
  d.role = OpRole::Loss;
  d.doc = "Cross-entropy of softmax(logits) against class labels, averaged over the batch";
  d.inputs = {{"logits", "batch × … × classes"},
              {.name = "labels", .doc = "batch × …, int32 class indices", .dataLabels = true}};
  d.outputs = {{"loss", "scalar"}};
  d.attrs = attrs;
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() < 2) return c.fail("expects batch × … × classes, got " + shapeToString(x), 0);
    if (!ops::requireLabels(c, 1, Shape(x.begin(), x.end() - 1))) return false;
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
  g.inputs = {{"dloss", "scalar"}, {"logits", "batch × … × classes"}, {"labels", "batch × …"}};
  g.outputs = {{"dlogits", "as logits"}};
  g.attrs = attrs;
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
