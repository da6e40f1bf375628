// ScaledDotProductAttention: softmax(q·kᵀ·scale + mask)·v per batch and head, as
// PyTorch's F.scaled_dot_product_attention computes it: causal (top-left aligned:
// query i sees keys j <= i), an optional mask, and dropout on the probabilities in
// training. Kernels never hold the T × S matrix of a head:
// they walk keys in blocks with an online softmax and keep each query row's
// log-sum-exp (a hidden output), from which the backward pass recomputes the
// probabilities block by block.
#include <cmath>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

std::vector<AttrDef> attentionAttrs() {
  return {boolAttr("causal", false, "query i attends to keys 0..i only"),
          floatAttr("dropout", 0.0, 0.0, 0.99, "probability of dropping an attention weight"),
          floatAttr("scale", 0.0, 0.0, 1e6, "score scale; 0: 1/sqrt(head size)")};
}

double scaleOf(const Attrs& a, int64_t headSize) {
  const double s = a.f("scale");
  return s > 0 ? s : 1.0 / std::sqrt(double(headSize));
}

// Why the mask cannot go with scores of shape [B, H, T, S]; empty when it can.
std::string maskProblem(const TensorDesc& m, const Shape& scores) {
  if (m.dtype != DType::F32 && m.dtype != DType::I32)
    return "mask must be float (added) or int32 (nonzero keeps), got " +
           std::string(dtypeName(m.dtype));
  bool fits = m.shape.size() == 4;
  for (size_t i = 0; fits && i < 4; ++i) fits = m.shape[i] == 1 || m.shape[i] == scores[i];
  if (!fits)
    return "mask of shape " + shapeToString(m.shape) + " does not broadcast to the scores " +
           shapeToString(scores) + " (batch, heads, queries, keys; a padding mask is B×1×1×S)";
  return {};
}

bool inferAttention(InferCtx& c) {
  for (int k = 0; k < 3; ++k)
    if (!ops::requireFloat(c, k)) return false;
  const Shape &q = c.in[0].shape, &k = c.in[1].shape, &v = c.in[2].shape;
  for (int p = 0; p < 3; ++p)
    if (c.in[size_t(p)].shape.size() != 4)
      return c.fail(
          "expects batch × heads × tokens × head size, got " + shapeToString(c.in[size_t(p)].shape),
          p);
  if (k[0] != q[0] || k[1] != q[1] || k[3] != q[3])
    return c.fail("keys " + shapeToString(k) + " do not match queries " + shapeToString(q) +
                      " in batch, heads and head size",
                  1);
  if (v[0] != q[0] || v[1] != q[1] || v[2] != k[2])
    return c.fail("values " + shapeToString(v) + " do not match keys " + shapeToString(k) +
                      " in batch, heads and tokens",
                  2);
  if (c.in.size() > 3) {
    const std::string why = maskProblem(c.in[3], {q[0], q[1], q[2], k[2]});
    if (!why.empty()) return c.fail(why, 3);
  }
  c.out[0] = TensorDesc{{q[0], q[1], q[2], v[3]}, DType::F32, {}};
  c.out[1] = TensorDesc{{q[0], q[1], q[2]}, DType::F32, {}};
  return true;
}

// The mask as PyTorch's attn_mask: a float one added, an int32 one as booleans.
std::string torchMask(const TorchCtx& c) {
  if (c.node().inputs.size() < 4) return "None";
  return "{3}";
}

// Opset 17: Softmax(q·kᵀ·scale [+ mask]) · v, with the causal mask an initializer of
// -inf above the diagonal. Dropout is the identity in an exported (inference) model.
Status attentionOnnx(OnnxExportCtx& c) {
  const Shape &q = c.inShape(0), &k = c.inShape(1);
  const int64_t t = q[2], s = k[2];
  const std::string kt = c.fresh("k_t"), scores = c.fresh("scores"), scaled = c.fresh("scaled"),
                    probs = c.fresh("probs");
  c.add("Transpose", c.fresh("transpose"), {c.input(1)}, {kt},
        {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  c.add("MatMul", c.fresh("scores"), {c.input(0), kt}, {scores});
  c.add("Mul", c.fresh("scale"),
        {scores, c.scalar(c.fresh("scale"), float(scaleOf(c.attrs(), q[3])))}, {scaled});
  std::string logits = scaled;
  if (c.attrs().b("causal")) {
    std::vector<float> tri(size_t(t * s), 0.f);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = i + 1; j < s; ++j) tri[size_t(i * s + j)] = -INFINITY;
    const std::string masked = c.fresh("causal_scores");
    c.add("Add", c.fresh("causal"), {logits, c.initializer(c.fresh("causal_mask"), {t, s}, tri)},
          {masked});
    logits = masked;
  }
  if (c.node().inputs.size() > 3) {
    const std::string masked = c.fresh("masked_scores");
    if (c.inShape(3).empty()) return c.noForm("a scalar mask");
    std::string m = c.input(3);
    if (c.dtype(c.node().inputs[3]) == DType::I32) {
      // An int32 mask (nonzero keeps) becomes 0 or -inf: Where(float(m) == 0, -inf, 0).
      const std::string mf = c.fresh("mask_f"), hidden = c.fresh("mask_hidden"),
                        added = c.fresh("mask_added");
      c.add("Cast", c.fresh("cast"), {m}, {mf}, {{"to", int64_t(1)}});
      c.add("Equal", c.fresh("equal"), {mf, c.scalar(c.fresh("zero"), 0.f)}, {hidden});
      c.add("Where", c.fresh("where"),
            {hidden, c.scalar(c.fresh("minus_inf"), -INFINITY), c.scalar(c.fresh("keep"), 0.f)},
            {added});
      m = added;
    }
    c.add("Add", c.fresh("mask"), {logits, m}, {masked});
    logits = masked;
  }
  c.add("Softmax", c.fresh("softmax"), {logits}, {probs}, {{"axis", int64_t(-1)}});
  c.add("MatMul", c.node().name, {probs, c.input(2)}, {c.output()});
  return {};
}

// Whether constant `c` is 0 on and below the diagonal and -inf above it: a causal
// mask over T × S scores.
bool isCausalMask(const OnnxConst& c) {
  if (c.shape.size() < 2 || !c.isFloat) return false;
  const int64_t t = c.shape[c.shape.size() - 2], s = c.shape.back();
  if (c.size() != t * s) return false;
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < s; ++j)
      if (c.f[size_t(i * s + j)] != (j > i ? -INFINITY : 0.f)) return false;
  return true;
}

// The int32 mask behind Where(Equal(Cast(m), 0), -inf, 0), as attentionOnnx writes
// an int32 mask; empty when `v` is not that.
std::string intMaskBehind(OnnxPatternCtx& c, const std::string& v,
                          std::vector<const OnnxNode*>& nodes) {
  const OnnxNode* where = c.producer(v, "Where");
  const OnnxNode* eq = where ? c.producer(where->input(0), "Equal") : nullptr;
  const OnnxNode* cast = eq ? c.producer(eq->input(0), "Cast") : nullptr;
  if (!cast || c.scalar(eq->input(1)) != 0.0 || c.scalar(where->input(1)) != -INFINITY ||
      c.scalar(where->input(2)) != 0.0)
    return {};
  nodes.insert(nodes.end(), {where, eq, cast});
  return cast->input(0);
}

// MatMul(Softmax(MatMul(q, Transpose(k))·scale [+ causal] [+ mask]), v), as
// attentionOnnx writes it (Div by √d instead of Mul also).
bool attentionFromOnnx(OnnxPatternCtx& c, OnnxPatternMatch& out) {
  const OnnxNode& root = c.root();
  if (root.opType != "MatMul") return false;
  const OnnxNode* soft = c.producer(root.input(0), "Softmax");
  if (!soft || (soft->i("axis", -1) != -1 && soft->i("axis", -1) != 3)) return false;
  std::vector<const OnnxNode*> nodes{soft};
  std::string logits = soft->input(0), mask;
  bool causal = false;
  while (const OnnxNode* add = c.producer(logits, "Add")) {
    const OnnxConst* k = c.constOf(add->input(1));
    if (k && isCausalMask(*k) && !causal) {
      causal = true;
    } else if (!k && mask.empty()) {
      mask = intMaskBehind(c, add->input(1), nodes);
      if (mask.empty()) mask = add->input(1);
    } else {
      return false;
    }
    nodes.push_back(add);
    logits = add->input(0);
  }
  const OnnxNode* scaled = c.producerOf(logits);
  if (!scaled || (scaled->opType != "Mul" && scaled->opType != "Div")) return false;
  double scale = c.scalar(scaled->input(1));
  if (scaled->opType == "Div") scale = 1.0 / scale;
  const OnnxNode* scores = c.producer(scaled->input(0), "MatMul");
  const OnnxNode* kt = scores ? c.producer(scores->input(1), "Transpose") : nullptr;
  if (!kt || !(scale > 0) || kt->ints("perm") != std::vector<int64_t>{0, 1, 3, 2}) return false;
  const Shape* q = c.shapeOf(scores->input(0));
  if (!q || q->size() != 4) return false;
  nodes.insert(nodes.end(), {scaled, scores, kt});
  for (const OnnxNode* n : nodes) c.take(*n);
  OnnxPatternMatch m{
      "ScaledDotProductAttention", {scores->input(0), kt->input(0), root.input(1)}, {}, {}};
  if (!mask.empty()) m.inputs.push_back(mask);
  m.attrs.set("causal", causal);
  // The default scale is 1/√d: kept as 0 so that the attribute reads as it was drawn.
  const bool defaultScale = (*q)[3] > 0 && std::fabs(scale * std::sqrt(double((*q)[3])) - 1) < 1e-6;
  m.attrs.set("scale", defaultScale ? 0.0 : scale);
  out = std::move(m);
  return true;
}

// By batch or by heads: q, k, v, y and lse split alike, a mask split where it has that
// axis and broadcast where it broadcasts along it.
std::vector<SbpSignature> attentionSbp(const SbpCtx& c) {
  const Sbp B = Sbp::broadcast();
  std::vector<SbpSignature> out{{std::vector<Sbp>(c.in.size(), B), {}, {B, B}}};
  for (int axis : {0, 1}) {
    const Sbp s = Sbp::split(axis);
    std::vector<Sbp> in{s, s, s};
    if (c.in.size() > 3) in.push_back(c.in[3][size_t(axis)] == 1 ? B : s);
    out.push_back({in, {}, {s, s}});
  }
  return out;
}

}  // namespace

void registerAttention(OpRegistry& r) {
  OpDef d;
  d.name = "ScaledDotProductAttention";
  d.category = "Attention";
  d.doc = "softmax(q·kᵀ/√d + mask)·v per head, fused: no T×T matrix is kept";
  d.inputs = {{"q", "batch × heads × queries × head size"},
              {"k", "batch × heads × keys × head size"},
              {"v", "batch × heads × keys × value size"},
              {.name = "mask",
               .doc = "optional, B×H×T×S broadcast (1 where shared): float added, or int32 "
                      "nonzero keeps; not differentiated",
               .optional = true}};
  d.outputs = {{"y", "batch × heads × queries × value size"},
               {"lse", "log-sum-exp of each query's scores", false, true}};
  d.attrs = attentionAttrs();
  d.infer = inferAttention;
  d.sbp = attentionSbp;
  d.grad = [](GradBuilder& b) {
    std::vector<ValueId> in = {b.outGrad(0), b.input(0),  b.input(1),
                               b.input(2),   b.output(0), b.output(1)};
    if (b.numInputs() > 3) in.push_back(b.input(3));
    std::vector<ValueId> g = b.emitN("ScaledDotProductAttentionGrad", in, b.attrs());
    for (int k = 0; k < 3; ++k) b.addGrad(k, g[size_t(k)]);
  };
  d.flops = [](const InferCtx& c) {
    const Shape &q = c.in[0].shape, &k = c.in[1].shape, &v = c.in[2].shape;
    // The pairs a query sees: all S keys, or with the causal mask keys 0..i of row i.
    const int64_t t = q[2], s = k[2];
    const int64_t seen = !c.attrs.b("causal") ? saturatingMul(t, s)
                         : t <= s             ? t * (t + 1) / 2
                                              : s * (s + 1) / 2 + saturatingMul(t - s, s);
    const int64_t pairs = saturatingMul(q[0] * q[1], seen);
    // Two products (2·D and 2·Dv per pair) and the softmax (about 5 per pair).
    return saturatingMul(pairs, 2 * q[3] + 2 * v[3] + 5);
  };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    std::string e = "scaled_dot_product_attention({0}, {1}, {2}, " + torchMask(c) +
                    ", self.training and " + pyFloat(a.f("dropout")) + " or 0.0, " +
                    pyBool(a.b("causal")) + ", " +
                    (a.f("scale") > 0 ? pyFloat(a.f("scale")) : std::string("None")) + ")";
    return TorchCtx::expr(e);
  };
  d.onnxExport = attentionOnnx;
  d.onnxPattern = attentionFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "ScaledDotProductAttentionGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d q, k and v of ScaledDotProductAttention, recomputing the probabilities";
  g.inputs = {{"dy", "gradient of the output"},
              {"q", "queries"},
              {"k", "keys"},
              {"v", "values"},
              {"y", "forward output"},
              {"lse", "forward log-sum-exp"},
              {"mask", "the forward mask", true}};
  g.outputs = {{"dq", "as q"}, {"dk", "as k"}, {"dv", "as v"}};
  g.attrs = attentionAttrs();
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    c.out[1] = c.in[2];
    c.out[2] = c.in[3];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
