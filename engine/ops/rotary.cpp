// RotaryEmbedding (Su et al., RoFormer): turns each pair of channels (i, i + D/2)
// of every head's queries or keys by an angle proportional to the token's position,
// so that q·k depends on the distance between positions. The rotate-half form of
// GPT-NeoX and LLaMA. The gradient turns dy back by the same angles.
#include <cmath>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"
#include "kernels/core/sequence_math.h"

namespace netloom {

namespace {

std::vector<AttrDef> rotaryAttrs() {
  return {
      floatAttr("base", 10000.0, 1.0, 1e9, "the angle's base: pair i turns by pos·base^(-2i/D)")};
}

// Opset 17: x·cos + rotate_half(x)·sin, cos and sin initializers of tokens × D.
Status rotaryOnnx(OnnxExportCtx& c) {
  const Shape& x = c.inShape(0);
  const int64_t t = x[2], dim = x[3], half = dim / 2;
  const fn::Rotary rot{float(c.attrs().f("base")), half};
  std::vector<float> cosv(size_t(t * dim)), sinv(size_t(t * dim));
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < half; ++i) {
      float c1, s1;
      rot(1.f, 0.f, p, i, 1.f, c1, s1);  // (cos a, sin a)
      cosv[size_t(p * dim + i)] = cosv[size_t(p * dim + i + half)] = c1;
      sinv[size_t(p * dim + i)] = sinv[size_t(p * dim + i + half)] = s1;
    }
  const std::string in = c.input(0), x1 = c.fresh("x1"), x2 = c.fresh("x2"),
                    neg = c.fresh("neg_x2"), turned = c.fresh("rotated"), a = c.fresh("x_cos"),
                    b = c.fresh("rot_sin");
  const std::string axes = c.ints(c.fresh("axes"), {3});
  c.add("Slice", c.fresh("slice1"),
        {in, c.ints(c.fresh("start1"), {0}), c.ints(c.fresh("end1"), {half}), axes}, {x1});
  c.add("Slice", c.fresh("slice2"),
        {in, c.ints(c.fresh("start2"), {half}), c.ints(c.fresh("end2"), {dim}), axes}, {x2});
  c.add("Neg", c.fresh("neg"), {x2}, {neg});
  c.add("Concat", c.fresh("concat"), {neg, x1}, {turned}, {{"axis", int64_t(3)}});
  c.add("Mul", c.fresh("mul_cos"), {in, c.initializer(c.fresh("cos"), {t, dim}, cosv)}, {a});
  c.add("Mul", c.fresh("mul_sin"), {turned, c.initializer(c.fresh("sin"), {t, dim}, sinv)}, {b});
  c.add("Add", c.node().name, {a, b}, {c.output()});
  return {};
}

// The base whose angles the cos and sin constants (tokens × D) hold, or NaN.
double rotaryBase(const OnnxConst& cosv, const OnnxConst& sinv, int64_t dim) {
  const int64_t half = dim / 2;
  if (cosv.shape.size() != 2 || cosv.shape != sinv.shape || cosv.shape[1] != dim ||
      cosv.shape[0] < 2 || half < 1)
    return NAN;
  // Position 1's angle of pair min(1, half - 1) is base^(-i/half).
  const int64_t i = half > 1 ? 1 : 0;
  const double angle = std::atan2(sinv.at(dim + i), cosv.at(dim + i));
  const double base = i == 0 ? 10000.0 : std::exp(-std::log(angle) * double(half) / double(i));
  const fn::Rotary rot{float(base), half};
  for (int64_t p = 0; p < cosv.shape[0]; ++p)
    for (int64_t k = 0; k < half; ++k) {
      float c1, s1;
      rot(1.f, 0.f, p, k, 1.f, c1, s1);
      for (int64_t at : {p * dim + k, p * dim + k + half})
        if (std::fabs(cosv.at(at) - c1) > 1e-5 || std::fabs(sinv.at(at) - s1) > 1e-5) return NAN;
    }
  return base;
}

// x·cos + Concat(-x[half:], x[:half])·sin, as rotaryOnnx writes it.
bool rotaryFromOnnx(OnnxPatternCtx& c, OnnxPatternMatch& out) {
  const OnnxNode& root = c.root();
  if (root.opType != "Add") return false;
  for (int k : {0, 1}) {
    const OnnxNode* a = c.producer(root.input(size_t(k)), "Mul");
    const OnnxNode* b = c.producer(root.input(size_t(1 - k)), "Mul");
    const OnnxNode* cat = b ? c.producer(b->input(0), "Concat") : nullptr;
    const OnnxNode* neg = cat ? c.producer(cat->input(0), "Neg") : nullptr;
    const OnnxNode* x2 = neg ? c.producer(neg->input(0), "Slice") : nullptr;
    const OnnxNode* x1 = x2 ? c.producer(cat->input(1), "Slice") : nullptr;
    if (!x1 || a->input(0) != x1->input(0) || x2->input(0) != x1->input(0)) continue;
    const Shape* xs = c.shapeOf(a->input(0));
    const OnnxConst *cosv = c.constOf(a->input(1)), *sinv = c.constOf(b->input(1));
    if (!xs || xs->size() != 4 || !cosv || !sinv) continue;
    const double half = double((*xs)[3] / 2);
    if (c.scalar(x1->input(1)) != 0 || c.scalar(x1->input(2)) != half ||
        c.scalar(x2->input(1)) != half || c.scalar(x2->input(2)) < 2 * half)
      continue;
    const double base = rotaryBase(*cosv, *sinv, (*xs)[3]);
    if (std::isnan(base)) continue;
    for (const OnnxNode* n : {a, b, cat, neg, x2, x1}) c.take(*n);
    OnnxPatternMatch m{"RotaryEmbedding", {a->input(0)}, {}, {}};
    m.attrs.set("base", base);
    out = std::move(m);
    return true;
  }
  return false;
}

bool inferRotary(InferCtx& c) {
  if (!ops::requireFloat(c, 0)) return false;
  const Shape& x = c.in[0].shape;
  if (x.size() != 4 || x[3] % 2 != 0)
    return c.fail("expects batch × heads × tokens × an even head size, got " + shapeToString(x), 0);
  return ops::sameAsInput(c);
}

}  // namespace

void registerRotaryEmbedding(OpRegistry& r) {
  OpDef d;
  d.name = "RotaryEmbedding";
  d.category = "Attention";
  d.doc = "Turns each head's channel pairs by angles set by the token's position (RoPE)";
  d.inputs = {{"x", "batch × heads × tokens × head size (queries or keys)"}};
  d.outputs = {{"y", "same shape"}};
  d.attrs = rotaryAttrs();
  // Each position along the last two axes is its own: split along the others.
  d.sbp = [](const SbpCtx& c) { return splitOutsideAxes(c, {-2, -1}); };
  d.infer = inferRotary;
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.emit("RotaryEmbeddingGrad", {b.outGrad(0)}, b.attrs()));
  };
  d.flops = [](const InferCtx& c) { return 3 * numel(c.in[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("rotary_embedding",
                          {c.arg("base", pyFloat(c.attrs().f("base")), "base", "10000.0")});
  };
  d.onnxExport = rotaryOnnx;
  d.onnxPattern = rotaryFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "RotaryEmbeddingGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d input of RotaryEmbedding: dy turned back";
  g.inputs = {{"dy", "batch × heads × tokens × head size"}};
  g.outputs = {{"dx", "same shape"}};
  g.attrs = rotaryAttrs();
  g.infer = inferRotary;
  r.add(std::move(g));
}

}  // namespace netloom
