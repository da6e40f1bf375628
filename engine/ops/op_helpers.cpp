#include "engine/ops/op_helpers.h"

namespace netloom::ops {

bool sameAsInput(InferCtx& c) {
  c.out[0] = c.in[0];
  return true;
}

bool requireFloat(InferCtx& c, int port) {
  // bf16 only inside a compiled step, where mixed precision stores a float tensor so.
  if (c.in[port].dtype != DType::F32 && c.in[port].dtype != DType::BF16)
    return c.fail(std::string("expects float32, got ") + dtypeName(c.in[port].dtype), port);
  return true;
}

bool requireLabels(InferCtx& c, int port, int64_t batch) {
  return requireLabels(c, port, Shape{batch});
}

bool requireLabels(InferCtx& c, int port, const Shape& want) {
  const TensorDesc& l = c.in[port];
  if (l.dtype != DType::I32)
    return c.fail(std::string("expects int32 class labels, got ") + dtypeName(l.dtype) +
                      " (set the label Input's dtype to int32)",
                  port);
  if (l.shape != want)
    return c.fail(
        "expects labels of shape " + shapeToString(want) + ", got " + shapeToString(l.shape), port);
  return true;
}

OpDef unaryActivation(std::string name, std::string doc, std::string gradOp, bool gradFromOutput) {
  OpDef d;
  d.name = std::move(name);
  d.category = "Activations";
  d.doc = std::move(doc);
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "same shape as x"}};
  d.inplaceable = true;
  d.elementwise = true;
  d.halfFollows = true;
  d.infer = [](InferCtx& c) { return requireFloat(c, 0) && sameAsInput(c); };
  d.grad = [gradOp, gradFromOutput](GradBuilder& b) {
    ValueId ref = gradFromOutput ? b.output(0) : b.input(0);
    b.addGrad(0, b.emit(gradOp, {b.outGrad(0), ref}, b.attrs()));
  };
  d.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  return d;
}

OpDef unaryGrad(std::string name, std::vector<AttrDef> attrs) {
  OpDef d;
  d.name = std::move(name);
  d.category = "Internal";
  d.doc = "backward of an element-wise activation";
  d.attrs = std::move(attrs);
  d.role = OpRole::Internal;
  d.inputs = {{"dy", "gradient of the output"}, {"ref", "forward input or output"}};
  d.outputs = {{"dx", "gradient of the input"}};
  d.inplaceable = true;
  d.infer = sameAsInput;
  return d;
}

OpDef internalOp(std::string name, std::string doc, OpRole role) {
  OpDef d;
  d.name = std::move(name);
  d.category = "Internal";
  d.role = role;
  d.doc = std::move(doc);
  return d;
}

OpDef elementwiseGrad(std::string name, std::vector<AttrDef> attrs) {
  OpDef d = unaryGrad(std::move(name), std::move(attrs));
  d.elementwise = true;
  return d;
}

// Scores batch × … × classes against labels batch × …: every position is a sample
// (a language model's next-token accuracy).
bool inferClassMetric(InferCtx& c) {
  const Shape& x = c.in[0].shape;
  if (x.size() < 2) return c.fail("expects batch × … × classes, got " + shapeToString(x), 0);
  if (!requireLabels(c, 1, Shape(x.begin(), x.end() - 1))) return false;
  c.out[0] = TensorDesc{{}, DType::F32, {}};
  return true;
}

void reshapeGradBack(GradBuilder& b) {
  const Shape& x = b.desc(b.input(0)).shape;
  Attrs a;
  a.set("shape", Shape(x.begin() + 1, x.end()));
  b.addGrad(0, b.emit("Reshape", {b.outGrad(0)}, a));
}

void normalizationGrad(GradBuilder& b, const std::string& gradOp, bool reluOutput) {
  bool affine = b.attrs().b("affine");
  ValueId dy = b.outGrad(0);
  if (reluOutput) dy = b.emit("ReLUGrad", {dy, b.output(0)});
  std::vector<ValueId> in = {dy, b.input(0), b.output(1), b.output(2)};
  if (affine) in.push_back(b.input(1));
  auto g = b.emitN(gradOp, in, b.attrs());
  if (g.size() < 3) return;
  b.addGrad(0, g[0]);
  if (affine) {
    b.addGrad(1, g[1]);
    b.addGrad(2, g[2]);
  }
}

int normAxis(int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  return axis < 0 || axis >= r ? -1 : static_cast<int>(axis);
}

}  // namespace netloom::ops
