// Element-wise math written once as functors. NL_HD marks them callable from host
// and device code, so CPU tests check the same math a GPU backend runs.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/core/rng.h"

namespace netloom::fn {

// NaN passes through ReLU as it does in PyTorch (clamp_min propagates it, and its
// backward zeroes only where y <= 0): written `x > 0 ? x : 0`, a NaN weight would
// vanish into zeros and the run would go on with a finite loss.
struct Relu {
  NL_HD float operator()(float x) const { return x <= 0.f ? 0.f : x; }
};
struct ReluGrad {  // from the output y
  NL_HD float operator()(float dy, float y) const { return y <= 0.f ? 0.f : dy; }
};
struct LeakyRelu {
  float slope;
  NL_HD float operator()(float x) const { return x > 0.f ? x : slope * x; }
};
struct LeakyReluGrad {  // from the input x
  float slope;
  NL_HD float operator()(float dy, float x) const { return x > 0.f ? dy : slope * dy; }
};
struct Sigmoid {
  NL_HD float operator()(float x) const { return 1.f / (1.f + expf(-x)); }
};
struct SigmoidGrad {  // from the output y
  NL_HD float operator()(float dy, float y) const { return dy * y * (1.f - y); }
};
struct Add {
  NL_HD float operator()(float a, float b) const { return a + b; }
};
struct Tanh {
  NL_HD float operator()(float x) const { return tanhf(x); }
};
struct TanhGrad {  // from the output y
  NL_HD float operator()(float dy, float y) const { return dy * (1.f - y * y); }
};

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;

struct Gelu {
  NL_HD float operator()(float x) const { return 0.5f * x * (1.f + erff(x * kInvSqrt2)); }
};
struct GeluGrad {  // from the input x
  NL_HD float operator()(float dy, float x) const {
    float cdf = 0.5f * (1.f + erff(x * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};
struct GeluTanh {
  NL_HD float operator()(float x) const {
    float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + tanhf(u));
  }
};
struct GeluTanhGrad {
  NL_HD float operator()(float dy, float x) const {
    float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    float du = kSqrt2OverPi * (1.f + 3.f * 0.044715f * x * x);
    return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du);
  }
};

// Inverted dropout of element `at` (its logical NCHW index) on the stream `key`: a
// product, as PyTorch's mask is, so a dropped NaN stays NaN.
struct Dropout {
  uint64_t key;
  float p, scale;  // scale = 1 / (1 - p)
  NL_HD float operator()(float x, uint64_t at) const {
    return x * (uniformAt(key, at) < p ? 0.f : scale);
  }
};

// BatchNorm's running statistics as PyTorch keeps them: running = (1 - momentum)·running
// + momentum·batch·scale, in double; scale is 1 for the mean and N/(N - 1) for the
// variance, which enters unbiased.
struct RunningAverage {
  double momentum, scale;
  NL_HD float operator()(float running, float batch) const {
    return float((1 - momentum) * running + momentum * batch * scale);
  }
};

}  // namespace netloom::fn
