// PositionEmbedding: adds a vector per position to a batch × tokens × channels
// sequence: learned (a table of max_len rows, GPT-2's wpe) or sinusoidal (Vaswani
// et al.'s fixed sin/cos encoding). The learned table's gradient sums dy over the
// batch into the rows the sequence reached.
#include <algorithm>
#include <cmath>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/init.h"
#include "engine/ops/op_helpers.h"
#include "kernels/core/sequence_math.h"

namespace netloom {

namespace {

std::vector<AttrDef> positionAttrs() {
  return {stringAttr("kind", "learned", {"learned", "sinusoidal"},
                     "a trained table, or fixed sines and cosines"),
          intAttr("max_len", 512, 1, 1e7, "the longest sequence (rows of the learned table)")};
}

bool learned(const Attrs& a) {
  return a.s("kind") == "learned";
}

// The encoding added to a sequence of `tokens` × `channels`: the sinusoids, or the
// learned table's first rows (from `table`, max_len × channels).
std::vector<float> positionRows(const Attrs& a, int64_t tokens, int64_t channels,
                                const std::vector<float>* table) {
  std::vector<float> rows(size_t(tokens * channels));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < channels; ++c)
      rows[size_t(t * channels + c)] =
          learned(a) ? (*table)[size_t(t * channels + c)] : fn::sinusoid(t, c, channels);
  return rows;
}

// x + rows, the rows an initializer of tokens × channels.
Status positionOnnx(OnnxExportCtx& c) {
  const Shape& x = c.inShape(0);
  const int64_t t = x[1], ch = x[2];
  std::string rows;
  if (learned(c.attrs())) {
    auto table = c.param(1, {c.attrs().i("max_len"), ch});
    if (!table) return table.error();
    const std::string sliced = c.fresh("rows");
    c.add("Slice", c.fresh("slice"),
          {*table, c.ints(c.fresh("starts"), {0}), c.ints(c.fresh("ends"), {t}),
           c.ints(c.fresh("axes"), {0})},
          {sliced});
    rows = sliced;
  } else {
    rows = c.initializer(c.fresh("sinusoids"), {t, ch}, positionRows(c.attrs(), t, ch, nullptr));
  }
  c.add("Add", c.node().name, {c.input(0), rows}, {c.output()});
  return {};
}

}  // namespace

bool areSinusoids(const std::vector<float>& rows, int64_t tokens, int64_t channels);

namespace {

// Add(x, rows) with rows a constant of tokens × channels over a batch × tokens ×
// channels sequence, or Add(x, Slice(table, 0, tokens)) as positionOnnx writes a
// learned table: the sinusoids where the rows are they, else a learned table.
bool positionFromOnnx(OnnxPatternCtx& c, OnnxPatternMatch& out) {
  const OnnxNode& root = c.root();
  if (root.opType != "Add") return false;
  for (int k : {0, 1}) {
    const Shape* x = c.shapeOf(root.input(size_t(k)));
    const std::string rows = root.input(size_t(1 - k));
    if (!x || x->size() != 3 || (*x)[1] < 1 || (*x)[2] < 1 || c.constOf(root.input(size_t(k))))
      continue;
    const int64_t t = (*x)[1], ch = (*x)[2];
    const OnnxConst* table = c.constOf(rows);
    const OnnxNode* slice = table ? nullptr : c.producer(rows, "Slice");
    if (slice) {
      table = c.constOf(slice->input(0));
      const bool firstRows = c.scalar(slice->input(1)) == 0 && c.scalar(slice->input(2)) == t &&
                             (slice->input(3).empty() || c.scalar(slice->input(3)) == 0);
      if (!table || !firstRows) continue;
    }
    if (!table || !table->isFloat || table->shape.size() != 2 || table->shape[1] != ch ||
        table->shape[0] < t || (!slice && table->shape[0] != t))
      continue;
    if (slice) c.take(*slice);
    OnnxPatternMatch m{"PositionEmbedding", {root.input(size_t(k))}, {}, {}};
    if (!slice && areSinusoids(table->f, t, ch)) {
      m.attrs.set("kind", std::string("sinusoidal"));
      m.attrs.set("max_len", std::max<int64_t>(t, 512));
      out = std::move(m);
      return true;
    }
    m.attrs.set("kind", std::string("learned"));
    m.attrs.set("max_len", table->shape[0]);
    m.params.push_back({"weight", *table});
    out = std::move(m);
    return true;
  }
  return false;
}

}  // namespace

// Whether `rows` (tokens × channels) are the sinusoidal encoding, to within float
// rounding: an imported table of them is the fixed encoding, not a learned one.
bool areSinusoids(const std::vector<float>& rows, int64_t tokens, int64_t channels) {
  if (int64_t(rows.size()) != tokens * channels) return false;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < channels; ++c)
      if (std::fabs(rows[size_t(t * channels + c)] - fn::sinusoid(t, c, channels)) > 1e-5f)
        return false;
  return true;
}

void registerPositionEmbedding(OpRegistry& r) {
  OpDef d;
  d.name = "PositionEmbedding";
  d.category = "Sequence";
  d.doc = "Adds a learned or sinusoidal vector for each position of a sequence";
  d.inputs = {{"x", "batch × tokens × channels"}};
  d.outputs = {{"y", "x plus each position's vector"}};
  d.attrs = positionAttrs();
  d.params = [](const Attrs& a) {
    return learned(a) ? std::vector<std::string>{"weight"} : std::vector<std::string>{};
  };
  // Each position along the last two axes is its own: split along the others.
  d.sbp = [](const SbpCtx& c) { return splitOutsideAxes(c, {-2, -1}); };
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() != 3)
      return c.fail("expects batch × tokens × channels, got " + shapeToString(x), 0);
    if (x[1] > c.attrs.i("max_len"))
      return c.fail(std::to_string(x[1]) + " tokens are more than attribute 'max_len' (" +
                        std::to_string(c.attrs.i("max_len")) + ")",
                    0);
    if (learned(c.attrs)) c.params[0] = TensorDesc{{c.attrs.i("max_len"), x[2]}, DType::F32, {}};
    c.out[0] = c.in[0];
    return true;
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.outGrad(0));
    if (b.numInputs() > 1 && b.needsGrad(1))
      b.addGrad(1, b.emit("PositionEmbeddingGrad", {b.outGrad(0)}, b.attrs()));
  };
  // N(0, 0.02), as GPT-2 draws its position table.
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng& rng) {
    if (learned(a)) fillNormal(p[0], 0.02, rng);
  };
  d.flops = [](const InferCtx& c) { return numel(c.in[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    return TorchCtx::module("PositionEmbedding",
                            {c.pos("channels", pyInt(c.inShape(0)[2]), ""),
                             c.arg("max_len", pyInt(a.i("max_len")), "max_len"),
                             c.arg("kind", pyStr(a.s("kind")), "kind", "'learned'")});
  };
  d.onnxExport = positionOnnx;
  d.onnxPattern = positionFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "PositionEmbeddingGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d table of a learned PositionEmbedding: dy summed over the batch";
  g.inputs = {{"dy", "batch × tokens × channels"}};
  g.outputs = {{"dweight", "max_len × channels"}};
  g.attrs = positionAttrs();
  g.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{c.attrs.i("max_len"), c.in[0].shape[2]}, DType::F32, {}};
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
