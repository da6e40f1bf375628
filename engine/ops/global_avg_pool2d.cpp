// GlobalAvgPool2d: the mean of each channel over H×W, N×C×H×W -> N×C (keepdim:
// N×C×1×1, as PyTorch's AdaptiveAvgPool2d(1)).
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// GlobalAveragePool keeps the 1×1; a Flatten after it drops it, as NetLoom does
// without keepdim.
Status globalPoolOnnx(OnnxExportCtx& c) {
  if (c.attrs().b("keepdim")) {
    c.same("GlobalAveragePool");
    return {};
  }
  std::string pooled = c.fresh("pooled");
  c.add("GlobalAveragePool", c.fresh("pool"), {c.input(0)}, {pooled});
  c.add("Flatten", c.node().name, {pooled}, {c.output()}, {{"axis", int64_t(1)}});
  return {};
}

bool globalPoolFromOnnx(OnnxImportCtx& c) {
  if (!c.onlyAttrs({})) return false;
  const Shape* x = c.shapeOf(c.n().input(0));
  if (x && x->size() != 4) {
    c.problem("an input of shape " + onnxShapeText(*x) + ": NetLoom pools N×C×H×W");
    return false;
  }
  const std::string x0 = c.in(0);
  const OnnxNode* f = c.users(c.n().outputs[0]) == 1 ? c.soleReader(c.n().outputs[0]) : nullptr;
  const bool flatten = f && f->opType == "Flatten" && f->domain.empty() && f->i("axis", 1) == 1 &&
                       f->attrs.size() <= 1;
  if (flatten) c.take(*f);
  Attrs a;
  a.set("keepdim", !flatten);
  c.produce(c.add("GlobalAvgPool2d", {x0}, a));
  return true;
}

}  // namespace

void registerGlobalAvgPool2d(OpRegistry& r) {
  OpDef d;
  d.name = "GlobalAvgPool2d";
  d.halfFollows = true;
  d.layoutPorts = LayoutPorts{{0}, {}, {}, false};
  d.category = "Pooling";
  d.doc = "Mean of each channel over all positions";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "N × C (or N × C × 1 × 1)"}};
  d.attrs = {boolAttr("keepdim", false, "keep the 1×1 spatial dimensions")};
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() != 4) return c.fail("expects N×C×H×W, got " + shapeToString(x), 0);
    c.out[0] = TensorDesc{
        c.attrs.b("keepdim") ? Shape{x[0], x[1], 1, 1} : Shape{x[0], x[1]}, DType::F32, {}};
    return true;
  };
  d.sbp = [](const SbpCtx& c) { return splitOutsideAxes(c, {2, 3}); };  // by batch or channel
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.emit("GlobalAvgPool2dGrad", {b.outGrad(0), b.input(0)}));
  };
  d.flops = [](const InferCtx& c) { return numel(c.in[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("torch.mean",
                          {c.arg("dim", "(2, 3)", ""),
                           c.arg("keepdim", pyBool(c.attrs().b("keepdim")), "keepdim", "False")});
  };
  d.onnxExport = globalPoolOnnx;
  d.onnxImport["GlobalAveragePool"] = globalPoolFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "GlobalAvgPool2dGrad";
  g.layoutPorts = LayoutPorts{{}, {0}, {1}, false};
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "Spreads each channel's gradient evenly over H×W";
  g.inputs = {{"dy", "N × C"}, {"x", "forward input"}};
  g.outputs = {{"dx", "N × C × H × W"}};
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
