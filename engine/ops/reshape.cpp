// Reshape: a new shape for each sample (the batch dimension is kept); one entry may
// be -1 and is inferred.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

std::string listText(const std::vector<int64_t>& v) {
  std::string t = "[";
  for (size_t k = 0; k < v.size(); ++k)
    t += (k ? ", " : "") + (v[k] == kOnnxBatchSym ? std::string("batch") : std::to_string(v[k]));
  return t + "]";
}

// The per-sample shape of an ONNX Reshape's target `t` over input `x`, each 0 (copy
// the input's dimension) resolved; false where the target does not keep the batch
// dimension first.
bool perSampleTarget(const std::vector<int64_t>& t, const Shape* x, bool allowZero,
                     std::vector<int64_t>& rest) {
  int64_t known = 1;
  int minusOnes = 0;
  bool ok = true;
  for (size_t k = 1; k < t.size(); ++k) {
    int64_t v = t[k];
    if (v == 0 && !allowZero) v = x && k < x->size() ? (*x)[k] : -2;
    if (v == -1) ++minusOnes;
    ok = ok && v != kOnnxBatchSym && v >= -1 && v != 0;
    if (v > 0) known *= v;
    rest.push_back(v);
  }
  int64_t perSample = -1;
  if (x && !x->empty()) {
    perSample = 1;
    for (size_t k = 1; k < x->size(); ++k) perSample = (*x)[k] < 0 ? -1 : perSample * (*x)[k];
  }
  const bool batchFirst = t[0] == kOnnxBatchSym || (t[0] == 0 && !allowZero) ||
                          (x && !x->empty() && (*x)[0] > 0 && t[0] == (*x)[0]) ||
                          (t[0] == -1 && minusOnes == 0 && perSample > 0 && known == perSample);
  return ok && batchFirst && minusOnes <= 1;
}

// NetLoom's shapes are per sample: the target must keep the batch dimension first.
bool reshapeFromOnnx(OnnxImportCtx& c) {
  if (!c.onlyAttrs({"allowzero"})) return false;
  const OnnxConst* target = c.constOf(c.n().input(1));
  if (!target || target->isFloat) {
    c.problem(
        "its target shape is computed while the model runs from more than the shapes of its "
        "inputs");
    return false;
  }
  const std::vector<int64_t>& t = target->i;
  if (t.empty()) {
    c.problem("a target shape without the batch dimension");
    return false;
  }
  std::vector<int64_t> rest;
  if (!perSampleTarget(t, c.shapeOf(c.n().input(0)), c.n().i("allowzero", 0) != 0, rest)) {
    c.problem("target shape " + listText(t) +
              " does not keep the batch dimension first with a per-sample shape");
    return false;
  }
  // [batch, n] or [batch, -1]: Flatten says the same and reads better.
  Attrs a;
  if (rest.size() > 1) a.set("shape", rest);
  c.produce(c.add(rest.size() == 1 ? "Flatten" : "Reshape", {c.in(0)}, a));
  return true;
}

}  // namespace

void registerReshape(OpRegistry& r) {
  OpDef d;
  d.name = "Reshape";
  d.halfFollows = true;
  d.category = "Shape";
  d.doc = "Gives each sample a new shape with the same number of elements";
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "batch × shape"}};
  d.attrs = {intsAttr("shape", {}, -1, 1e9, "per-sample shape; one -1 is inferred", true)};
  d.inplaceable = true;
  d.view = true;
  d.infer = [](InferCtx& c) {
    const Shape& x = c.in[0].shape;
    Shape want = c.attrs.ints("shape");
    int64_t per = numel(x) / (x.empty() ? 1 : x[0]), known = 1;
    int infer = -1;
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i] == -1) {
        if (infer >= 0) return c.fail("attribute 'shape' has more than one -1");
        infer = int(i);
      } else if (want[i] == 0) {
        return c.fail("attribute 'shape' has a 0 at position " + std::to_string(i));
      } else {
        known = saturatingMul(known, want[i]);
      }
    }
    if (infer >= 0 && known > 0 && per % known == 0) want[infer] = per / known;
    if (checkedNumel(want) != per)
      return c.fail("cannot reshape " + shapeToString(x) + " (" + std::to_string(per) +
                        " elements per sample) to " + shapeToString(c.attrs.ints("shape")),
                    0);
    Shape y{x.empty() ? 1 : x[0]};
    y.insert(y.end(), want.begin(), want.end());
    c.out[0] = TensorDesc{y, c.in[0].dtype, {}};
    return true;
  };
  d.grad = ops::reshapeGradBack;
  d.sbp = reshapeSignatures;
  d.localAttrs = [](Attrs& a, const std::vector<Shape>&, const std::vector<Shape>& out, int) {
    a.set("shape", std::vector<int64_t>(out[0].begin() + 1, out[0].end()));
  };
  // The shape is per sample: the batch dimension stays in front.
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::expr("{0}.reshape({0}.shape[0], *{a0})",
                          {c.arg("", pyTuple(c.attrs().ints("shape")), "shape")});
  };
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    c.reshapeToOutput();
    return {};
  };
  d.onnxImport["Reshape"] = reshapeFromOnnx;
  r.add(std::move(d));
}

}  // namespace netloom
