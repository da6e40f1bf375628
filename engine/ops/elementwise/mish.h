// Mish: x·tanh(softplus(x)) (Misra, 2019), as PyTorch's nn.Mish.
#pragma once

#include "engine/ops/elementwise/elementwise_op.h"

namespace netloom::ew {

struct Mish {
  static constexpr const char* kName = "Mish";
  static constexpr const char* kDoc = "Mish: x·tanh(softplus(x))";
  static constexpr std::array<Param, 0> kParams{};
  NL_HD static float softplus(float x) { return (x > 0.f ? x : 0.f) + log1pf(fm::exp(-fabsf(x))); }
  struct Forward {
    NL_HD float operator()(float x) const { return x * fm::tanh(softplus(x)); }
  };
  struct Backward {  // t + x·σ(x)·(1 - t²), t = tanh(softplus(x))
    NL_HD float operator()(float dy, float x) const {
      const float t = fm::tanh(softplus(x)), s = 1.f / (1.f + fm::exp(-x));
      return dy * (t + x * s * (1.f - t * t));
    }
  };
  static constexpr int kFlops = 8;
  static constexpr const char* kOnnx = "Mul(x, Tanh(Softplus(x)))";
  static constexpr const char* kTorch = "F.mish";
};
NL_ELEMENTWISE_OP(Mish)

}  // namespace netloom::ew
