// SiLU (swish): x·σ(x), as PyTorch's nn.SiLU.
#pragma once

#include "engine/ops/elementwise/elementwise_op.h"

namespace netloom::ew {

struct SiLU {
  static constexpr const char* kName = "SiLU";
  static constexpr const char* kDoc = "Sigmoid linear unit (swish): x·σ(x)";
  static constexpr std::array<Param, 0> kParams{};
  struct Forward {
    NL_HD float operator()(float x) const { return x / (1.f + fm::exp(-x)); }
  };
  struct Backward {  // σ(x)·(1 + x·(1 - σ(x)))
    NL_HD float operator()(float dy, float x) const {
      const float s = 1.f / (1.f + fm::exp(-x));
      return dy * s * (1.f + x * (1.f - s));
    }
  };
  static constexpr int kFlops = 4;
  static constexpr const char* kOnnx = "Mul(x, Sigmoid(x))";
  static constexpr const char* kTorch = "F.silu";
};
NL_ELEMENTWISE_OP(SiLU)

}  // namespace netloom::ew
