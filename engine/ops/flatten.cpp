// Flatten: merges the dimensions from start_dim on, e.g. N×C×H×W -> N×(C·H·W).
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerFlatten(OpRegistry& r) {
  OpDef d;
  d.name = "Flatten";
  d.halfFollows = true;
  d.category = "Shape";
  d.doc = "Merges the dimensions from start_dim to the end into one";
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "flattened tensor"}};
  d.attrs = {intAttr("start_dim", 1, 1, 7, "first dimension to merge (0 is the batch)")};
  d.inplaceable = true;
  d.view = true;
  d.infer = [](InferCtx& c) {
    const Shape& x = c.in[0].shape;
    int64_t start = c.attrs.i("start_dim");
    if (start >= int64_t(x.size()))
      return c.fail(
          "start_dim " + std::to_string(start) + " is out of range for " + shapeToString(x), 0);
    Shape y(x.begin(), x.begin() + start);
    int64_t rest = 1;
    for (size_t i = start; i < x.size(); ++i) rest *= x[i];
    y.push_back(rest);
    c.out[0] = TensorDesc{y, c.in[0].dtype, {}};
    return true;
  };
  d.grad = ops::reshapeGradBack;
  d.sbp = reshapeSignatures;
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("torch.flatten",
                          {c.arg("", pyInt(c.attrs().i("start_dim")), "start_dim")});
  };
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    if (c.attrs().i("start_dim") == 1)
      c.same("Flatten", {{"axis", int64_t(1)}});
    else
      c.reshapeToOutput();
    return {};
  };
  d.onnxImport["Flatten"] = [](OnnxImportCtx& c) {
    if (!c.onlyAttrs({"axis"})) return false;
    const Shape* x = c.shapeOf(c.n().input(0));
    if (positiveAxis(c.n().i("axis", 1), x ? x->size() : 2) != 1) {
      c.problem("attribute axis=" + std::to_string(c.n().i("axis", 1)) +
                " merges the batch dimension with others");
      return false;
    }
    c.produce(c.add("Flatten", {c.in(0)}));
    return true;
  };
  r.add(std::move(d));
}

}  // namespace netloom
