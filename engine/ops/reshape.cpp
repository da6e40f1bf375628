// Reshape: a new shape for each sample (the batch dimension is kept); one entry may
// be -1 and is inferred.
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerReshape(OpRegistry& r) {
  OpDef d;
  d.name = "Reshape";
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
  // The shape is per sample: the batch dimension stays in front.
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::expr("{0}.reshape({0}.shape[0], *{a0})",
                          {c.arg("", pyTuple(c.attrs().ints("shape")), "shape")});
  };
  r.add(std::move(d));
}

}  // namespace netloom
