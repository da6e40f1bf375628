// e^x, tanh and erf as straight-line float arithmetic: a range reduction, a polynomial,
// and selects instead of branches. A CPU loop over them vectorises, where a call to
// libm's expf, tanhf or erff kept every element of Sigmoid, Tanh and GELU scalar (about
// 14 ns each), and a GPU runs the very same steps, so both backends compute the same
// values. Each is within 2 ulp of the correctly rounded value (tst_functors measures
// it against double precision over the float range); PyTorch's vectorised CPU kernels
// (Sleef) are within 1. NaN passes through, and each saturates as libm's does.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/core/hd.h"

namespace netloom::fm {

NL_HD NL_INLINE float asFloat(int32_t bits) {
#ifdef __CUDA_ARCH__
  return __int_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// 2^n for whole n in [-126, 127], through the exponent bits.
NL_HD NL_INLINE float pow2(int32_t n) {
  return asFloat((n + 127) << 23);
}

// e^x = 2^n · e^r with n = round(x / ln 2) and r = x - n·ln 2 (ln 2 in two parts, the
// first exact in a few bits, so n·ln2hi is exact), |r| ≤ ln 2 / 2, where the Taylor
// polynomial of e^r to degree 7 is within 1e-8 relative. 2^n is applied as two halves,
// so a result that overflows becomes infinity and one below the normal range a
// subnormal or zero, as expf gives.
NL_HD NL_INLINE float exp(float x) {
  const bool nan = x != x;
  float c = nan ? 0.f : x;
  c = c < -104.f ? -104.f : c;
  c = c > 89.f ? 89.f : c;
  // x / ln 2 rounded to the nearest whole number by adding and taking away 1.5·2^23
  // (floorf would not vectorise).
  const float n = (c * 1.44269504088896341f + 12582912.f) - 12582912.f;
  float r = c - n * 0.693145751953125f;
  r = r - n * 1.42860682030941723e-6f;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t whole = int32_t(n), half = whole >> 1;
  const float y = p * pow2(half) * pow2(whole - half);
  return nan ? x : y;
}

// tanh: an odd polynomial below 0.625 (x + x³·P(x²), P fitted for relative error
// under 5e-9 there), 1 - 2 / (e^{2|x|} + 1) with x's sign above, which is 1 once
// e^{2|x|} overflows.
NL_HD NL_INLINE float tanh(float x) {
  const float a = x < 0.f ? -x : x;
  const float u = x * x;
  float p = -0.005718978858116119f;
  p = p * u + 0.020653140828537704f;
  p = p * u - 0.05374466362717974f;
  p = p * u + 0.1333151274650968f;
  p = p * u - 0.333332852233676f;
  const float small = x + x * u * p;
  const float big = 1.f - 2.f / (fm::exp(2.f * a) + 1.f);
  const float y = a < 0.625f ? small : (x < 0.f ? -big : big);
  return x != x ? x : y;
}

// erf: x + x·(P(x²) - 1) below 1 (relative error under 2e-9), 1 - e^{-x²}·Q(s) up to 3.92 with Q
// fitted to erfc(x)·e^{x²} in s = a + b/x, which runs over [-1, 1] there (absolute
// error under 3e-11), and ±1 beyond, where erf rounds to 1 in float.
NL_HD NL_INLINE float erf(float x) {
  const float a = x < 0.f ? -x : x;
  const float u = x * x;
  float p = 7.898202138911792e-05f;
  p = p * u - 0.0008024351373012856f;
  p = p * u + 0.005190053211837312f;
  p = p * u - 0.02685480830025827f;
  p = p * u + 0.1128361242061289f;
  p = p * u - 0.37612628842230966f;
  p = p * u + 0.128379166509569f;  // P's constant term less 1: x is added exactly
  const float small = x + x * p;
  const float s = -1.684937281035046f + 2.6849507146844753f / (a < 1.f ? 1.f : a);
  float q = 2.6779980895480504e-06f;
  q = q * s - 2.4585439508263696e-05f;
  q = q * s + 0.00011322077080960086f;
  q = q * s - 0.0003320474376180549f;
  q = q * s + 0.00043759131055510353f;
  q = q * s + 0.002273356887820571f;
  q = q * s - 0.023867404507398444f;
  q = q * s + 0.14205320699086124f;
  q = q * s + 0.3069261925788588f;
  float big = 1.f - fm::exp(-u) * q;
  big = a >= 3.92f ? 1.f : big;
  const float y = a < 1.f ? small : (x < 0.f ? -big : big);
  return x != x ? x : y;
}

}  // namespace netloom::fm
