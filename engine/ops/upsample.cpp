// Upsample: nearest-neighbour enlargement of N×C×H×W by whole factors; its gradient
// sums each block of the output gradient.
#include <cmath>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"
#include "kernels/core/geometry.h"

namespace netloom {

namespace {

// Whole factors with asymmetric coordinates and floor: output pixel i reads input
// pixel ⌊i / s⌋, NetLoom's nearest enlargement.
Status upsampleOnnx(OnnxExportCtx& c) {
  int64_t sh = 1, sw = 1;
  pair2d(c.attrs(), "scale_factor", 2, sh, sw);
  if (c.attrs().s("mode") != "nearest")
    return c.noForm("attribute mode='" + c.attrs().s("mode") + "'");
  const std::string& name = c.node().name;
  std::string scales = c.initializer(name + "/scales", {4}, {1.f, 1.f, float(sh), float(sw)});
  c.add("Resize", name, {c.input(0), "", scales}, {c.output()},
        {{"mode", std::string("nearest")},
         {"coordinate_transformation_mode", std::string("asymmetric")},
         {"nearest_mode", std::string("floor")}});
  return {};
}

// The enlargement of each dimension from the scales attribute (Upsample before
// opset 9), the scales input, or the sizes input.
std::vector<double> resizeFactors(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  std::vector<double> factors;
  const Shape* x = c.shapeOf(n.input(0));
  const size_t scalesAt = n.opType == "Upsample" ? 1 : 2;
  const OnnxConst* sc = n.input(scalesAt).empty() ? nullptr : c.constOf(n.input(scalesAt));
  const OnnxConst* sz = n.input(3).empty() ? nullptr : c.constOf(n.input(3));
  if (n.has("scales")) {
    for (float f : n.attrs.at("scales").floats) factors.push_back(f);
  } else if (sc && sc->size() > 0) {
    for (int64_t k = 0; k < sc->size(); ++k) factors.push_back(sc->at(k));
  } else if (sz && x && sz->size() == int64_t(x->size())) {
    for (int64_t k = 0; k < sz->size(); ++k)
      factors.push_back((*x)[size_t(k)] > 0 ? sz->at(k) / double((*x)[size_t(k)]) : 1.0);
  }
  return factors;
}

bool resizeFromOnnx(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  bool ok = c.onlyAttrs({"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                         "exclude_outside", "extrapolation_value", "scales"});
  const bool old = n.opType == "Upsample";
  const std::string mode = n.s("mode", "nearest");
  const std::string coords =
      n.s("coordinate_transformation_mode", old ? "asymmetric" : "half_pixel");
  const std::string nearest = n.s("nearest_mode", old ? "floor" : "round_prefer_floor");
  // With whole factors s, output pixel i must read input pixel ⌊i / s⌋: asymmetric
  // coordinates floor to it, half-pixel ones round to it.
  const bool exact = (coords == "asymmetric" && nearest == "floor") ||
                     ((coords == "half_pixel" || coords == "pytorch_half_pixel") &&
                      (nearest == "round_prefer_floor" || nearest == "round_prefer_ceil"));
  if (mode != "nearest" || !exact) {
    c.problem("mode '" + mode + "' with coordinate_transformation_mode '" + coords +
              "' and nearest_mode '" + nearest +
              "' has no NetLoom form (NetLoom enlarges by whole factors, nearest)");
    ok = false;
  }
  const std::vector<double> f = resizeFactors(c);
  auto whole = [](double v) { return v >= 1 && std::abs(v - std::round(v)) < 1e-6; };
  if (f.size() != 4 || f[0] != 1 || f[1] != 1 || !whole(f[2]) || !whole(f[3])) {
    c.problem(
        "its scales or sizes are not whole enlargements of height and width known before the "
        "model runs");
    ok = false;
  }
  if (!ok) return false;
  Attrs a;
  a.set("scale_factor", std::vector<int64_t>{int64_t(std::round(f[2])), int64_t(std::round(f[3]))});
  c.produce(c.add("Upsample", {c.in(0)}, a));
  return true;
}

}  // namespace

void registerUpsample(OpRegistry& r) {
  AttrDef scale = intsAttr("scale_factor", {2}, 1, 64, "enlargement: s or [sh, sw]");
  AttrDef mode = stringAttr("mode", "nearest", {"nearest"}, "interpolation");
  OpDef d;
  d.name = "Upsample";
  d.halfFollows = true;
  d.category = "Layers";
  d.doc = "Enlarges N×C×H×W by whole factors (nearest neighbour)";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "N × C × H·sh × W·sw"}};
  d.attrs = {scale, mode};
  d.inplaceable = false;
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() != 4) return c.fail("expects N×C×H×W, got " + shapeToString(x), 0);
    int64_t sh = 1, sw = 1;
    if (!pair2d(c.attrs, "scale_factor", 2, sh, sw))
      return c.fail("attribute 'scale_factor' takes 1 or 2 values");
    c.out[0] = TensorDesc{{x[0], x[1], x[2] * sh, x[3] * sw}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.emit("UpsampleGrad", {b.outGrad(0), b.input(0)}, b.attrs()));
  };
  d.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  // Nearest neighbour by whole factors is a repeat of every row and column, exactly.
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    int64_t sh = 1, sw = 1;
    pair2d(c.attrs(), "scale_factor", 2, sh, sw);
    return TorchCtx::expr("{0}.repeat_interleave({a0}, dim=2).repeat_interleave({a1}, dim=3)",
                          {c.arg("", pyInt(sh), ""), c.arg("", pyInt(sw), "")});
  };
  d.onnxExport = upsampleOnnx;
  d.onnxImport["Resize"] = resizeFromOnnx;
  d.onnxImport["Upsample"] = resizeFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "UpsampleGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "Sums each block of the output gradient";
  g.inputs = {{"dy", "gradient of the output"}, {"x", "forward input"}};
  g.outputs = {{"dx", "gradient of the input"}};
  g.attrs = {scale, mode};
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
