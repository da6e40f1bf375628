#include "engine/train/norms.h"

#include <cmath>

#include "kernels/core/functors.h"

namespace netloom {

void setHistogram(const float* h, double scale, proto::Histogram& out) {
  out.set_min(double(h[0]) * scale);
  out.set_max(double(h[1]) * scale);
  out.clear_counts();
  for (int b = 0; b < fn::Histogram::kBins; ++b) out.add_counts(double(h[2 + b]));
}

void reportNorms(const Program& prog, const ParamStore& store, proto::Step& step) {
  double unscale = 1;  // under loss scaling the gradients are scaled
  if (prog.lossScale != kNoValue)
    unscale = 1.0 / double(prog.read(prog.lossScale)[fn::LossScale::kUsed]);
  for (const auto& [name, sq] : prog.gradientSquares)
    (*step.mutable_grad_norms())[name] = std::sqrt(double(prog.scalar(sq))) * unscale;
  for (const auto& [name, v] : prog.gradientHistograms) {
    std::vector<float> h = prog.read(v);
    if (h.size() == size_t(fn::Histogram::kSize))
      setHistogram(h.data(), unscale, (*step.mutable_grad_histograms())[name]);
  }
  for (const auto& entry : store.entries()) {
    if (entry->kind != ValueKind::Param) continue;
    // No layout pads, so the norm and the histogram read the values as they lie.
    std::vector<float> values = ParamStore::stored(*entry);
    double squares = 0;
    for (float x : values) squares += double(x) * double(x);
    (*step.mutable_weight_norms())[entry->name] = std::sqrt(squares);
    float h[fn::Histogram::kSize];
    fn::histogramOf(values.data(), int64_t(values.size()), h);
    setHistogram(h, 1.0, (*step.mutable_weight_histograms())[entry->name]);
  }
}

}  // namespace netloom
