// BatchMatMul on CUDA: a tiled product per output batch entry (blockIdx.z), each
// operand's matrix found through its broadcast strides (kernels/core/sequence_math.h,
// as on the CPU); transposes are read through the index, never copied. Float32 with
// float32 accumulation over k in order, as the CPU's products.
#include <algorithm>

#include "kernels/core/sequence_plan.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

constexpr int kTile = 16;

struct Batched {
  int64_t m = 0, n = 0, k = 0;
  int64_t aRows = 0, aCols = 0, bRows = 0, bCols = 0;  // as stored
  bool ta = false, tb = false;
  int64_t batches = 1;
  fn::BroadcastIndex aIdx, bIdx;
};

__device__ inline float loadA(const float* a, const Batched& p, int64_t i, int64_t kk) {
  if (i >= p.m || kk >= p.k) return 0.f;
  return p.ta ? a[kk * p.aCols + i] : a[i * p.aCols + kk];
}
__device__ inline float loadB(const float* b, const Batched& p, int64_t kk, int64_t j) {
  if (kk >= p.k || j >= p.n) return 0.f;
  return p.tb ? b[j * p.bCols + kk] : b[kk * p.bCols + j];
}

__global__ void batchMatMulKernel(const float* a0, const float* b0, float* c0, Batched p) {
  __shared__ float as[kTile][kTile + 1], bs[kTile][kTile + 1];
  const int64_t e = blockIdx.z;
  const float* a = a0 + p.aIdx.source(e) * p.aRows * p.aCols;
  const float* b = b0 + p.bIdx.source(e) * p.bRows * p.bCols;
  float* c = c0 + e * p.m * p.n;
  const int64_t i = int64_t(blockIdx.y) * kTile + threadIdx.y;
  const int64_t j = int64_t(blockIdx.x) * kTile + threadIdx.x;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
    as[threadIdx.y][threadIdx.x] = loadA(a, p, i, k0 + threadIdx.x);
    bs[threadIdx.y][threadIdx.x] = loadB(b, p, k0 + threadIdx.y, j);
    __syncthreads();
    for (int t = 0; t < kTile; ++t) acc += as[threadIdx.y][t] * bs[t][threadIdx.x];
    __syncthreads();
  }
  if (i < p.m && j < p.n) c[i * p.n + j] = acc;
}

KernelFn batchMatMul(const KernelSig& s) {
  const Shape &a = s.in[0].shape, &b = s.in[1].shape, &y = s.out[0].shape;
  Batched p;
  p.aRows = a[a.size() - 2], p.aCols = a.back(), p.bRows = b[b.size() - 2], p.bCols = b.back();
  p.ta = s.attrs->b("trans_a"), p.tb = s.attrs->b("trans_b");
  p.m = p.ta ? p.aCols : p.aRows;
  p.k = p.ta ? p.aRows : p.aCols;
  p.n = p.tb ? p.bRows : p.bCols;
  const Shape batch(y.begin(), y.end() - 2);
  p.batches = numel(batch);
  p.aIdx = batchStrides(a, batch);
  p.bIdx = batchStrides(b, batch);
  cudaStream_t st = streamOf(s);
  return [p, st](const KernelIO& io) {
    if (p.m * p.n * p.batches == 0) return;
    const dim3 grid(unsigned((p.n + kTile - 1) / kTile), unsigned((p.m + kTile - 1) / kTile),
                    unsigned(p.batches));
    batchMatMulKernel<<<grid, dim3(kTile, kTile), 0, st>>>(io.in[0].f32(), io.in[1].f32(),
                                                           io.out[0].f32(), p);
    NL_CHECK_LAUNCH(batchMatMulKernel);
  };
}

// A grid's third dimension holds at most 65535 batch entries.
std::string declineBatches(const KernelSig& s) {
  const Shape &a = s.in[0].shape, &b = s.in[1].shape;
  int64_t batches = 1;  // the broadcast batch, from the operands
  for (size_t i = 0; i + 2 < std::max(a.size(), b.size()); ++i) {
    const size_t fromEnd = std::max(a.size(), b.size()) - i;
    const int64_t x = fromEnd <= a.size() ? a[a.size() - fromEnd] : 1;
    const int64_t y = fromEnd <= b.size() ? b[b.size() - fromEnd] : 1;
    batches *= std::max(x, y);
  }
  if (batches > 65535) return "more than 65535 products in one batch";
  for (const TensorDesc& t : s.in)
    if (t.dtype != DType::F32) return "needs float32 operands";
  return {};
}

}  // namespace

void registerBatchMatMul(KernelRegistry& r) {
  r.add("BatchMatMul", DeviceKind::Cuda,
        KernelImpl{"cuda.batch_matmul_tiled", declineBatches, batchMatMul});
}

}  // namespace netloom::cuda
