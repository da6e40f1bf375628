// NL_HD marks a function callable from host and device code: math written once
// (kernels/core/functors.h, rng.h) that CPU tests check and GPU kernels run.
#pragma once

#ifdef __CUDACC__
#define NL_HD __host__ __device__
#else
#define NL_HD
#endif

// NL_INLINE: inlined wherever it is called. A loop over the fast math (fast_math.h)
// vectorises only where each call is inlined: GCC left erf and e^x out of line in the
// body of a parallel region, and GELU there ran one element at a time, 4x slower on two
// threads than on one.
#if defined(__CUDACC__)
#define NL_INLINE __forceinline__
#elif defined(__GNUC__)
#define NL_INLINE inline __attribute__((always_inline))
#else
#define NL_INLINE inline
#endif
