// RMSNorm: scales each sample's trailing dimensions by the reciprocal of their root
// mean square, then by a learned weight (Zhang and Sennrich, 2019; LLaMA's norm):
// y = x / sqrt(mean(x²) + eps) · w. No mean is taken out and there is no shift. The
// per-row 1/rms is a hidden output for backward.
#include <algorithm>
#include <cmath>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/init.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

std::vector<AttrDef> rmsNormAttrs() {
  return {intAttr("normalized_dims", 1, 1, 7, "how many trailing dimensions to normalise over"),
          floatAttr("eps", 1e-6, 0.0, 1.0, "added to the mean square"),
          boolAttr("affine", true, "learn an element-wise scale")};
}

Shape tailOf(const Shape& x, int64_t k) {
  return Shape(x.end() - k, x.end());
}

// Opset 17 has no RMSNorm: x · 1/sqrt(ReduceMean(x·x) + eps) · w, over the trailing axes.
Status rmsNormOnnx(OnnxExportCtx& c) {
  const Shape& x = c.inShape(0);
  const int64_t k = c.attrs().i("normalized_dims");
  std::vector<int64_t> axes;
  for (int64_t i = int64_t(x.size()) - k; i < int64_t(x.size()); ++i) axes.push_back(i);
  const std::string in = c.input(0), sq = c.fresh("square"), ms = c.fresh("mean_square"),
                    shifted = c.fresh("shifted"), rms = c.fresh("rms"), inv = c.fresh("inv_rms");
  c.add("Mul", c.fresh("mul"), {in, in}, {sq});
  c.add("ReduceMean", c.fresh("reduce_mean"), {sq}, {ms},
        {{"axes", axes}, {"keepdims", int64_t(1)}});
  c.add("Add", c.fresh("add"), {ms, c.scalar(c.fresh("eps"), float(c.attrs().f("eps")))},
        {shifted});
  c.add("Sqrt", c.fresh("sqrt"), {shifted}, {rms});
  c.add("Reciprocal", c.fresh("reciprocal"), {rms}, {inv});
  if (!c.attrs().b("affine")) {
    c.add("Mul", c.node().name, {in, inv}, {c.output()});
    return {};
  }
  auto w = c.param(1, tailOf(x, k));
  if (!w) return w.error();
  const std::string normed = c.fresh("normed");
  c.add("Mul", c.fresh("normalize"), {in, inv}, {normed});
  c.add("Mul", c.node().name, {normed, *w}, {c.output()});
  return {};
}

// The other operand of commutative node `n` than `v`; empty when `v` is neither.
std::string otherOperand(const OnnxNode& n, const std::string& v) {
  if (n.input(0) == v) return n.input(1);
  if (n.input(1) == v) return n.input(0);
  return {};
}

// x·Reciprocal(Sqrt(ReduceMean(x·x) + eps)) [· w], as rmsNormOnnx writes it and as
// PyTorch writes x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) [* w].
bool rmsNormFromOnnx(OnnxPatternCtx& c, OnnxPatternMatch& out) {
  const OnnxNode& root = c.root();
  if (root.opType != "Mul") return false;
  const OnnxConst* w = nullptr;
  const OnnxNode* normed = &root;
  for (int k : {0, 1}) {
    const OnnxConst* maybe = c.constOf(root.input(size_t(k)));
    const OnnxNode* other = c.producer(root.input(size_t(1 - k)), "Mul");
    if (maybe && maybe->isFloat && other) w = maybe, normed = other;
  }
  for (int k : {0, 1}) {
    const std::string x = normed->input(size_t(k)), invName = normed->input(size_t(1 - k));
    const OnnxNode* inv = c.producer(invName, "Reciprocal");
    const OnnxNode* rms = inv ? c.producer(inv->input(0), "Sqrt") : nullptr;
    const OnnxNode* shifted = rms ? c.producer(rms->input(0), "Add") : nullptr;
    if (!shifted) continue;
    const OnnxNode* mean = nullptr;
    double eps = NAN;
    for (int e : {0, 1})
      if (const OnnxNode* m = c.producer(shifted->input(size_t(e)), "ReduceMean"))
        mean = m, eps = c.scalar(shifted->input(size_t(1 - e)));
    if (!mean || std::isnan(eps)) continue;
    const OnnxNode* sq = c.producerOf(mean->input(0));
    const bool squares =
        sq && ((sq->opType == "Mul" && sq->input(0) == x && sq->input(1) == x) ||
               (sq->opType == "Pow" && sq->input(0) == x && c.scalar(sq->input(1)) == 2.0));
    const Shape* xs = c.shapeOf(x);
    if (!squares || !xs || mean->i("keepdims", 1) != 1) continue;
    std::vector<int64_t> axes = mean->ints("axes");
    if (axes.empty() && c.constOf(mean->input(1)))
      for (int64_t a : c.constOf(mean->input(1))->i) axes.push_back(a);
    for (int64_t& a : axes) a = positiveAxis(a, xs->size());
    std::sort(axes.begin(), axes.end());
    const int64_t k0 = int64_t(xs->size()) - int64_t(axes.size());
    bool trailing = !axes.empty() && k0 >= 1;
    for (size_t i = 0; trailing && i < axes.size(); ++i) trailing = axes[i] == k0 + int64_t(i);
    if (!trailing) continue;
    const Shape tail = tailOf(*xs, int64_t(axes.size()));
    if (w && w->size() != numel(tail)) continue;
    for (const OnnxNode* n : {normed, inv, rms, shifted, mean, sq})
      if (n != &root) c.take(*n);
    OnnxPatternMatch m{"RMSNorm", {x}, {}, {}};
    m.attrs.set("normalized_dims", int64_t(axes.size()));
    m.attrs.set("eps", eps);
    m.attrs.set("affine", w != nullptr);
    if (w) {
      OnnxConst weight = *w;
      weight.shape = tail;
      m.params.push_back({"weight", weight});
    }
    out = std::move(m);
    return true;
  }
  return false;
}

}  // namespace

void registerRMSNorm(OpRegistry& r) {
  OpDef d;
  d.name = "RMSNorm";
  d.category = "Normalization";
  d.doc = "Scales each sample's trailing dimensions to unit root mean square";
  d.inputs = {{"x", "… × normalized shape"}};
  d.outputs = {{"y", "same shape"}, {"invrms", "per-row 1/rms", false, true}};
  d.attrs = rmsNormAttrs();
  d.params = [](const Attrs& a) {
    return a.b("affine") ? std::vector<std::string>{"weight"} : std::vector<std::string>{};
  };
  d.sbp = [](const SbpCtx& c) { return splitOutsideAxes(c, {-1}); };
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    const int64_t k = c.attrs.i("normalized_dims");
    if (k >= int64_t(x.size()))
      return c.fail("attribute 'normalized_dims' (" + std::to_string(k) +
                        ") must leave the batch dimension of " + shapeToString(x),
                    0);
    for (auto& p : c.params) p = TensorDesc{tailOf(x, k), DType::F32, {}};
    c.out[0] = c.in[0];
    c.out[1] = TensorDesc{{numel(x) / numel(tailOf(x, k))}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    std::vector<ValueId> in = {b.outGrad(0), b.input(0), b.output(1)};
    if (b.numInputs() > 1) in.push_back(b.input(1));
    std::vector<ValueId> g = b.emitN("RMSNormGrad", in, b.attrs());
    b.addGrad(0, g[0]);
    if (b.numInputs() > 1) b.addGrad(1, g[1]);
  };
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng&) {
    if (a.b("affine")) fillConstant(p[0], 1.0f);
  };
  d.flops = [](const InferCtx& c) { return 4 * numel(c.in[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    const Shape tail = tailOf(c.inShape(0), a.i("normalized_dims"));
    return TorchCtx::module(
        "RMSNorm",
        {c.pos("normalized_shape", tail.size() == 1 ? pyInt(tail[0]) : pyTuple(tail), ""),
         c.arg("eps", pyFloat(a.f("eps")), "eps", "1e-06"),
         c.arg("elementwise_affine", pyBool(a.b("affine")), "affine", "True")});
  };
  d.onnxExport = rmsNormOnnx;
  d.onnxPattern = rmsNormFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "RMSNormGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d input and weight of RMSNorm";
  g.inputs = {{"dy", "gradient of the output"},
              {"x", "forward input"},
              {"invrms", "forward rows' 1/rms"},
              {"weight", "scale, when affine", true}};
  g.outputs = {{"dx", "gradient of the input"}, {"dweight", "normalized shape"}};
  g.attrs = rmsNormAttrs();
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    c.out[1] = TensorDesc{tailOf(c.in[1].shape, c.attrs.i("normalized_dims")), DType::F32, {}};
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
