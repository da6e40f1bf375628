// Softmax along one axis; its gradient reads only the output: dx = y·(dy - Σ dy·y).
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// Before opset 13 Softmax flattens the input to 2-D at `axis`: one axis only when
// it is the last.
bool softmaxFromOnnx(OnnxImportCtx& c) {
  if (!c.onlyAttrs({"axis"})) return false;
  const Shape* x = c.shapeOf(c.n().input(0));
  if (!x) {
    c.problem("the shape of its input is unknown");
    return false;
  }
  const int64_t given = c.n().i("axis", c.opset() >= 13 ? -1 : 1);
  const int64_t axis = positiveAxis(given, x->size());
  if (axis < 1 || axis >= int64_t(x->size()) ||
      (c.opset() < 13 && axis != int64_t(x->size()) - 1)) {
    c.problem("attribute axis=" + std::to_string(c.n().i("axis", 1)) + " over rank " +
              std::to_string(x->size()) + " at opset " + std::to_string(c.opset()) +
              " has no NetLoom form");
    return false;
  }
  Attrs a;
  a.set("axis", axis);
  c.produce(c.add("Softmax", {c.in(0)}, a));
  return true;
}

}  // namespace

void registerSoftmax(OpRegistry& r) {
  AttrDef axis = intAttr("axis", -1, -8, 7, "axis to normalise over; negative counts from the end");
  OpDef d;
  d.name = "Softmax";
  d.category = "Activations";
  d.doc = "Normalised exponentials along an axis";
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "probabilities, same shape"}};
  d.attrs = {axis};
  d.sbp = [](const SbpCtx& c) { return splitOutsideAxes(c, {int(c.attrs.i("axis", -1))}); };
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    if (ops::normAxis(c.attrs.i("axis"), c.in[0].shape.size()) < 1)
      return c.fail("axis " + std::to_string(c.attrs.i("axis")) + " is out of range for " +
                        shapeToString(c.in[0].shape) + " (the batch axis cannot be used)",
                    0);
    return ops::sameAsInput(c);
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.emit("SoftmaxGrad", {b.outGrad(0), b.output(0)}, b.attrs()));
  };
  d.flops = [](const InferCtx& c) { return 5 * numel(c.out[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("torch.softmax", {c.arg("dim", pyInt(c.attrs().i("axis")), "axis")});
  };
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    c.same("Softmax", {{"axis", c.attrs().i("axis")}});
    return {};
  };
  d.onnxImport["Softmax"] = softmaxFromOnnx;
  r.add(std::move(d));
  r.add(ops::unaryGrad("SoftmaxGrad", {axis}));
}

}  // namespace netloom
