// Upsample: nearest-neighbour enlargement of N×C×H×W by whole factors; its gradient
// sums each block of the output gradient.
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"
#include "kernels/core/geometry.h"

namespace netloom {

void registerUpsample(OpRegistry& r) {
  AttrDef scale = intsAttr("scale_factor", {2}, 1, 64, "enlargement: s or [sh, sw]");
  AttrDef mode = stringAttr("mode", "nearest", {"nearest"}, "interpolation");
  OpDef d;
  d.name = "Upsample";
  d.category = "Layers";
  d.doc = "Enlarges N×C×H×W by whole factors (nearest neighbour)";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "N × C × H·sh × W·sw"}};
  d.attrs = {scale, mode};
  d.inplaceable = false;
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() != 4) return c.fail("expects N×C×H×W, got " + shapeToString(x), 0);
    int64_t sh = 1, sw = 1;
    if (!pair2d(c.attrs, "scale_factor", 2, sh, sw))
      return c.fail("attribute 'scale_factor' takes 1 or 2 values");
    c.out[0] = TensorDesc{{x[0], x[1], x[2] * sh, x[3] * sw}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.emit("UpsampleGrad", {b.outGrad(0), b.input(0)}, b.attrs()));
  };
  d.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  // Nearest neighbour by whole factors is a repeat of every row and column, exactly.
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    int64_t sh = 1, sw = 1;
    pair2d(c.attrs(), "scale_factor", 2, sh, sw);
    return TorchCtx::expr("{0}.repeat_interleave({a0}, dim=2).repeat_interleave({a1}, dim=3)",
                          {c.arg("", pyInt(sh), ""), c.arg("", pyInt(sw), "")});
  };
  r.add(std::move(d));

  OpDef g;
  g.name = "UpsampleGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "Sums each block of the output gradient";
  g.inputs = {{"dy", "gradient of the output"}, {"x", "forward input"}};
  g.outputs = {{"dx", "gradient of the input"}};
  g.attrs = {scale, mode};
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
