// HardSwish: x·ReLU6(x + 3)/6 (Howard et al., MobileNetV3), as PyTorch's nn.Hardswish,
// whose gradient at x = ±3 this follows: x/3 + 1/2 on [-3, 3].
#pragma once

#include "engine/ops/elementwise/elementwise_op.h"

namespace netloom::ew {

struct HardSwish {
  static constexpr const char* kName = "HardSwish";
  static constexpr const char* kDoc = "Hard swish: x·ReLU6(x + 3)/6";
  static constexpr std::array<Param, 0> kParams{};
  struct Forward {
    NL_HD float operator()(float x) const {
      return x <= -3.f ? 0.f : x >= 3.f ? x : x * (x + 3.f) / 6.f;
    }
  };
  struct Backward {
    NL_HD float operator()(float dy, float x) const {
      return x < -3.f ? 0.f : x <= 3.f ? dy * (x / 3.f + 0.5f) : dy;
    }
  };
  static constexpr int kFlops = 4;
  // Opset 14 has HardSwish; before it PyTorch writes x·HardSigmoid(x), α = 1/6 and
  // ONNX's default β = 1/2.
  static constexpr const char* kOnnx = "HardSwish(x); Mul(x, HardSigmoid{alpha=0.16666667}(x))";
  static constexpr const char* kTorch = "F.hardswish";
};
NL_ELEMENTWISE_OP(HardSwish)

}  // namespace netloom::ew
