// Accuracy: the fraction of samples whose highest score is the true class.
#include "engine/ops/op_helpers.h"

namespace netloom {

bool inferClassMetric(InferCtx& c) {
  const Shape& x = c.in[0].shape;
  if (x.size() != 2) return c.fail("expects batch × classes, got " + shapeToString(x), 0);
  if (!ops::requireLabels(c, 1, x[0])) return false;
  c.out[0] = TensorDesc{{}, DType::F32, {}};
  return true;
}

void registerAccuracy(OpRegistry& r) {
  OpDef d;
  d.name = "Accuracy";
  d.category = "Metrics";
  d.role = OpRole::Metric;
  d.doc = "Fraction of samples whose top score is the true class";
  d.inputs = {{"scores", "batch × classes"}, {"labels", "batch, int32"}};
  d.outputs = {{"accuracy", "scalar in [0, 1]"}};
  d.infer = inferClassMetric;
  r.add(std::move(d));
}

}  // namespace netloom
