#include "engine/ops/init.h"

#include <cmath>

namespace netloom {

AttrDef initAttr() {
  return stringAttr(
      "init", "default",
      {"default", "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal", "zeros"},
      "weight initialiser; 'default' matches PyTorch");
}

void fillUniform(const TensorRef& t, double bound, Rng& rng) {
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = float(rng.uniform(-bound, bound));
}

void fillNormal(const TensorRef& t, double stddev, Rng& rng) {
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = float(rng.normal() * stddev);
}

void fillConstant(const TensorRef& t, float v) {
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = v;
}

void initWeight(const std::string& scheme, const TensorRef& w, int64_t fanIn, int64_t fanOut,
                Rng& rng) {
  double in = double(fanIn), out = double(fanOut);
  if (scheme == "kaiming_uniform") {
    fillUniform(w, std::sqrt(6.0 / in), rng);  // gain √2 for ReLU
  } else if (scheme == "kaiming_normal") {
    fillNormal(w, std::sqrt(2.0 / in), rng);
  } else if (scheme == "xavier_uniform") {
    fillUniform(w, std::sqrt(6.0 / (in + out)), rng);
  } else if (scheme == "xavier_normal") {
    fillNormal(w, std::sqrt(2.0 / (in + out)), rng);
  } else if (scheme == "zeros") {
    fillConstant(w, 0.0f);
  } else {
    // PyTorch's default: Kaiming-uniform with a = √5, i.e. bound 1/√fan_in.
    fillUniform(w, 1.0 / std::sqrt(in), rng);
  }
}

}  // namespace netloom
