// GELU: x·Φ(x), exact (erf) or the tanh approximation, as PyTorch offers both.
#include <cmath>
#include <memory>
#include <numbers>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

double gelu(double x, const Attrs& a) {
  if (a.s("approximate") == "tanh")
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

// Opset 17 has no Gelu: written out as PyTorch writes it, so that importers
// (NetLoom's among them, by OnnxPointwise) recognise the pattern.
Status geluOnnx(OnnxExportCtx& c) {
  const std::string& name = c.node().name;
  const std::string x = c.input(0), y = c.output();
  std::string inner;
  if (c.attrs().s("approximate") == "tanh") {
    // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    std::string cube = c.fresh("cube"), scaled = c.fresh("scaled"), sum = c.fresh("sum"),
                arg = c.fresh("arg");
    c.add("Pow", c.fresh("pow"), {x, c.scalar(name + "/three", 3.f)}, {cube});
    c.add("Mul", c.fresh("mul_c"), {cube, c.scalar(name + "/c", 0.044715f)}, {scaled});
    c.add("Add", c.fresh("add_x"), {x, scaled}, {sum});
    c.add("Mul", c.fresh("mul_k"),
          {sum, c.scalar(name + "/k", float(std::sqrt(2.0 / std::numbers::pi)))}, {arg});
    inner = c.fresh("tanh_out");
    c.add("Tanh", c.fresh("tanh"), {arg}, {inner});
  } else {
    // 0.5·x·(1 + erf(x/√2))
    std::string scaled = c.fresh("div_out");
    c.add("Div", c.fresh("div"), {x, c.scalar(name + "/sqrt2", float(std::sqrt(2.0)))}, {scaled});
    inner = c.fresh("erf_out");
    c.add("Erf", c.fresh("erf"), {scaled}, {inner});
  }
  std::string plus = c.fresh("add_one_out"), times = c.fresh("mul_x_out");
  c.add("Add", c.fresh("add_one"), {inner, c.scalar(name + "/one", 1.f)}, {plus});
  c.add("Mul", c.fresh("mul_x"), {x, plus}, {times});
  c.add("Mul", name, {times, c.scalar(name + "/half", 0.5f)}, {y});
  return {};
}

std::shared_ptr<const OnnxPointwise> geluPattern() {
  auto p = std::make_shared<OnnxPointwise>();
  p->f = gelu;
  for (const char* approx : {"none", "tanh"}) {
    Attrs a;
    a.set("approximate", std::string(approx));
    p->variants.push_back(a);
  }
  return p;
}

}  // namespace

void registerGELU(OpRegistry& r) {
  AttrDef approx = stringAttr("approximate", "none", {"none", "tanh"},
                              "'none' uses erf; 'tanh' the faster approximation");
  OpDef d = ops::unaryActivation("GELU", "Gaussian error linear unit: x·Φ(x)", "GELUGrad", false);
  d.attrs = {approx};
  d.flops = [](const InferCtx& c) { return 8 * numel(c.out[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("F.gelu", {c.arg("approximate", pyStr(c.attrs().s("approximate")),
                                           "approximate", "\"none\"")});
  };
  d.onnxExport = geluOnnx;
  d.onnxPointwise = geluPattern();
  d.onnxImport["Gelu"] = [](OnnxImportCtx& c) {  // opset 20
    Attrs a;
    a.set("approximate", c.n().s("approximate", "none"));
    return c.simple("GELU", {"approximate"}, a);
  };
  r.add(std::move(d));
  r.add(ops::elementwiseGrad("GELUGrad", {approx}));
}

}  // namespace netloom
