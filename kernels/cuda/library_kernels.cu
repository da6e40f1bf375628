// Small kernels around the library calls: staging a convolution's input side where
// cuDNN's symmetric padding needs it, converting batch-norm statistics between the
// op's variance and cuDNN's inverse standard deviation, and fills. The math is in
// plans.h, where CPU tests check it.
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/library.h"

namespace netloom::cuda {
namespace {

__global__ void copyRegionKernel(RegionCopy r, const float* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t from = r.source(i);
    dst[i] = from >= 0 ? src[from] : 0.f;
  }
}

template <class F>
__global__ void mapKernel(F f, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = f(x[i]);
}

__global__ void fillFloatsKernel(float v, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = v;
}

__global__ void updateRunningKernel(fn::RunningAverage meanAverage, fn::RunningAverage varAverage,
                                    float* rm, float* rv, const float* mean, const float* var,
                                    int64_t c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < c;
       i += int64_t(gridDim.x) * blockDim.x) {
    rm[i] = meanAverage(rm[i], mean[i]);
    rv[i] = varAverage(rv[i], var[i]);
  }
}

template <class F>
void map(F f, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  mapKernel<<<gridFor(n), kBlock, 0, s>>>(f, x, y, n);
  NL_CUDA(cudaGetLastError());
}

}  // namespace

void copyRegion(const float* src, float* dst, int64_t planes, const RegionCopy& r, cudaStream_t s) {
  int64_t n = planes * r.dstH * r.dstW;
  if (n == 0) return;
  copyRegionKernel<<<gridFor(n), kBlock, 0, s>>>(r, src, dst, n);
  NL_CUDA(cudaGetLastError());
}

void invStdToVariance(const float* invStd, float* var, int64_t c, double eps, cudaStream_t s) {
  map(InvStdToVariance{eps}, invStd, var, c, s);
}

void varianceToInvStd(const float* var, float* invStd, int64_t c, double eps, cudaStream_t s) {
  map(VarianceToInvStd{eps}, var, invStd, c, s);
}

void updateRunning(const BatchNormPlan& p, float* runningMean, float* runningVar, const float* mean,
                   const float* var, cudaStream_t s) {
  if (p.c == 0) return;
  updateRunningKernel<<<gridFor(p.c), kBlock, 0, s>>>(p.runningMean(), p.runningVariance(),
                                                      runningMean, runningVar, mean, var, p.c);
  NL_CUDA(cudaGetLastError());
}

void fillFloats(float* dst, float value, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  fillFloatsKernel<<<gridFor(n), kBlock, 0, s>>>(value, dst, n);
  NL_CUDA(cudaGetLastError());
}

}  // namespace netloom::cuda
