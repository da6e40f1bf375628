// The arithmetic inside the parallel kernels on CUDA (kernels/core/collectives.h's
// ParallelMath), on the device's stream: the mean of a pipeline's micro-batch
// losses, its gradient, the sum of a tied weight's gradient parts, and ZeRO's
// update of one shard (optimizers.cu).
#include <algorithm>

#include "kernels/core/collectives.h"
#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

// The scalars' addresses travel as the launch's argument, a chunk at a time.
constexpr int kScalarsPerLaunch = 32;
struct Scalars {
  const float* at[kScalarsPerLaunch];
  int count;
};

// acc (+)= Σ in order; the last chunk writes the mean.
__global__ void meanChunk(Scalars chunk, bool first, bool last, double total, double* acc,
                          float* out) {
  double sum = first ? 0.0 : *acc;
  for (int k = 0; k < chunk.count; ++k) sum += double(*chunk.at[k]);
  *acc = sum;
  if (last) *out = float(sum / total);
}

__global__ void scaleOne(const float* in, float* out, float factor) {
  *out = *in * factor;
}

__global__ void sumBlocksKernel(const float* blocks, int count, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = fn::sumOfBlocks(blocks, count, n, i);
}

void meanOfScalars(void* stream, const TensorRef* in, size_t count, float* out, double* acc) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  for (size_t begin = 0; begin < count; begin += kScalarsPerLaunch) {
    Scalars chunk{};
    chunk.count = int(std::min<size_t>(kScalarsPerLaunch, count - begin));
    for (int k = 0; k < chunk.count; ++k) chunk.at[k] = in[begin + size_t(k)].f32();
    meanChunk<<<1, 1, 0, st>>>(chunk, begin == 0, begin + size_t(chunk.count) >= count,
                               double(count), acc, out);
    NL_CHECK_LAUNCH(meanChunk);
  }
}

}  // namespace

ParallelMath parallelMath() {
  ParallelMath m;
  m.meanOfScalars = meanOfScalars;
  m.scaleScalar = [](void* stream, const float* in, float* out, float factor) {
    scaleOne<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(in, out, factor);
    NL_CHECK_LAUNCH(scaleOne);
  };
  m.sumBlocks = [](void* stream, const float* blocks, int count, int64_t n, float* out) {
    if (n == 0) return;
    sumBlocksKernel<<<gridFor(n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(blocks, count, n,
                                                                                  out);
    NL_CHECK_LAUNCH(sumBlocksKernel);
  };
  m.stepShard = stepShard;
  return m;
}

}  // namespace netloom::cuda
