// Input: a tensor the data loader fills before each step. Its shape excludes the
// batch dimension, which the compiler prepends.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerInput(OpRegistry& r) {
  OpDef d;
  d.name = "Input";
  d.category = "Input";
  d.doc = "A batch of samples from the dataset";
  d.outputs = {{"y", "batch × shape"}};
  d.external = true;
  d.attrs = {
      intsAttr("shape", {}, 1, 1e9, "shape of one sample, without the batch dimension"),
      stringAttr("field", "x", {}, "which part of a sample it reads: 'x' (features) or 'label'"),
      stringAttr("dtype", "float32", {"float32", "int32"}, "element type; class labels are int32"),
  };
  d.localAttrs = [](Attrs& a, const std::vector<Shape>&, const std::vector<Shape>& out, int) {
    a.set("__batch", out[0][0]);  // this rank's share of the batch
  };
  d.infer = [](InferCtx& c) {
    Shape s{c.attrs.i("__batch", 1)};
    for (int64_t v : c.attrs.ints("shape")) s.push_back(v);
    c.out[0] = TensorDesc{s, c.attrs.s("dtype") == "int32" ? DType::I32 : DType::F32, {}};
    return true;
  };
  r.add(std::move(d));
}

}  // namespace netloom
