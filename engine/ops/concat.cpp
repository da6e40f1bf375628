// Concat: joins tensors along one axis; its gradient slices the incoming gradient
// back into the pieces.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// Joined along an axis after the batch dimension; NetLoom's axis counts from the front.
bool concatFromOnnx(OnnxImportCtx& c) {
  if (!c.onlyAttrs({"axis"})) return false;
  const Shape* y = c.shapeOf(c.n().outputs[0]);
  const int64_t axis = c.n().i("axis", 0);
  const int64_t pos = y ? positiveAxis(axis, y->size()) : axis;
  if (pos == 0 || (!y && axis < 0)) {
    c.problem("attribute axis=" + std::to_string(axis) +
              (pos == 0 ? " joins along the batch dimension" : " over an unknown rank"));
    return false;
  }
  std::vector<std::string> ins;
  for (const std::string& in : c.n().inputs) ins.push_back(c.ref(in));
  Attrs a;
  a.set("axis", pos);
  c.produce(c.add("Concat", ins, a));
  return true;
}

}  // namespace

void registerConcat(OpRegistry& r) {
  OpDef d;
  d.name = "Concat";
  d.halfFollows = true;
  d.category = "Merge";
  d.doc = "Joins tensors along an axis; other dimensions must match";
  d.inputs = {{"x", "two or more tensors", true}};
  d.outputs = {{"y", "joined tensor"}};
  d.attrs = {intAttr("axis", 1, -8, 7, "axis to join along (not the batch axis)")};
  d.infer = [](InferCtx& c) {
    const Shape& first = c.in[0].shape;
    int axis = ops::normAxis(c.attrs.i("axis"), first.size());
    if (axis < 1)
      return c.fail("axis " + std::to_string(c.attrs.i("axis")) + " is out of range for " +
                        shapeToString(first) + " (the batch axis cannot be used)",
                    0);
    Shape y = first;
    y[axis] = 0;
    // A float stored in bf16 (mixed precision) is a float.
    auto kind = [](DType t) { return t == DType::BF16 ? DType::F32 : t; };
    for (size_t i = 0; i < c.in.size(); ++i) {
      const Shape& s = c.in[i].shape;
      bool ok = s.size() == first.size() && kind(c.in[i].dtype) == kind(c.in[0].dtype);
      for (size_t k = 0; ok && k < s.size(); ++k) ok = int(k) == axis || s[k] == first[k];
      if (!ok)
        return c.fail("shape " + shapeToString(s) + " does not fit " + shapeToString(first) +
                          " along axis " + std::to_string(axis),
                      int(i));
      y[axis] = saturatingAdd(y[axis], s[axis]);
    }
    c.out[0] = TensorDesc{y, c.in[0].dtype, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    int axis = ops::normAxis(b.attrs().i("axis"), b.desc(b.output(0)).shape.size());
    int64_t start = 0;
    for (int i = 0; i < b.numInputs(); ++i) {
      int64_t len = b.desc(b.input(i)).shape[axis];
      if (b.needsGrad(i)) {
        Attrs a;
        a.set("axis", int64_t(axis));
        a.set("start", start);
        a.set("length", len);
        b.addGrad(i, b.emit("Slice", {b.outGrad(0)}, a));
      }
      start += len;
    }
  };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::expr("torch.cat([{*}], dim={a0})",
                          {c.arg("", pyInt(c.attrs().i("axis")), "axis")});
  };
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    c.same("Concat", {{"axis", c.attrs().i("axis")}});
    return {};
  };
  d.onnxImport["Concat"] = concatFromOnnx;
  r.add(std::move(d));

  OpDef s;
  s.name = "Slice";
  s.category = "Internal";
  s.role = OpRole::Internal;
  s.doc = "A contiguous range along one axis";
  s.inputs = {{"x", "input tensor"}};
  s.outputs = {{"y", "the slice"}};
  s.attrs = {intAttr("axis", 1, 0, 7, "axis"), intAttr("start", 0, 0, 1e12, "first index"),
             intAttr("length", 1, 1, 1e12, "number of indices")};
  s.infer = [](InferCtx& c) {
    Shape y = c.in[0].shape;
    int64_t axis = c.attrs.i("axis");
    if (axis >= int64_t(y.size()) || c.attrs.i("start") + c.attrs.i("length") > y[axis])
      return c.fail("slice out of range of " + shapeToString(y), 0);
    y[axis] = c.attrs.i("length");
    c.out[0] = TensorDesc{y, c.in[0].dtype, {}};
    return true;
  };
  r.add(std::move(s));
}

}  // namespace netloom
