// BatchMatMul: matrix products over the last two axes, the axes before them
// broadcast as NumPy and torch.matmul broadcast them (attention's Q·Kᵀ and P·V).
// SumTo, the gradient's half, sums a broadcast gradient back to its operand's shape.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// The broadcast of two batch shapes, aligned at the right; false when they clash.
bool broadcastShapes(const Shape& a, const Shape& b, Shape& out) {
  const size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    out[i] = x == 1 ? y : x;
  }
  return true;
}

struct Operands {
  int64_t m, k, n;
  Shape batch;
};

std::string operandsProblem(const Shape& a, const Shape& b, bool ta, bool tb, Operands& o) {
  if (a.size() < 2) return "expects a matrix or a batch of them, got " + shapeToString(a);
  if (b.size() < 2) return "expects a matrix or a batch of them, got " + shapeToString(b);
  const int64_t ar = a[a.size() - 2], ac = a.back(), br = b[b.size() - 2], bc = b.back();
  o.m = ta ? ac : ar;
  o.k = ta ? ar : ac;
  o.n = tb ? br : bc;
  const int64_t k2 = tb ? bc : br;
  if (o.k != k2)
    return "inner dimensions differ: " + std::to_string(o.k) + " of " + shapeToString(a) + " and " +
           std::to_string(k2) + " of " + shapeToString(b);
  if (!broadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), o.batch))
    return "batch axes of " + shapeToString(a) + " and " + shapeToString(b) + " do not broadcast";
  return {};
}

// d(operand) computed at the broadcast shape, summed back where it was broadcast.
ValueId toShape(GradBuilder& b, ValueId g, int input) {
  const Shape& want = b.desc(b.input(input)).shape;
  if (b.desc(g).shape == want) return g;
  Attrs a;
  a.set("shape", std::vector<int64_t>(want.begin(), want.end()));
  return b.emit("SumTo", {g}, a);
}

void batchMatMulGrad(GradBuilder& b) {
  const bool ta = b.attrs().b("trans_a"), tb = b.attrs().b("trans_b");
  const ValueId dy = b.outGrad(0), x = b.input(0), w = b.input(1);
  auto mm = [&](ValueId l, ValueId r, bool tl, bool tr) {
    Attrs a;
    a.set("trans_a", tl);
    a.set("trans_b", tr);
    return b.emit("BatchMatMul", {l, r}, a);
  };
  // Y = op(A)·op(B); each gradient in its operand's own orientation.
  if (b.needsGrad(0)) b.addGrad(0, toShape(b, ta ? mm(w, dy, tb, true) : mm(dy, w, false, !tb), 0));
  if (b.needsGrad(1)) {
    ValueId g = tb ? mm(dy, x, true, ta) : mm(x, dy, !ta, false);
    b.addGrad(1, toShape(b, g, 1));
  }
}

std::string transposedLast(const char* v, bool t) {
  return t ? std::string(v) + ".transpose(-1, -2)" : std::string(v);
}

Status exportBatchMatMul(OnnxExportCtx& c) {
  std::string ins[2] = {c.input(0), c.input(1)};
  for (int k : {0, 1}) {
    if (!c.attrs().b(k == 0 ? "trans_a" : "trans_b")) continue;
    std::vector<int64_t> perm;
    const size_t rank = c.inShape(k).size();
    for (size_t i = 0; i < rank; ++i) perm.push_back(int64_t(i));
    std::swap(perm[rank - 1], perm[rank - 2]);
    const std::string t = c.fresh(k == 0 ? "a_t" : "b_t");
    c.add("Transpose", c.fresh("transpose"), {ins[k]}, {t}, {{"perm", perm}});
    ins[k] = t;
  }
  c.add("MatMul", c.node().name, {ins[0], ins[1]}, {c.output()});
  return {};
}

void registerSumTo(OpRegistry& r) {
  OpDef d;
  d.name = "SumTo";
  d.category = "Internal";
  d.role = OpRole::Internal;
  d.doc = "Sums a broadcast tensor back to the shape it was broadcast from";
  d.inputs = {{"x", "the broadcast tensor"}};
  d.outputs = {{"y", "shape"}};
  d.attrs = {intsAttr("shape", {}, 1, 1e12, "the shape to sum to, aligned at the right", true)};
  d.infer = [](InferCtx& c) {
    const Shape want = c.attrs.ints("shape");
    Shape joined;
    if (want.size() > c.in[0].shape.size() || !broadcastShapes(c.in[0].shape, want, joined) ||
        joined != c.in[0].shape)
      return c.fail("cannot sum " + shapeToString(c.in[0].shape) + " to " + shapeToString(want), 0);
    c.out[0] = TensorDesc{want, DType::F32, {}};
    return true;
  };
  d.flops = [](const InferCtx& c) { return numel(c.in[0].shape); };
  r.add(std::move(d));
}

// x·B with a constant B [in, out] is a Linear layer without bias (an Add after it
// gives it one: add.cpp); by a computed matrix, a MatMul; by a computed batch of
// matrices, a BatchMatMul. This file owns ONNX MatMul for all three.
bool importMatMul(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  if (!c.onlyAttrs({})) return false;
  const Shape* as = c.shapeOf(n.input(0));
  if (c.isConst(n.input(0)) || (as && as->size() < 2)) {
    c.problem("a first operand that is a constant or a vector has no NetLoom form");
    return false;
  }
  if (const OnnxConst* b = c.constOf(n.input(1))) {
    if (b->shape.size() != 2 || !b->isFloat) {
      c.problem("a constant second operand of shape " + onnxShapeText(b->shape));
      return false;
    }
    OnnxConst w = *b;
    w.f = transposed2d(*b);
    Attrs a;
    a.set("out_features", b->shape[1]);
    a.set("bias", false);
    const std::string d = c.add("Linear", {c.in(0)}, a);
    c.param(d, "weight", w, {b->shape[1], b->shape[0]});
    c.produce(d);
    return true;
  }
  const Shape* bs = c.shapeOf(n.input(1));
  if (!bs || bs->size() < 2) {
    c.problem("a second operand of shape " + (bs ? onnxShapeText(*bs) : std::string("unknown")) +
              " (NetLoom multiplies matrices or batches of them)");
    return false;
  }
  // A computed matrix: NetLoom's MatMul views the first operand as rows; a batch of
  // them on the right is a BatchMatMul.
  c.produce(c.add(bs->size() == 2 ? "MatMul" : "BatchMatMul", {c.in(0), c.in(1)}));
  return true;
}

}  // namespace

void registerBatchMatMul(OpRegistry& r) {
  OpDef d;
  d.name = "BatchMatMul";
  d.category = "Math";
  d.autocast = true;
  d.doc = "Matrix products over the last two axes, the others broadcast (torch.matmul)";
  d.inputs = {{"a", "… × m × k (k × m with trans_a)"}, {"b", "… × k × n (n × k with trans_b)"}};
  d.outputs = {{"y", "broadcast batch × m × n"}};
  d.attrs = {boolAttr("trans_a", false, "transpose a's last two axes first"),
             boolAttr("trans_b", false, "transpose b's last two axes first")};
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0) || !ops::requireFloat(c, 1)) return false;
    Operands o;
    const std::string why = operandsProblem(c.in[0].shape, c.in[1].shape, c.attrs.b("trans_a"),
                                            c.attrs.b("trans_b"), o);
    if (!why.empty()) return c.fail(why, c.in[0].shape.size() < 2 ? 0 : 1);
    Shape y = o.batch;
    y.push_back(o.m);
    y.push_back(o.n);
    c.out[0] = TensorDesc{y, DType::F32, {}};
    return true;
  };
  d.grad = batchMatMulGrad;
  d.flops = [](const InferCtx& c) {
    const Shape& a = c.in[0].shape;
    const int64_t k = c.attrs.b("trans_a") ? a[a.size() - 2] : a.back();
    return saturatingMul(2 * numel(c.out[0].shape), k);
  };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::expr("torch.matmul(" + transposedLast("{0}", c.attrs().b("trans_a")) + ", " +
                          transposedLast("{1}", c.attrs().b("trans_b")) + ")");
  };
  d.onnxExport = exportBatchMatMul;
  d.onnxImport["MatMul"] = importMatMul;
  r.add(std::move(d));
  registerSumTo(r);
}

}  // namespace netloom
