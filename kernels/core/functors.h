// Element-wise math written once as functors. NL_HD marks them callable from host
// and device code, so CPU tests check the same math a GPU backend runs. Activations
// take e^x, tanh and erf from fast_math.h, whose loops vectorise.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/fast_math.h"
#include "kernels/core/hd.h"
#include "kernels/core/rng.h"

namespace netloom::fn {

struct Copy {
  NL_HD NL_INLINE float operator()(float x) const { return x; }
};
// NaN passes through ReLU as it does in PyTorch (clamp_min propagates it, and its
// backward zeroes only where y <= 0): written `x > 0 ? x : 0`, a NaN weight would
// vanish into zeros and the run would go on with a finite loss.
struct Relu {
  NL_HD NL_INLINE float operator()(float x) const { return x <= 0.f ? 0.f : x; }
};
struct ReluGrad {  // from the output y
  NL_HD NL_INLINE float operator()(float dy, float y) const { return y <= 0.f ? 0.f : dy; }
};
struct LeakyRelu {
  float slope;
  NL_HD NL_INLINE float operator()(float x) const { return x > 0.f ? x : slope * x; }
};
struct LeakyReluGrad {  // from the input x
  float slope;
  NL_HD NL_INLINE float operator()(float dy, float x) const { return x > 0.f ? dy : slope * dy; }
};
struct Sigmoid {
  NL_HD NL_INLINE float operator()(float x) const { return 1.f / (1.f + fm::exp(-x)); }
};
struct SigmoidGrad {  // from the output y
  NL_HD NL_INLINE float operator()(float dy, float y) const { return dy * y * (1.f - y); }
};
struct Add {
  NL_HD NL_INLINE float operator()(float a, float b) const { return a + b; }
};
struct AddRelu {  // Add with the ReLU after it fused (a residual block's sum)
  NL_HD NL_INLINE float operator()(float a, float b) const { return Relu{}(a + b); }
};
struct Tanh {
  NL_HD NL_INLINE float operator()(float x) const { return fm::tanh(x); }
};
struct TanhGrad {  // from the output y
  NL_HD NL_INLINE float operator()(float dy, float y) const { return dy * (1.f - y * y); }
};

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;

struct Gelu {
  NL_HD NL_INLINE float operator()(float x) const {
    return 0.5f * x * (1.f + fm::erf(x * kInvSqrt2));
  }
};
struct GeluGrad {  // from the input x
  NL_HD NL_INLINE float operator()(float dy, float x) const {
    float cdf = 0.5f * (1.f + fm::erf(x * kInvSqrt2));
    float pdf = kInvSqrt2Pi * fm::exp(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};
struct GeluTanh {
  NL_HD NL_INLINE float operator()(float x) const {
    float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + fm::tanh(u));
  }
};
struct GeluTanhGrad {
  NL_HD NL_INLINE float operator()(float dy, float x) const {
    float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    float t = fm::tanh(u);
    float du = kSqrt2OverPi * (1.f + 3.f * 0.044715f * x * x);
    return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du);
  }
};

// Inverted dropout of element `at` (its logical NCHW index) on the stream `key`: a
// product, as PyTorch's mask is, so a dropped NaN stays NaN.
struct Dropout {
  uint64_t key;
  float p, scale;  // scale = 1 / (1 - p)
  NL_HD NL_INLINE float operator()(float x, uint64_t at) const {
    return x * (uniformAt(key, at) < p ? 0.f : scale);
  }
};

// BatchNorm's running statistics as PyTorch keeps them: running = (1 - momentum)·running
// + momentum·batch·scale, in double; scale is 1 for the mean and N/(N - 1) for the
// variance, which enters unbiased.
struct RunningAverage {
  double momentum, scale;
  NL_HD NL_INLINE float operator()(float running, float batch) const {
    return float((1 - momentum) * running + momentum * batch * scale);
  }
};

// Comparisons as std::max and std::isnan make them, written for both compilers:
// std::max(a, b) is `a < b ? b : a`, so a NaN first argument is kept (fmax would drop
// it), and NaN is the one value unequal to itself.
template <class T>
NL_HD NL_INLINE T maxOf(T a, T b) {
  return a < b ? b : a;
}
NL_HD NL_INLINE bool isNan(float x) {
  return x != x;
}

// Losses ----------------------------------------------------------------------------
// Each loss is a sum over elements (or rows) taken in double, then divided once; the
// per-element terms and gradients are below.

// (p - t)²: the float difference squared in double, as MSELoss sums it.
struct SquaredError {
  NL_HD NL_INLINE double operator()(float p, float t) const { return double(p - t) * (p - t); }
};
struct MseGrad {  // d/dp of the mean; scale = 2·dloss / n
  float scale;
  NL_HD NL_INLINE float operator()(float p, float t) const { return scale * (p - t); }
};

// Binary cross-entropy of one element in double: on logits through a stable
// log-sigmoid (BCEWithLogitsLoss), on probabilities with each log clamped at -100 as
// PyTorch's BCELoss does, so a saturated probability stays finite.
struct BceTerm {
  bool logits;
  NL_HD NL_INLINE double operator()(float x, float t) const {
    double xd = x;
    if (logits) return maxOf(xd, 0.0) - xd * t + log1p(exp(-fabs(xd)));
    double lp = maxOf(log(xd), -100.0), l1p = maxOf(log1p(-xd), -100.0);
    return -(t * lp + (1.0 - t) * l1p);
  }
};
// d/dx (or, wrtTarget, d/dt) of the mean; scale = dloss / n. By the target it is
// -logit(p): -x on logits, log(1 - p) - log(p) clamped as the loss is. By the
// probability the denominator p·(1 - p) is kept above 1e-12, as PyTorch does.
struct BceGrad {
  float scale;
  bool logits, wrtTarget;
  NL_HD NL_INLINE float operator()(float x, float t) const {
    if (wrtTarget)
      return logits
                 ? -scale * x
                 : scale * float(maxOf(log1p(-double(x)), -100.0) - maxOf(log(double(x)), -100.0));
    if (logits) return scale * (1.f / (1.f + expf(-x)) - t);
    float denom = maxOf(x * (1.f - x), 1e-12f);
    return scale * (x - t) / denom;
  }
};

// d/dlogits of the mean softmax cross-entropy for one class: e·inv is its softmax
// probability, the target puts ε/C on every class and 1 - ε more on the label.
// `hit` is computed as (1 - ε + ε/C) - ε/C, not 1 - ε, so that both backends round
// it the same way the original formula did.
struct XentGrad {
  float off, hit, scale;  // scale = dloss / batch
  NL_HD static XentGrad make(float eps, int64_t classes, float scale) {
    float off = eps / float(classes), on = 1.f - eps + off;
    return {off, on - off, scale};
  }
  NL_HD NL_INLINE float operator()(float e, float inv, bool label) const {
    float d = (e * inv - off) * scale;
    return label ? d - hit * scale : d;
  }
};

// Whether the score x of class j ranks above the label's score (class `at`) in a
// top-k count: higher, or equal at a lower index (argmax's tie rule). NaN ranks
// above every number, as in PyTorch's argmax and topk.
struct RanksAbove {
  float label;
  int64_t at;
  NL_HD NL_INLINE bool operator()(float x, int64_t j) const {
    bool nan = isNan(x), labelNan = isNan(label);
    bool above = labelNan ? false : nan || x > label;
    bool tie = labelNan ? nan : x == label;
    return above || (tie && j < at);
  }
};

// BatchNorm folded into the layer before it (evaluation) ---------------------------------
// Channel c of the layer scales by s = γ/√(var + ε), BatchNorm's own scale rounded as it
// rounds it, and its bias becomes (b - mean)·s + β (b = 0 without the layer's bias;
// γ = 1, β = 0 without BatchNorm's affine parameters).
struct FoldBatchNorm {
  double eps;
  NL_HD float scale(float var, float gamma) const {
    return float(1.0 / sqrt(double(var) + eps)) * gamma;
  }
  NL_HD float bias(float b, float mean, float s, float beta) const { return (b - mean) * s + beta; }
};

// LayerNorm ---------------------------------------------------------------------------
// One row's statistics are reduced in double; these are its per-element steps, in float.
struct LayerNormApply {
  float mean, invstd;
  NL_HD NL_INLINE float operator()(float x) const { return (x - mean) * invstd; }
  NL_HD NL_INLINE float operator()(float x, float w, float b) const {
    return (x - mean) * invstd * w + b;
  }
};
// dx = invstd·(g - mean(g) - x̂·mean(g·x̂)) with g = dy·w; mg and mgx are the two means.
struct LayerNormGradApply {
  float mean, invstd, mg, mgx;
  NL_HD NL_INLINE float operator()(float dy, float x, float w) const {
    return invstd * (dy * w - mg - (x - mean) * invstd * mgx);
  }
};

// Optimizers --------------------------------------------------------------------------
// PyTorch's update rules (torch.optim), one element of a parameter at a time, in
// place: a run can be compared step by step with PyTorch on either backend.

// Autocast's rounding: a float rounded to the nearest bfloat16 or IEEE half, ties to
// even, kept in a float. NaN stays NaN; past the format's range is infinity; halves
// below 2^-14 are subnormal, in steps of 2^-24. Every such value is exact in TF32,
// whose 10-bit mantissa and 8-bit exponent hold both formats.
NL_HD NL_INLINE uint32_t floatBits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
#endif
}
NL_HD NL_INLINE float bitsFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
#endif
}
struct RoundBf16 {
  NL_HD NL_INLINE float operator()(float x) const {
    uint32_t u = floatBits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return bitsFloat(u & 0xffff0000u);
  }
};
struct RoundFp16 {
  NL_HD NL_INLINE float operator()(float x) const {
    uint32_t u = floatBits(x);
    uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return x;  // NaN
    float a = bitsFloat(mag), r;
    if (a < 6.103515625e-05f) {  // 2^-14: subnormal halves, multiples of 2^-24
      r = rintf(a * 16777216.f) * 5.9604644775390625e-08f;
    } else {
      mag += 0xfffu + ((mag >> 13) & 1u);
      r = bitsFloat(mag & 0xffffe000u);
      if (r > 65504.f) r = bitsFloat(0x7f800000u);  // infinity
    }
    return bitsFloat(floatBits(r) | sign);
  }
};
// bfloat16 storage: a float rounded as RoundBf16 rounds it, kept as its top 16 bits,
// and those bits read back as the float they are.
struct ToBf16 {
  NL_HD NL_INLINE uint16_t operator()(float x) const {
    const uint32_t u = floatBits(x);
    // A NaN whose payload is all in the low half would read as infinity: quiet NaN.
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
    return uint16_t(floatBits(RoundBf16{}(x)) >> 16);
  }
};
struct FromBf16 {
  NL_HD NL_INLINE float operator()(uint16_t b) const { return bitsFloat(uint32_t(b) << 16); }
};
struct RoundHalf {  // one of the two, chosen at plan time
  bool fp16;
  NL_HD NL_INLINE float operator()(float x) const { return fp16 ? RoundFp16{}(x) : RoundBf16{}(x); }
};

// A tensor's values in Histogram::kBins equal bins between their finite minimum
// and maximum, as a run reports its weights and gradients (TensorBoard's
// distributions); non-finite values are left out. Laid out as [min, max, count of
// each bin], all floats: [0, 0, 0, ...] when nothing is finite.
struct Histogram {
  static constexpr int kBins = 30;
  static constexpr int kSize = kBins + 2;
  // The bin of x (finite, in [lo, hi]); all in the first when lo == hi.
  NL_HD static int bin(float x, float lo, float hi) {
    if (!(hi > lo)) return 0;
    int b = int(float(kBins) * ((x - lo) / (hi - lo)));
    return b < 0 ? 0 : b >= kBins ? kBins - 1 : b;
  }
};

// The host's histogram of n values (the CPU kernel's, and the weights' a run reports).
inline void histogramOf(const float* x, int64_t n, float* out) {
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
  for (int b = 0; b < Histogram::kSize; ++b) out[b] = 0.f;
  if (!(lo <= hi)) return;
  out[0] = lo, out[1] = hi;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) out[2 + Histogram::bin(x[i], lo, hi)] += 1.f;
}

// Dynamic loss scaling for fp16, as PyTorch's GradScaler: the loss gradient starts at
// `scale`; a step whose scaled gradients are not all finite changes no weight and
// halves the scale, and `interval` finite steps in a row double it. The state, kept
// with the optimizer's, is five floats (all zero before the first step):
struct LossScale {
  enum : int { kScale, kGood, kSkipped, kSkipNow, kUsed, kSize };
  float initial, interval;
  NL_HD float current(const float* s) const { return s[kScale] > 0.f ? s[kScale] : initial; }
  // After the backward pass, from Σ grad² over every gradient: whether the updates
  // skip this step, the scale they divide by, and the next step's scale.
  NL_HD void check(float* s, float squares) const {
    float scale = current(s);
    bool finite = squares - squares == 0.f;  // false for NaN and ±inf
    s[kUsed] = scale;
    s[kSkipNow] = finite ? 0.f : 1.f;
    if (!finite) {
      s[kScale] = scale * 0.5f > 0.f ? scale * 0.5f : scale;
      s[kGood] = 0.f;
      s[kSkipped] += 1.f;
    } else if (s[kGood] + 1.f >= interval) {
      s[kScale] = scale * 2.f < 3.0e38f ? scale * 2.f : scale;
      s[kGood] = 0.f;
    } else {
      s[kScale] = scale;
      s[kGood] += 1.f;
    }
  }
};

// SGD: L2 decay added to the gradient; momentum buf = μ·buf + d; Nesterov steps by
// d + μ·buf instead of buf.
struct SgdStep {
  float lr, momentum, weightDecay;
  bool nesterov;
  NL_HD NL_INLINE void operator()(float& p, float g) const {  // without a momentum buffer
    float d = g + weightDecay * p;
    p -= lr * d;
  }
  NL_HD NL_INLINE void operator()(float& p, float g, float& buf) const {
    float d = g + weightDecay * p;
    buf = momentum * buf + d;
    d = nesterov ? d + momentum * buf : buf;
    p -= lr * d;
  }
};

// Adam with bias correction; weight decay joins the gradient (Adam) or shrinks the
// weights directly (AdamW, `decoupled`). make() folds the step's constants on the
// host, in the precisions PyTorch's formulas use.
struct AdamStep {
  float beta1, beta2, eps;
  float l2;        // weight decay added to the gradient (Adam), else 0
  float keep;      // the weights' factor: 1 - lr·wd (AdamW), else 1
  float stepSize;  // lr / (1 - β1^t)
  float bc2Sqrt;   // √(1 - β2^t)
  // On the host, or on the device from the step's values in device memory (a
  // recorded step replays with each step's own lr and t).
  NL_HD static AdamStep make(float beta1, float beta2, float eps, float weightDecay, bool decoupled,
                             double lr, int64_t step) {
    float lrf = float(lr);
    double t = double(step);
    float bc1 = float(1.0 - pow(double(beta1), t));
    float bc2Sqrt = float(sqrt(1.0 - pow(double(beta2), t)));
    return {beta1,
            beta2,
            eps,
            decoupled ? 0.f : weightDecay,
            decoupled ? 1.f - lrf * weightDecay : 1.f,
            lrf / bc1,
            bc2Sqrt};
  }
  NL_HD NL_INLINE void operator()(float& p, float g, float& m, float& v) const {
    float gi = g + l2 * p;
    m = beta1 * m + (1.f - beta1) * gi;
    v = beta2 * v + (1.f - beta2) * gi * gi;
    float denom = sqrtf(v) / bc2Sqrt + eps;
    p = p * keep - stepSize * m / denom;
  }
};

// Σ_k blocks[k·n + i] for k = 0 … count−1, in that order: the stages holding a tied
// weight sum their parts of its gradient alike, to the same bits.
NL_HD NL_INLINE float sumOfBlocks(const float* blocks, int count, int64_t n, int64_t i) {
  float sum = blocks[i];
  for (int k = 1; k < count; ++k) sum += blocks[int64_t(k) * n + i];
  return sum;
}

}  // namespace netloom::fn
