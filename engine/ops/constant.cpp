// Constant: a tensor filled with one value; autodiff seeds the loss gradient with it.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerConstant(OpRegistry& r) {
  OpDef d;
  d.name = "Constant";
  d.category = "Internal";
  d.doc = "A tensor filled with one value";
  d.role = OpRole::Internal;
  d.outputs = {{"y", "the constant"}};
  d.attrs = {floatAttr("value", 0.0, -1e300, 1e300, "fill value"),
             intsAttr("shape", {}, 1, 1e12, "full shape; empty for a scalar")};
  d.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{c.attrs.ints("shape"), DType::F32, {}};
    return true;
  };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::expr("torch.full({a0}, {a1})",
                          {c.arg("", pyTuple(c.attrs().ints("shape")), "shape"),
                           c.arg("", pyFloat(c.attrs().f("value")), "value")});
  };
  // A constant's shape is its full shape (no batch dimension): an initializer.
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    const Shape& s = c.outShape();
    c.initializer(c.name(c.node().outputs[0]), s,
                  std::vector<float>(size_t(numel(s)), float(c.attrs().f("value"))), true);
    return {};
  };
  r.add(std::move(d));
}

}  // namespace netloom
