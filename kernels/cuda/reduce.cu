// Reductions the engine asks of the device itself (not kernels of ops): Σ x² over a
// step's gradients for the check before its updates.
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

}  // namespace

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
