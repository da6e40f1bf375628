// NL_HD marks a function callable from host and device code: math written once
// (kernels/core/functors.h, rng.h) that CPU tests check and GPU kernels run.
#pragma once

#ifdef __CUDACC__
#define NL_HD __host__ __device__
#else
#define NL_HD
#endif
