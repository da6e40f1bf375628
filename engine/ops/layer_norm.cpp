// LayerNorm: normalises each sample over its last `normalized_dims` dimensions, with
// a learned scale and shift of that trailing shape, as PyTorch's LayerNorm. The
// per-row mean and biased variance are hidden outputs for backward.
#include <algorithm>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/init.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// LayerNormalization over the trailing dimensions; without affine, a scale of ones.
Status layerNormOnnx(OnnxExportCtx& c) {
  const Node& n = c.node();
  const Shape& x = c.inShape(0);
  const int64_t k = c.attrs().i("normalized_dims");
  const Shape tail(x.end() - k, x.end());
  std::vector<std::string> ins{c.input(0)};
  if (c.attrs().b("affine")) {
    for (int p : {1, 2}) {
      auto name = c.param(p, tail);
      if (!name) return name.error();
      ins.push_back(*name);
    }
  } else {
    ins.push_back(
        c.initializer(n.name + ".scale", tail, std::vector<float>(size_t(numel(tail)), 1.f)));
  }
  c.add("LayerNormalization", n.name, ins, {c.output()},
        {{"axis", int64_t(x.size()) - k}, {"epsilon", float(c.attrs().f("eps"))}});
  return {};
}

bool layerNormFromOnnx(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  bool ok = c.onlyAttrs({"axis", "epsilon", "stash_type"}) && !c.extraOutputsUsed();
  const Shape* x = c.shapeOf(n.input(0));
  const OnnxConst* scale = c.weightInput(1, "scale");
  const bool hasBias = !n.input(2).empty();
  const OnnxConst* bias = hasBias ? c.weightInput(2, "bias") : nullptr;
  if (!ok || !scale || (hasBias && !bias)) return false;
  if (!x) {
    c.problem("the shape of its input is unknown");
    return false;
  }
  const int64_t axis = positiveAxis(n.i("axis", -1), x->size());
  Shape tail(x->begin() + std::clamp<int64_t>(axis, 0, int64_t(x->size())), x->end());
  bool known = axis >= 1;
  for (int64_t v : tail) known = known && v >= 0;
  if (!known || scale->size() != numel(tail) || (bias && bias->size() != numel(tail))) {
    c.problem("attribute axis=" + std::to_string(n.i("axis", -1)) + " over " + onnxShapeText(*x) +
              " with a scale of shape " + onnxShapeText(scale->shape));
    return false;
  }
  Attrs a;
  a.set("normalized_dims", int64_t(tail.size()));
  a.set("eps", double(n.f("epsilon", 1e-5f)));
  const std::string d = c.add("LayerNorm", {c.in(0)}, a);
  c.param(d, "weight", *scale, tail);
  OnnxConst zeros;
  zeros.f.assign(size_t(numel(tail)), 0.f);
  c.param(d, "bias", bias ? *bias : zeros, tail);
  c.produce(d);
  return true;
}

// Split outside the normalised trailing axes.
std::vector<SbpSignature> layerNormSbp(const SbpCtx& c) {
  std::vector<int> tail;
  for (int64_t k = 1; k <= c.attrs.i("normalized_dims"); ++k) tail.push_back(-int(k));
  return splitOutsideAxes(c, tail);
}

}  // namespace

void registerLayerNorm(OpRegistry& r) {
  std::vector<AttrDef> attrs = {
      intAttr("normalized_dims", 1, 1, 7, "how many trailing dimensions to normalise over"),
      floatAttr("eps", 1e-5, 0.0, 1.0, "added to the variance"),
      boolAttr("affine", true, "learn an element-wise scale and shift"),
  };
  OpDef d;
  d.name = "LayerNorm";
  d.category = "Normalization";
  d.doc = "Normalises each sample over its trailing dimensions";
  d.inputs = {{"x", "… × normalized shape"}};
  d.outputs = {{"y", "same shape"},
               {"mean", "per-row mean", false, true},
               {"var", "per-row biased variance", false, true}};
  d.attrs = attrs;
  d.params = [](const Attrs& a) {
    return a.b("affine") ? std::vector<std::string>{"weight", "bias"} : std::vector<std::string>{};
  };
  d.sbp = layerNormSbp;
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    int64_t k = c.attrs.i("normalized_dims");
    if (k >= int64_t(x.size()))
      return c.fail("attribute 'normalized_dims' (" + std::to_string(k) +
                        ") must leave the batch dimension of " + shapeToString(x),
                    0);
    Shape tail(x.end() - k, x.end());
    for (auto& p : c.params) p = TensorDesc{tail, DType::F32, {}};
    c.out[0] = c.in[0];
    c.out[1] = c.out[2] = TensorDesc{{numel(x) / numel(tail)}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) { ops::normalizationGrad(b, "LayerNormGrad"); };
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng&) {
    if (a.b("affine")) {
      fillConstant(p[0], 1.0f);
      fillConstant(p[1], 0.0f);
    }
  };
  d.flops = [](const InferCtx& c) { return 5 * numel(c.in[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    const Shape& x = c.inShape(0);
    Shape tail(x.end() - a.i("normalized_dims"), x.end());
    return TorchCtx::module(
        "nn.LayerNorm",
        {c.pos("normalized_shape", tail.size() == 1 ? pyInt(tail[0]) : pyTuple(tail), ""),
         c.arg("eps", pyFloat(a.f("eps")), "eps", "1e-05"),
         c.arg("elementwise_affine", pyBool(a.b("affine")), "affine", "True")});
  };
  d.onnxExport = layerNormOnnx;
  d.onnxImport["LayerNormalization"] = layerNormFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "LayerNormGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d input, weight and bias of LayerNorm";
  g.inputs = {{"dy", "gradient of the output"},
              {"x", "forward input"},
              {"mean", "forward row means"},
              {"var", "forward row variance"},
              {"weight", "scale, when affine", true}};
  g.outputs = {{"dx", "gradient of the input"},
               {"dweight", "normalized shape"},
               {"dbias", "normalized shape"}};
  g.attrs = attrs;
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    Shape tail(c.in[1].shape.end() - c.attrs.i("normalized_dims"), c.in[1].shape.end());
    c.out[1] = c.out[2] = TensorDesc{tail, DType::F32, {}};
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
