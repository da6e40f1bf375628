// Accuracy: the fraction of samples whose highest score is the true class.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerAccuracy(OpRegistry& r) {
  OpDef d;
  d.name = "Accuracy";
  d.accuracy = true;
  d.category = "Metrics";
  d.role = OpRole::Metric;
  d.doc = "Fraction of samples (or positions) whose top score is the true class";
  d.inputs = {{"scores", "batch × … × classes"},
              {.name = "labels", .doc = "batch × …, int32", .dataLabels = true}};
  d.outputs = {{"accuracy", "scalar in [0, 1]"}};
  d.infer = ops::inferClassMetric;
  r.add(std::move(d));
}

}  // namespace netloom
