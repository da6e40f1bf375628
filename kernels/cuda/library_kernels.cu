// Small kernels around the library calls: staging a convolution's input side where
// cuDNN's symmetric padding needs it, converting batch-norm statistics between the
// op's variance and cuDNN's inverse standard deviation, fills, and the bf16 conversions
// (of bf16 storage and its convolutions). The math is in plans.h and functors.h, where
// CPU tests check it.
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

__global__ void toBf16Kernel(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fn::ToBf16{}(x[i]);
}

__global__ void fromBf16Kernel(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fn::FromBf16{}(x[i]);
}

__global__ void addChannelBiasBf16Kernel(uint16_t* y, const float* bias, int64_t c, int64_t area,
                                         int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fn::ToBf16{}(fn::FromBf16{}(y[i]) + bias[i / area % c]);
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

void toBf16(const float* src, uint16_t* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  toBf16Kernel<<<gridFor(n), kBlock, 0, s>>>(src, dst, n);
  NL_CUDA(cudaGetLastError());
}

void fromBf16(const uint16_t* src, float* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  fromBf16Kernel<<<gridFor(n), kBlock, 0, s>>>(src, dst, n);
  NL_CUDA(cudaGetLastError());
}

void addChannelBiasBf16(uint16_t* y, const float* bias, int64_t n, int64_t c, int64_t area,
                        cudaStream_t s) {
  const int64_t total = n * c * area;
  if (total == 0) return;
  addChannelBiasBf16Kernel<<<gridFor(total), kBlock, 0, s>>>(y, bias, c, area, total);
  NL_CUDA(cudaGetLastError());
}

}  // namespace netloom::cuda
