// Embedding: a table of vectors looked up by integer id, as PyTorch's nn.Embedding.
// An id outside the table gives NaNs (visible, as a bad label is in a loss); the
// row padding_idx reads as it is but is never trained. The gradient is a
// scatter-add of dy into the rows the ids chose.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/init.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

std::vector<AttrDef> embeddingAttrs() {
  return {
      intAttr("num_embeddings", 256, 1, 1e9, "rows in the table (the vocabulary size)"),
      intAttr("embedding_dim", 64, 1, 1e6, "length of each vector"),
      intAttr("padding_idx", -1, -1, 1e9, "a row kept at zero and never trained; -1: none"),
      floatAttr("init_std", 1.0, 0.0, 1e3,
                "spread of the initial vectors, N(0, init_std²); PyTorch's is 1, GPT-2's 0.02")};
}

// Gather(table, ids) on axis 0 with a constant table is an Embedding.
bool embeddingFromOnnx(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  if (!c.onlyAttrs({"axis"})) return false;
  const OnnxConst* table = c.constOf(n.input(0));
  if (!table || !table->isFloat || table->shape.size() != 2 || n.i("axis", 0) != 0 ||
      c.isConst(n.input(1))) {
    c.problem("a Gather that is not a lookup of computed ids in a constant 2-D table");
    return false;
  }
  Attrs a;
  a.set("num_embeddings", table->shape[0]);
  a.set("embedding_dim", table->shape[1]);
  const std::string d = c.add("Embedding", {c.in(1)}, a);
  c.param(d, "weight", *table, table->shape);
  c.produce(d);
  return true;
}

// By the ids (any axis, the table whole), or by the vocabulary: every rank reads all
// the ids in its part of the table's rows, and rows that another part holds read
// zero, so that the output is a partial sum (Megatron's vocabulary-parallel
// embedding). Its gradient is the output's broadcast one, each part taking its rows'.
std::vector<SbpSignature> embeddingSbp(const SbpCtx& c) {
  const Sbp B = Sbp::broadcast();
  std::vector<SbpSignature> out{{{B}, {B}, {B}}};
  for (int axis = 0; axis < int(c.in[0].size()); ++axis)
    out.push_back({{Sbp::split(axis)}, {B}, {Sbp::split(axis)}});
  out.push_back({{B}, {Sbp::split(0)}, {Sbp::partial()}});
  return out;
}

// A part of the table split by the vocabulary: its rows, the first of them, and the
// whole table's (ids outside the whole table still read NaN).
void embeddingLocalAttrs(Attrs& a, const std::vector<Shape>& params, const std::vector<Shape>&,
                         int part) {
  const int64_t whole = a.i("num_embeddings"), rows = params[0][0];
  if (rows == whole) return;
  a.set("__table_rows", whole);
  a.set("__first_row", int64_t(part) * rows);
  a.set("num_embeddings", rows);
}

}  // namespace

void registerEmbedding(OpRegistry& r) {
  OpDef d;
  d.name = "Embedding";
  d.category = "Sequence";
  d.doc = "Looks up a learned vector for each integer id (tokens, classes)";
  d.inputs = {{"ids", "batch × …, int32 ids"}};
  d.outputs = {{"y", "batch × … × embedding_dim"}};
  d.attrs = embeddingAttrs();
  d.params = [](const Attrs&) { return std::vector<std::string>{"weight"}; };
  d.sbp = embeddingSbp;
  d.localAttrs = embeddingLocalAttrs;
  d.infer = [](InferCtx& c) {
    if (c.in[0].dtype != DType::I32)
      return c.fail("expects int32 ids, got " + std::string(dtypeName(c.in[0].dtype)), 0);
    const int64_t rows = c.attrs.i("num_embeddings"), dim = c.attrs.i("embedding_dim");
    if (const int64_t whole = c.attrs.i("__table_rows", rows); c.attrs.i("padding_idx") >= whole)
      return c.fail("attribute 'padding_idx' (" + std::to_string(c.attrs.i("padding_idx")) +
                    ") is past the table's " + std::to_string(whole) + " rows");
    c.params[0] = TensorDesc{{rows, dim}, DType::F32, {}};
    Shape y = c.in[0].shape;
    y.push_back(dim);
    c.out[0] = TensorDesc{y, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    if (b.needsGrad(1))
      b.addGrad(1, b.emit("EmbeddingGrad", {b.outGrad(0), b.input(0)}, b.attrs()));
  };
  // N(0, init_std²), N(0, 1) as PyTorch draws it by default; the padding row zero.
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng& rng) {
    fillNormal(p[0], a.f("init_std"), rng);
    const int64_t pad = a.i("padding_idx"), dim = a.i("embedding_dim");
    if (pad >= 0)
      for (int64_t j = 0; j < dim; ++j) p[0].f32()[pad * dim + j] = 0.f;
  };
  d.flops = [](const InferCtx&) { return int64_t(0); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    TorchLowering t = TorchCtx::module(
        "nn.Embedding",
        {c.pos("num_embeddings", pyInt(a.i("num_embeddings")), "num_embeddings"),
         c.pos("embedding_dim", pyInt(a.i("embedding_dim")), "embedding_dim"),
         c.arg("padding_idx", a.i("padding_idx") < 0 ? "None" : pyInt(a.i("padding_idx")),
               "padding_idx", "None")},
        "{m}({0}.long())");
    if (a.f("init_std") != 1.0) t.init = "normal:" + pyFloat(a.f("init_std"));
    return t;
  };
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    auto table = c.param(1, {c.attrs().i("num_embeddings"), c.attrs().i("embedding_dim")});
    if (!table) return table.error();
    c.add("Gather", c.node().name, {*table, c.input(0)}, {c.output()}, {{"axis", int64_t(0)}});
    return {};
  };
  d.onnxImport["Gather"] = embeddingFromOnnx;
  r.add(std::move(d));

  OpDef g;
  g.name = "EmbeddingGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d table of Embedding: dy scattered into the rows its ids chose";
  g.inputs = {{"dy", "batch × … × embedding_dim"}, {"ids", "batch × …"}};
  g.outputs = {{"dweight", "num_embeddings × embedding_dim"}};
  g.attrs = embeddingAttrs();
  g.infer = [](InferCtx& c) {
    c.out[0] =
        TensorDesc{{c.attrs.i("num_embeddings"), c.attrs.i("embedding_dim")}, DType::F32, {}};
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
