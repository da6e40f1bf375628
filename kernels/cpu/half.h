// Kernels that read and write float or bf16 tensors: an element of either as a float,
// and the element type a tensor's DType stores (bf16 as uint16_t, its top 16 bits).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/core/functors.h"
#include "kernels/core/tensor.h"

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

}  // namespace netloom::cpu
