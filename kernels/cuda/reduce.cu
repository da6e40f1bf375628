// What the engine asks of the device itself (not kernels of ops): Σ x² over a step's
// gradients for the check before its updates, and a step's values written ahead.
#include <cstring>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"

namespace netloom::cuda {
namespace {

// Each block sums its grid-stride share in double, then adds it to `total`.
__global__ void squaresKernel(const float* x, int64_t n, double* total) {
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    s += double(x[i]) * double(x[i]);
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
  __shared__ double warps[kBlock / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kBlock / 32 ? warps[lane] : 0.0;
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) atomicAdd(total, s);  // NaN and infinity carry through the sum
  }
}

struct Bytes64 {
  unsigned char b[64];
};

__global__ void writeValuesKernel(Bytes64 v, unsigned char* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = v.b[i];
}

// The guard falls to 0 when the loss or the sum of squares is not finite.
__global__ void guardKernel(const float* loss, const double* total, float* guard) {
  if (!isfinite(*loss) || !isfinite(*total)) *guard = 0.f;
}

}  // namespace

void checkFinite(const TensorRef& loss, const std::vector<TensorRef>& grads, float* guard,
                 cudaStream_t stream, double* deviceTotal) {
  NL_CUDA(cudaMemsetAsync(deviceTotal, 0, sizeof(double), stream));
  for (const TensorRef& t : grads) {
    int64_t n = t.numel();
    if (n == 0) continue;
    unsigned blocks = std::min<unsigned>(gridFor(n), 1024);
    squaresKernel<<<blocks, kBlock, 0, stream>>>(t.f32(), n, deviceTotal);
    NL_CUDA(cudaGetLastError());
  }
  guardKernel<<<1, 1, 0, stream>>>(loss.f32(), deviceTotal, guard);
  NL_CUDA(cudaGetLastError());
}

void writeValues(void* dst, const void* src, int bytes, cudaStream_t stream) {
  if (bytes <= 0) return;
  if (bytes > int(sizeof(Bytes64))) throw CudaError("writeValues: more than 64 bytes");
  Bytes64 v{};
  std::memcpy(v.b, src, size_t(bytes));
  writeValuesKernel<<<1, 1, 0, stream>>>(v, static_cast<unsigned char*>(dst), bytes);
  NL_CUDA(cudaGetLastError());
}

double sumOfSquares(const std::vector<TensorRef>& tensors, cudaStream_t stream, double* deviceTotal,
                    double* hostTotal) {
  NL_CUDA(cudaMemsetAsync(deviceTotal, 0, sizeof(double), stream));
  for (const TensorRef& t : tensors) {
    int64_t n = t.numel();
    if (n == 0) continue;
    unsigned blocks = std::min<unsigned>(gridFor(n), 1024);
    squaresKernel<<<blocks, kBlock, 0, stream>>>(t.f32(), n, deviceTotal);
    NL_CUDA(cudaGetLastError());
  }
  NL_CUDA(cudaMemcpyAsync(hostTotal, deviceTotal, sizeof(double), cudaMemcpyDeviceToHost, stream));
  NL_CUDA(cudaStreamSynchronize(stream));
  return *hostTotal;
}

}  // namespace netloom::cuda
