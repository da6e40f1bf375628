// Seeded, counter-based random numbers. Every stream is a pure function of
// (seed, stream, index), so results do not depend on thread count or schedule.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"

namespace netloom {

// SplitMix64 finaliser: a strong 64-bit mix, enough for initialisers and masks.
NL_HD inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

NL_HD inline uint64_t hashCombine(uint64_t a, uint64_t b) {
  return mix64(a ^ mix64(b));
}

// Uniform in [0, 1) with 24 bits of precision, the float mantissa.
NL_HD inline float uniformAt(uint64_t key, uint64_t index) {
  return static_cast<float>(mix64(key + index * 0xD1B54A32D192ED03ull) >> 40) * 0x1.0p-24f;
}

// A sequential generator for host-side work (shuffles, initialisers, synthetic data).
class Rng {
 public:
  explicit Rng(uint64_t seed) : m_state(mix64(seed)) {}

  uint64_t next() { return mix64(m_state++); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  uint64_t below(uint64_t n) { return next() % n; }  // bias negligible for our n
  double normal() {
    // Box–Muller; one value per call keeps the stream simple to reason about.
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t m_state;
};

}  // namespace netloom
