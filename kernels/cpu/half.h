// Kernels that read and write float or bf16 tensors: an element of either as a float,
// and the element type a tensor's DType stores (bf16 as uint16_t, its top 16 bits).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/core/functors.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {

inline float load(const float* p, int64_t i) {
  return p[i];
}
inline float load(const uint16_t* p, int64_t i) {
  return fn::FromBf16{}(p[i]);
}
inline void store(float* p, int64_t i, float v) {
  p[i] = v;
}
inline void store(uint16_t* p, int64_t i, float v) {
  p[i] = fn::ToBf16{}(v);
}

// Calls f with a null pointer of the element type a tensor of `t` holds.
template <class F>
void withElement(DType t, F&& f) {
  if (t == DType::BF16)
    f(static_cast<uint16_t*>(nullptr));
  else
    f(static_cast<float*>(nullptr));
}

template <class P>
using ElementOf = std::remove_pointer_t<P>;

// n bf16 elements as floats, and n floats rounded into bf16 (as CastBf16 rounds), by
// the threads of the step.
inline void widenElements(const uint16_t* x, float* y, int64_t n) {
  parallelForElements(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = fn::FromBf16{}(x[i]);
  });
}
inline void narrowElements(const float* x, uint16_t* y, int64_t n) {
  parallelForElements(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = fn::ToBf16{}(x[i]);
  });
}

}  // namespace netloom::cpu
