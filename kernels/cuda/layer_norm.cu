// LayerNorm and RMSNorm and their gradients on CUDA, as the CPU's kernels compute them:
// each row's statistics and gradient sums in double, reduced by a warp (or a block for
// long rows), the per-element steps from kernels/core/functors.h. The weight and bias
// gradients are column sums over the rows in double (reduce.cuh), in a fixed order.
#include "kernels/core/functors.h"
#include "kernels/core/sequence_math.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

// x as rows × cols, cols the normalised trailing shape.
struct LnDims {
  int64_t rows = 1, cols = 1;
  LnDims(const KernelSig& s, const Shape& x) {
    int64_t k = s.attrs->i("normalized_dims", 1);
    for (size_t i = 0; i < x.size(); ++i)
      (int64_t(i) < int64_t(x.size()) - k ? rows : cols) *= x[i];
  }
  // LayerNormGrad's scratch: each row's 1/√(var + eps), then the column sums' partials.
  int64_t invstdBytes() const { return alignUp(rows * int64_t(sizeof(float)), 16); }
  int64_t gradWorkspace() const { return invstdBytes() + columnSums(rows, cols).partialBytes(); }
};

template <int kThreads>
__global__ void layerNormKernel(const float* x, const float* w, const float* b, LnDims d,
                                double eps, float* y, float* mean, float* var) {
  using T = Team<kThreads>;
  for (int64_t r = T::first(); r < d.rows; r += T::stride()) {
    const float* xr = x + r * d.cols;
    float* yr = y + r * d.cols;
    double sum = 0, sq = 0;
    for (int64_t j = T::lane(); j < d.cols; j += kThreads) sum += xr[j];
    double mu = teamReduce<kThreads>(sum, SumOp{}) / double(d.cols);
    for (int64_t j = T::lane(); j < d.cols; j += kThreads) sq += (xr[j] - mu) * (xr[j] - mu);
    double v = teamReduce<kThreads>(sq, SumOp{}) / double(d.cols);
    if (T::lane() == 0) mean[r] = float(mu), var[r] = float(v);
    fn::LayerNormApply norm{float(mu), float(1.0 / sqrt(v + eps))};
    for (int64_t j = T::lane(); j < d.cols; j += kThreads)
      yr[j] = w ? norm(xr[j], w[j], b[j]) : norm(xr[j]);
  }
}

// dx per row, from Σ g and Σ g·x̂ (g = dy·w) in double; each row's invstd is kept
// for the weight gradient.
template <int kThreads>
__global__ void layerNormGradKernel(const float* dy, const float* x, const float* mean,
                                    const float* var, const float* w, LnDims d, double eps,
                                    float* dx, float* invstd) {
  using T = Team<kThreads>;
  for (int64_t r = T::first(); r < d.rows; r += T::stride()) {
    const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
    float* dxr = dx + r * d.cols;
    float m = mean[r], is = float(1.0 / sqrt(double(var[r]) + eps));
    double sg = 0, sgx = 0;
    for (int64_t j = T::lane(); j < d.cols; j += kThreads) {
      float g = dyr[j] * (w ? w[j] : 1.f);
      sg += g, sgx += g * (xr[j] - m) * is;
    }
    sg = teamReduce<kThreads>(sg, SumOp{});
    sgx = teamReduce<kThreads>(sgx, SumOp{});
    fn::LayerNormGradApply grad{m, is, float(sg / double(d.cols)), float(sgx / double(d.cols))};
    for (int64_t j = T::lane(); j < d.cols; j += kThreads)
      dxr[j] = grad(dyr[j], xr[j], w ? w[j] : 1.f);
    if (T::lane() == 0) invstd[r] = is;
  }
}

// dweight's term: dy·x̂, in float as the CPU forms it.
struct NormalizedGradTerm {
  const float *dy, *x, *mean, *invstd;
  int64_t cols;
  __device__ double operator()(int64_t r, int64_t c) const {
    int64_t i = r * cols + c;
    return dy[i] * (x[i] - mean[r]) * invstd[r];
  }
};

// Inputs x[, weight, bias]; outputs y, mean, var.
KernelFn layerNorm(const KernelSig& s) {
  LnDims d(s, s.in[0].shape);
  bool affine = s.in.size() == 3;
  double eps = s.attrs->f("eps", 1e-5);
  cudaStream_t st = streamOf(s);
  return [d, affine, eps, st](const KernelIO& io) {
    if (d.rows == 0) return;
    const float* w = affine ? io.in[1].f32() : nullptr;
    const float* b = affine ? io.in[2].f32() : nullptr;
    NL_LAUNCH_ROWS(layerNormKernel, d.rows, d.cols, st, io.in[0].f32(), w, b, d, eps,
                   io.out[0].f32(), io.out[1].f32(), io.out[2].f32());
  };
}

// Inputs dy, x, mean, var[, weight]; outputs dx, dweight, dbias.
KernelFn layerNormGrad(const KernelSig& s) {
  LnDims d(s, s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  ColumnSums plan = columnSums(d.rows, d.cols);
  cudaStream_t st = streamOf(s);
  return [d, hasWeight, eps, plan, st](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32(), *mean = io.in[2].f32();
    auto* ws = static_cast<char*>(io.workspace);
    auto* invstd = reinterpret_cast<float*>(ws);
    auto* partial = reinterpret_cast<double*>(ws + d.invstdBytes());
    if (d.rows > 0)
      NL_LAUNCH_ROWS(layerNormGradKernel, d.rows, d.cols, st, dy, x, mean, io.in[3].f32(),
                     hasWeight ? io.in[4].f32() : nullptr, d, eps, io.out[0].f32(), invstd);
    // The two column sums share `partial`: the stream runs them one after the other.
    sumColumns(plan, NormalizedGradTerm{dy, x, mean, invstd, d.cols}, partial,
               StoreFloat{io.out[1].f32()}, st);
    sumColumns(plan, MatrixTerm<float>{dy, d.cols}, partial, StoreFloat{io.out[2].f32()}, st);
  };
}

// RMSNorm ------------------------------------------------------------------------

template <int kThreads>
__global__ void rmsNormKernel(const float* x, const float* w, LnDims d, double eps, float* y,
                              float* inv) {
  using T = Team<kThreads>;
  for (int64_t r = T::first(); r < d.rows; r += T::stride()) {
    const float* xr = x + r * d.cols;
    float* yr = y + r * d.cols;
    double sq = 0;
    for (int64_t j = T::lane(); j < d.cols; j += kThreads) sq += double(xr[j]) * xr[j];
    sq = teamReduce<kThreads>(sq, SumOp{});
    const fn::RmsNormApply norm{float(1.0 / sqrt(sq / double(d.cols) + eps))};
    if (T::lane() == 0) inv[r] = norm.invrms;
    for (int64_t j = T::lane(); j < d.cols; j += kThreads) yr[j] = norm(xr[j], w ? w[j] : 1.f);
  }
}

template <int kThreads>
__global__ void rmsNormGradKernel(const float* dy, const float* x, const float* inv, const float* w,
                                  LnDims d, float* dx) {
  using T = Team<kThreads>;
  for (int64_t r = T::first(); r < d.rows; r += T::stride()) {
    const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
    float* dxr = dx + r * d.cols;
    double sgx = 0;
    for (int64_t j = T::lane(); j < d.cols; j += kThreads)
      sgx += double(dyr[j]) * (w ? w[j] : 1.f) * xr[j] * inv[r];
    sgx = teamReduce<kThreads>(sgx, SumOp{});
    const fn::RmsNormGradApply grad{inv[r], float(sgx / double(d.cols))};
    for (int64_t j = T::lane(); j < d.cols; j += kThreads)
      dxr[j] = grad(dyr[j], xr[j], w ? w[j] : 1.f);
  }
}

// dweight's term: dy·x·invrms.
struct RmsGradTerm {
  const float *dy, *x, *inv;
  int64_t cols;
  __device__ double operator()(int64_t r, int64_t c) const {
    const int64_t i = r * cols + c;
    return double(dy[i]) * x[i] * inv[r];
  }
};

// Inputs x[, weight]; outputs y, invrms.
KernelFn rmsNorm(const KernelSig& s) {
  LnDims d(s, s.in[0].shape);
  const bool affine = s.in.size() == 2;
  const double eps = s.attrs->f("eps", 1e-6);
  cudaStream_t st = streamOf(s);
  return [d, affine, eps, st](const KernelIO& io) {
    if (d.rows == 0) return;
    NL_LAUNCH_ROWS(rmsNormKernel, d.rows, d.cols, st, io.in[0].f32(),
                   affine ? io.in[1].f32() : nullptr, d, eps, io.out[0].f32(), io.out[1].f32());
  };
}

// Inputs dy, x, invrms[, weight]; outputs dx, dweight.
KernelFn rmsNormGrad(const KernelSig& s) {
  LnDims d(s, s.in[1].shape);
  const bool hasWeight = s.in.size() == 4;
  ColumnSums plan = columnSums(d.rows, d.cols);
  cudaStream_t st = streamOf(s);
  return [d, hasWeight, plan, st](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32(), *inv = io.in[2].f32();
    if (d.rows > 0)
      NL_LAUNCH_ROWS(rmsNormGradKernel, d.rows, d.cols, st, dy, x, inv,
                     hasWeight ? io.in[3].f32() : nullptr, d, io.out[0].f32());
    sumColumns(plan, RmsGradTerm{dy, x, inv, d.cols}, static_cast<double*>(io.workspace),
               StoreFloat{io.out[1].f32()}, st);
  };
}

}  // namespace

void registerRmsNorm(KernelRegistry& r) {
  r.add("RMSNorm", DeviceKind::Cuda, plainKernel("cuda.rms_norm", rmsNorm));
  KernelImpl grad = plainKernel("cuda.rms_norm_grad", rmsNormGrad);
  grad.workspace = [](const KernelSig& s) {
    const LnDims d(s, s.in[1].shape);
    return columnSums(d.rows, d.cols).partialBytes();
  };
  r.add("RMSNormGrad", DeviceKind::Cuda, std::move(grad));
}

void registerLayerNorm(KernelRegistry& r) {
  r.add("LayerNorm", DeviceKind::Cuda, plainKernel("cuda.layer_norm", layerNorm));
  KernelImpl grad = plainKernel("cuda.layer_norm_grad", layerNormGrad);
  grad.workspace = [](const KernelSig& s) { return LnDims(s, s.in[1].shape).gradWorkspace(); };
  r.add("LayerNormGrad", DeviceKind::Cuda, std::move(grad));
}

}  // namespace netloom::cuda
