// Linear: y = x·Wᵀ + b over the last dimension, W laid out [out, in] as in PyTorch.
// Backward: dx = dy·W, dW = dyᵀ·x, db = column sums of dy.
#include <cmath>

#include "engine/graph/torch_lowering.h"
#include "engine/ops/init.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerLinear(OpRegistry& r) {
  OpDef d;
  d.name = "Linear";
  d.autocast = true;
  d.foldsChannelAffine = [](const Shape& y) { return y.size() == 2; };
  d.category = "Layers";
  d.doc = "Fully connected layer: y = x·Wᵀ + b over the last dimension";
  d.inputs = {{"x", "… × in_features"}};
  d.outputs = {{"y", "… × out_features"}};
  d.attrs = {
      intAttr("out_features", 1, 1, 1 << 24, "number of output features"),
      boolAttr("bias", true, "add a learned bias"),
      initAttr(),
      stringAttr("activation", "none", {"none", "relu"},
                 "activation applied in the same kernel (set by fusion)"),
  };
  d.attrs[0].required = true;
  d.params = [](const Attrs& a) {
    return a.b("bias") ? std::vector<std::string>{"weight", "bias"}
                       : std::vector<std::string>{"weight"};
  };
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() < 2)
      return c.fail("expects at least batch × features, got " + shapeToString(x), 0);
    int64_t in = x.back(), out = c.attrs.i("out_features");
    c.params[0] = TensorDesc{{out, in}, DType::F32, {}};
    if (c.params.size() > 1) c.params[1] = TensorDesc{{out}, DType::F32, {}};
    Shape y = x;
    y.back() = out;
    c.out[0] = TensorDesc{y, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    ValueId dy = b.outGrad(0);
    if (b.attrs().s("activation") == "relu") dy = b.emit("ReLUGrad", {dy, b.output(0)});
    Attrs ta;
    ta.set("trans_a", true);
    if (b.needsGrad(0)) b.addGrad(0, b.emit("MatMul", {dy, b.input(1)}));
    b.addGrad(1, b.emit("MatMul", {dy, b.input(0)}, ta));
    if (b.numInputs() > 2) b.addGrad(2, b.emit("ReduceRows", {dy}));
  };
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng& rng) {
    int64_t fanIn = p[0].shape[1], fanOut = p[0].shape[0];
    initWeight(a.s("init"), p[0], fanIn, fanOut, rng);
    // PyTorch's default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    if (p.size() > 1) fillUniform(p[1], 1.0 / std::sqrt(double(fanIn)), rng);
  };
  d.flops = [](const InferCtx& c) {
    return saturatingMul(2 * numel(c.out[0].shape), c.in[0].shape.back());
  };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    return TorchCtx::module("nn.Linear",
                            {c.pos("in_features", pyInt(c.inShape(0).back()), ""),
                             c.pos("out_features", pyInt(a.i("out_features")), "out_features"),
                             c.arg("bias", pyBool(a.b("bias")), "bias", "True")},
                            a.s("activation") == "relu" ? "F.relu({m}({0}))" : "{m}({0})");
  };
  r.add(std::move(d));

  OpDef rows;
  rows.name = "ReduceRows";
  rows.category = "Internal";
  rows.role = OpRole::Internal;
  rows.doc = "Sums all leading dimensions: … × n -> n";
  rows.inputs = {{"x", "… × n"}};
  rows.outputs = {{"y", "n"}};
  rows.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{c.in[0].shape.back()}, DType::F32, {}};
    return true;
  };
  r.add(std::move(rows));
}

}  // namespace netloom
