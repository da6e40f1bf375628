// Transpose: reorders a tensor's axes, as PyTorch's permute and ONNX's Transpose do.
// The permutation counts the batch axis, which must stay first. Its gradient is the
// inverse permutation of dy.
#include <algorithm>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

std::string permText(const std::vector<int64_t>& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + "]";
}

// Why `perm` is no permutation of a rank-`rank` tensor's axes keeping axis 0 first;
// empty when it is one.
std::string permProblem(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.size() != rank)
    return "attribute 'perm' " + permText(perm) + " has " + std::to_string(perm.size()) +
           " entries for a tensor of rank " + std::to_string(rank);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < rank; ++i)
    if (sorted[i] != int64_t(i))
      return "attribute 'perm' " + permText(perm) + " is not a permutation of 0.." +
             std::to_string(rank - 1);
  if (perm[0] != 0) return "attribute 'perm' " + permText(perm) + " moves the batch axis 0";
  return {};
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  return inv;
}

bool transposeFromOnnx(OnnxImportCtx& c) {
  if (!c.onlyAttrs({"perm"})) return false;
  const Shape* x = c.shapeOf(c.n().input(0));
  std::vector<int64_t> perm = c.n().ints("perm");
  if (perm.empty() && x)  // ONNX's default reverses the axes
    for (size_t i = x->size(); i-- > 0;) perm.push_back(int64_t(i));
  const std::string why = x ? permProblem(perm, x->size()) : "the shape of its input is unknown";
  if (!why.empty()) {
    c.problem(why);
    return false;
  }
  Attrs a;
  a.set("perm", perm);
  c.produce(c.add("Transpose", {c.in(0)}, a));
  return true;
}

}  // namespace

void registerTranspose(OpRegistry& r) {
  OpDef d;
  d.name = "Transpose";
  d.halfFollows = true;
  d.category = "Shape";
  d.doc = "Reorders the axes (PyTorch's permute); the batch axis stays first";
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "x with its axes in the order of perm"}};
  d.attrs = {intsAttr("perm", {0, 2, 1}, 0, 7,
                      "output axis i is input axis perm[i], counting the batch axis 0", true)};
  d.infer = [](InferCtx& c) {
    const Shape& x = c.in[0].shape;
    const std::vector<int64_t> perm = c.attrs.ints("perm");
    const std::string why = permProblem(perm, x.size());
    if (!why.empty()) return c.fail(why + " of shape " + shapeToString(x), 0);
    Shape y;
    for (int64_t p : perm) y.push_back(x[size_t(p)]);
    c.out[0] = TensorDesc{y, c.in[0].dtype, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    Attrs a;
    a.set("perm", inverse(b.attrs().ints("perm")));
    b.addGrad(0, b.emit("Transpose", {b.outGrad(0)}, a));
  };
  d.flops = [](const InferCtx&) { return int64_t(0); };
  d.sbp = [](const SbpCtx& c) { return permuteSignatures(c, c.attrs.ints("perm")); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::expr("{0}.permute(*{a0})",
                          {c.arg("", pyTuple(c.attrs().ints("perm")), "perm")});
  };
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    c.same("Transpose", {{"perm", c.attrs().ints("perm")}});
    return {};
  };
  d.onnxImport["Transpose"] = transposeFromOnnx;
  r.add(std::move(d));
}

}  // namespace netloom
