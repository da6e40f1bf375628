// MatMul: a 2-D product over tensors viewed as rows × last dimension. Linear's
// backward uses it; transposes are attributes so no transpose copies are made.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

Status exportMatMul(OnnxExportCtx& c) {
  const Node& n = c.node();
  if (c.attrs().b("trans_a")) return c.noForm("attribute trans_a=true");
  if (c.inShape(1).size() != 2)
    return c.noForm("a second operand of rank " + std::to_string(c.inShape(1).size()) +
                    " (NetLoom views it as a matrix)");
  std::string b = c.input(1);
  if (c.attrs().b("trans_b")) {
    std::string t = c.fresh("b_t");
    c.add("Transpose", c.fresh("transpose"), {b}, {t}, {{"perm", std::vector<int64_t>{1, 0}}});
    b = t;
  }
  c.add("MatMul", n.name, {c.input(0), b}, {c.output()});
  return {};
}

}  // namespace

void registerMatMul(OpRegistry& r) {
  OpDef d;
  d.name = "MatMul";
  d.autocast = true;
  d.category = "Internal";
  d.role = OpRole::Internal;
  d.doc = "op(A)·op(B), each viewed as rows × last dimension";
  d.inputs = {{"a", "… × k (or rows × m with trans_a)"}, {"b", "k × n (or n × k with trans_b)"}};
  d.outputs = {{"y", "… × n"}};
  d.attrs = {boolAttr("trans_a", false, "use Aᵀ"), boolAttr("trans_b", false, "use Bᵀ")};
  d.infer = [](InferCtx& c) {
    const Shape &a = c.in[0].shape, &b = c.in[1].shape;
    if (a.empty() || b.size() < 2) return c.fail("expects matrices", a.empty() ? 0 : 1);
    int64_t aRows = numel(a) / a.back(), aCols = a.back();
    int64_t bRows = numel(b) / b.back(), bCols = b.back();
    bool ta = c.attrs.b("trans_a"), tb = c.attrs.b("trans_b");
    int64_t k1 = ta ? aRows : aCols, k2 = tb ? bCols : bRows, n = tb ? bRows : bCols;
    if (k1 != k2)
      return c.fail("inner dimensions differ: " + shapeToString(a) + " and " + shapeToString(b), 1);
    Shape y;
    if (ta) {
      y = {aCols, n};
    } else {
      y = a;
      y.back() = n;
    }
    c.out[0] = TensorDesc{y, DType::F32, {}};
    return true;
  };
  d.flops = [](const InferCtx& c) {
    const Shape& a = c.in[0].shape;
    int64_t k = c.attrs.b("trans_a") ? numel(a) / a.back() : a.back();
    return saturatingMul(2 * numel(c.out[0].shape), k);
  };
  // Both operands are viewed as rows × last dimension, as the op defines them.
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const bool ta = c.attrs().b("trans_a"), tb = c.attrs().b("trans_b");
    std::string lhs = ta ? "{0}.reshape(-1, {0}.shape[-1]).t()" : "{0}";
    std::string rhs = tb ? "{1}.reshape(-1, {1}.shape[-1]).t()" : "{1}.reshape(-1, {1}.shape[-1])";
    return TorchCtx::expr("torch.matmul(" + lhs + ", " + rhs + ")");
  };
  d.onnxExport = exportMatMul;
  r.add(std::move(d));
}

}  // namespace netloom
