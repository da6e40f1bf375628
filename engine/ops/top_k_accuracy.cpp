// TopKAccuracy: the fraction of samples whose true class is among the k best scores.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerTopKAccuracy(OpRegistry& r) {
  OpDef d;
  d.name = "TopKAccuracy";
  d.category = "Metrics";
  d.role = OpRole::Metric;
  d.doc = "Fraction of samples (or positions) whose true class is among the k highest scores";
  d.inputs = {{"scores", "batch × … × classes"},
              {.name = "labels", .doc = "batch × …, int32", .dataLabels = true}};
  d.outputs = {{"accuracy", "scalar in [0, 1]"}};
  d.attrs = {intAttr("k", 5, 1, 1000, "how many top classes count as a hit")};
  d.infer = [](InferCtx& c) {
    if (!ops::inferClassMetric(c)) return false;
    if (c.attrs.i("k") > c.in[0].shape.back())
      return c.fail("k = " + std::to_string(c.attrs.i("k")) + " exceeds the " +
                        std::to_string(c.in[0].shape.back()) + " classes",
                    0);
    return true;
  };
  r.add(std::move(d));
}

}  // namespace netloom
