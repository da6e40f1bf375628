// Mixed precision (train.precision): RoundHalf keeps a float tensor's values to those
// of bfloat16 or IEEE half, which autocast puts on the inputs and outputs of the
// matrix ops; CastBf16 rounds as RoundHalf to bf16 does, into 16-bit storage; fp16's loss scaling
// reads and keeps its state with LossScaleSeed and LossScaleCheck (kernels/core/functors.h,
// fn::LossScale).
#include "engine/ops/op_helpers.h"
#include "kernels/core/functors.h"

namespace netloom {

namespace {

AttrDef formatAttr() {
  return stringAttr("format", "bf16", {"bf16", "fp16"}, "the 16-bit format rounded to");
}

std::vector<AttrDef> scalingAttrs() {
  return {floatAttr("init_scale", 65536.0, 1.0, 1e30, "the loss scale of the first step"),
          intAttr("growth_interval", 2000, 1, 1e9, "finite steps in a row before it doubles")};
}

}  // namespace

void registerAutocast(OpRegistry& r) {
  OpDef d;
  d.name = "RoundHalf";
  d.category = "Internal";
  d.role = OpRole::Internal;
  d.doc = "Rounds each value to the nearest 16-bit float, kept as a float";
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "same shape as x"}};
  d.attrs = {formatAttr()};
  d.inplaceable = true;
  // Element by element: blocked layouts pass through it (the convolutions it rounds
  // around keep theirs), and it joins element-wise chains.
  d.elementwise = true;
  d.infer = [](InferCtx& c) { return ops::requireFloat(c, 0) && ops::sameAsInput(c); };
  // A 16-bit tensor's gradient is a 16-bit tensor too.
  d.grad = [](GradBuilder& b) { b.addGrad(0, b.emit("RoundHalf", {b.outGrad(0)}, b.attrs())); };
  d.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  r.add(std::move(d));

  // Placed after autodiff, where a RoundHalf to bf16 feeds only matrix ops that have
  // kernels for bf16 operands ("bf16 storage", engine/compiler/passes/bf16_storage.cpp).
  OpDef cast;
  cast.name = "CastBf16";
  cast.category = "Internal";
  cast.role = OpRole::Internal;
  cast.doc = "Rounds each value to the nearest bfloat16, stored in 16 bits";
  cast.inputs = {{"x", "float tensor"}};
  cast.outputs = {{"y", "same shape, bf16"}};
  cast.elementwise = true;  // in whatever layout its input comes
  cast.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    c.out[0] = TensorDesc{c.in[0].shape, DType::BF16, {}};
    return true;
  };
  cast.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  r.add(std::move(cast));

  OpDef seed;
  seed.name = "LossScaleSeed";
  seed.category = "Internal";
  seed.role = OpRole::Internal;
  seed.doc = "The loss gradient's seed under loss scaling: this step's scale";
  seed.inputs = {{"state", "the loss scale's state"}};
  seed.outputs = {{"y", "scalar"}};
  seed.attrs = scalingAttrs();
  seed.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{}, DType::F32, {}};
    return true;
  };
  r.add(std::move(seed));

  OpDef check;
  check.name = "LossScaleCheck";
  check.category = "Internal";
  check.role = OpRole::Optimizer;
  check.doc = "Whether this step's scaled gradients are finite, and the next step's scale";
  check.inputs = {{"state", "the loss scale's state"}, {"squares", "Σ grad² per gradient", true}};
  check.attrs = scalingAttrs();
  check.mutates = {0};
  check.infer = [](InferCtx&) { return true; };
  r.add(std::move(check));
}

}  // namespace netloom
