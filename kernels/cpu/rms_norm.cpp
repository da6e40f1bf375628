// RMSNorm on the CPU: each row's mean square reduced in double by the thread that
// owns the row, the per-element steps from kernels/core/sequence_math.h (which the
// CUDA kernels share); the weight's gradient summed per column band over the rows
// in order, so it is the same for any thread count.
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/core/sequence_math.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

struct Rows {
  int64_t rows = 1, cols = 1;
};

Rows rowsOf(const KernelSig& s, const Shape& x) {
  Rows d;
  const int64_t k = s.attrs->i("normalized_dims", 1);
  for (size_t i = 0; i < x.size(); ++i)
    (int64_t(i) < int64_t(x.size()) - k ? d.rows : d.cols) *= x[i];
  return d;
}

// Inputs x[, weight]; outputs y, invrms.
KernelFn rmsNorm(const KernelSig& s) {
  const Rows d = rowsOf(s, s.in[0].shape);
  const bool affine = s.in.size() == 2;
  const double eps = s.attrs->f("eps", 1e-6);
  return [d, affine, eps](const KernelIO& io) {
    const float* x = io.in[0].f32();
    const float* w = affine ? io.in[1].f32() : nullptr;
    float *y = io.out[0].f32(), *inv = io.out[1].f32();
    parallelFor(d.rows, std::max<int64_t>(1, kParallelGrain / d.cols), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float* xr = x + r * d.cols;
        float* yr = y + r * d.cols;
        double sq = 0;
#pragma omp simd reduction(+ : sq)
        for (int64_t j = 0; j < d.cols; ++j) sq += double(xr[j]) * xr[j];
        const fn::RmsNormApply norm{float(1.0 / std::sqrt(sq / double(d.cols) + eps))};
        inv[r] = norm.invrms;
#pragma omp simd
        for (int64_t j = 0; j < d.cols; ++j) yr[j] = norm(xr[j], w ? w[j] : 1.f);
      }
    });
  };
}

// Inputs dy, x, invrms[, weight]; outputs dx, dweight.
KernelFn rmsNormGrad(const KernelSig& s) {
  const Rows d = rowsOf(s, s.in[1].shape);
  const bool hasWeight = s.in.size() == 4;
  auto sums = std::make_shared<std::vector<double>>(size_t(d.cols));
  return [d, hasWeight, sums](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32(), *inv = io.in[2].f32();
    const float* w = hasWeight ? io.in[3].f32() : nullptr;
    float *dx = io.out[0].f32(), *dw = io.out[1].f32();
    parallelFor(d.rows, std::max<int64_t>(1, kParallelGrain / (3 * d.cols)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
                    float* dxr = dx + r * d.cols;
                    double sgx = 0;  // Σ g·x̂, g = dy·w
#pragma omp simd reduction(+ : sgx)
                    for (int64_t j = 0; j < d.cols; ++j)
                      sgx += double(dyr[j]) * (w ? w[j] : 1.f) * xr[j] * inv[r];
                    const fn::RmsNormGradApply grad{inv[r], float(sgx / double(d.cols))};
#pragma omp simd
                    for (int64_t j = 0; j < d.cols; ++j)
                      dxr[j] = grad(dyr[j], xr[j], w ? w[j] : 1.f);
                  }
                });
    double* sw = sums->data();
    parallelFor(d.cols, d.rows * d.cols < kParallelGrain ? d.cols + 1 : 16,
                [&](int64_t lo, int64_t hi) {
                  std::fill(sw + lo, sw + hi, 0.0);
                  for (int64_t r = 0; r < d.rows; ++r) {
                    const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
#pragma omp simd
                    for (int64_t j = lo; j < hi; ++j) sw[j] += double(dyr[j]) * xr[j] * inv[r];
                  }
                  for (int64_t j = lo; j < hi; ++j) dw[j] = float(sw[j]);
                });
  };
}

}  // namespace

void registerRmsNorm(KernelRegistry& r) {
  r.add("RMSNorm", DeviceKind::Cpu, kernel("cpu.rms_norm", rmsNorm));
  r.add("RMSNormGrad", DeviceKind::Cpu, kernel("cpu.rms_norm_grad", rmsNormGrad));
}

}  // namespace netloom::cpu
