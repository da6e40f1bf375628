// Softplus: log(1 + e^(βx))/β, and x itself where βx passes the threshold, as
// PyTorch's nn.Softplus. Written max(βx, 0) + log1p(e^-|βx|), which neither
// overflows nor loses the small values.
#pragma once

#include "engine/ops/elementwise/elementwise_op.h"

namespace netloom::ew {

struct Softplus {
  static constexpr const char* kName = "Softplus";
  static constexpr const char* kDoc = "Smooth ReLU: log(1 + e^(βx))/β";
  static constexpr std::array<Param, 2> kParams{{
      {"beta", 1.0, 1e-6, 1e6, "β: the sharpness of the bend"},
      {"threshold", 20.0, 0.0, 1e6, "above this βx the output is x"},
  }};
  struct Forward {
    float beta, threshold;
    NL_HD float operator()(float x) const {
      const float z = beta * x;
      if (z > threshold) return x;
      return ((z > 0.f ? z : 0.f) + log1pf(fm::exp(-fabsf(z)))) / beta;
    }
  };
  struct Backward {  // σ(βx)
    float beta, threshold;
    NL_HD float operator()(float dy, float x) const {
      const float z = beta * x;
      return z > threshold ? dy : dy / (1.f + fm::exp(-z));
    }
  };
  static constexpr int kFlops = 6;
  static constexpr const char* kOnnx = "Softplus(x); Div(Softplus(Mul(x, beta)), beta)";
  static constexpr const char* kTorch = "F.softplus";
};
NL_ELEMENTWISE_OP(Softplus)

}  // namespace netloom::ew
