// Reductions on CUDA: the bias gradients (ReduceRows, ReduceChannels), Σ x²
// (SumSquares) and global average pooling with its gradient. Sums run in double in an
// order fixed by the shapes (reduce.cuh), so a result does not change from launch to
// launch; the scratch a sum needs is the launch's workspace, planned in the arena.
#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

// With `weights`, the divisor is their sum (the rows a loss counted).
__global__ void meanKernel(const double* values, int64_t count, double divisor,
                           const double* weights, float* out) {
  double acc = 0, w = 0;
  for (int64_t i = threadIdx.x; i < count; i += kBlock) {
    acc += values[i];
    if (weights) w += weights[i];
  }
  acc = teamReduce<kBlock>(acc, SumOp{});
  if (weights) w = teamReduce<kBlock>(w, SumOp{});
  if (threadIdx.x == 0) *out = float(acc / (weights ? w : divisor));
}

// One block per chunk of kSquaresChunk elements, summed in float as the CPU sums its
// blocks; the chunks' sums then go through launchMean in double.
__global__ void squaresKernel(const float* x, int64_t n, int64_t chunks, double* partial) {
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    int64_t lo = chunk * kSquaresChunk, hi = lo + kSquaresChunk < n ? lo + kSquaresChunk : n;
    float acc = 0.f;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kBlock) acc += x[i] * x[i];
    acc = teamReduce<kBlock>(acc, SumOp{});
    if (threadIdx.x == 0) partial[chunk] = acc;
  }
}

struct StoreMean {
  float* to;
  double count;
  __device__ void operator()(int64_t i, double v) const { to[i] = float(v / count); }
};

__global__ void spreadKernel(const float* dy, float* dx, int64_t n, int64_t area) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = dy[i / area] / float(area);
}

// x as N × C × inner (inner: the product of the dimensions after C).
struct ChannelDims {
  int64_t n, c, inner;
  explicit ChannelDims(const Shape& x)
      : n(x[0]), c(x[1]), inner(numel(x) / std::max<int64_t>(1, x[0] * x[1])) {}
  // Per-plane sums (none when inner is 1: x is then N × C already), then the planes'
  // column sums over N.
  int64_t planeBytes() const { return inner > 1 ? n * c * int64_t(sizeof(double)) : 0; }
  int64_t workspace() const { return planeBytes() + columnSums(n, c).partialBytes(); }
};

// ReduceRows: x as rows × n, n its last dimension, summed over the rows.
ColumnSums reduceRowsPlan(const KernelSig& s) {
  int64_t n = s.in[0].shape.back();
  return columnSums(numel(s.in[0].shape) / std::max<int64_t>(1, n), n);
}

KernelFn reduceRows(const KernelSig& s) {
  ColumnSums plan = reduceRowsPlan(s);
  cudaStream_t st = streamOf(s);
  return [plan, st](const KernelIO& io) {
    sumColumns(plan, MatrixTerm<float>{io.in[0].f32(), plan.cols},
               static_cast<double*>(io.workspace), StoreFloat{io.out[0].f32()}, st);
  };
}

KernelFn reduceChannels(const KernelSig& s) {
  ChannelDims d(s.in[0].shape);
  ColumnSums plan = columnSums(d.n, d.c);
  cudaStream_t st = streamOf(s);
  return [d, plan, st](const KernelIO& io) {
    auto* ws = static_cast<char*>(io.workspace);
    auto* partial = reinterpret_cast<double*>(ws + d.planeBytes());
    StoreFloat out{io.out[0].f32()};
    if (d.inner == 1) {
      sumColumns(plan, MatrixTerm<float>{io.in[0].f32(), d.c}, partial, out, st);
      return;
    }
    auto* planes = reinterpret_cast<double*>(ws);
    sumRows(d.n * d.c, d.inner, MatrixTerm<float>{io.in[0].f32(), d.inner}, StoreDouble{planes},
            st);
    sumColumns(plan, MatrixTerm<double>{planes, d.c}, partial, out, st);
  };
}

KernelFn sumSquares(const KernelSig& s) {
  cudaStream_t st = streamOf(s);
  return [st](const KernelIO& io) {
    int64_t n = io.in[0].numel(), chunks = squaresChunks(n);
    auto* partial = static_cast<double*>(io.workspace);
    if (chunks > 0) {
      squaresKernel<<<gridFor(chunks * kBlock), kBlock, 0, st>>>(io.in[0].f32(), n, chunks,
                                                                 partial);
      NL_CHECK_LAUNCH(squaresKernel);
    }
    launchMean(partial, chunks, 1.0, io.out[0].f32(), st);
  };
}

struct MinOp {
  __device__ float operator()(float a, float b) const { return fminf(a, b); }
};

// One block walks the tensor twice: its finite range, then the bins (counted in
// shared memory). Reported every few steps, it is not worth more blocks.
__global__ void histogramKernel(const float* x, int64_t n, float* out) {
  __shared__ unsigned int counts[fn::Histogram::kBins];
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += kBlock)
    if (isfinite(x[i])) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
  lo = teamReduce<kBlock>(lo, MinOp{});
  hi = teamReduce<kBlock>(hi, MaxOp{});
  for (int b = threadIdx.x; b < fn::Histogram::kBins; b += kBlock) counts[b] = 0;
  __syncthreads();
  if (lo <= hi)
    for (int64_t i = threadIdx.x; i < n; i += kBlock)
      if (isfinite(x[i])) atomicAdd(&counts[fn::Histogram::bin(x[i], lo, hi)], 1u);
  __syncthreads();
  if (threadIdx.x == 0) {
    out[0] = lo <= hi ? lo : 0.f;
    out[1] = lo <= hi ? hi : 0.f;
  }
  for (int b = threadIdx.x; b < fn::Histogram::kBins; b += kBlock) out[2 + b] = float(counts[b]);
}

KernelFn histogram(const KernelSig& s) {
  cudaStream_t st = streamOf(s);
  return [st](const KernelIO& io) {
    histogramKernel<<<1, kBlock, 0, st>>>(io.in[0].f32(), io.in[0].numel(), io.out[0].f32());
    NL_CHECK_LAUNCH(histogramKernel);
  };
}

KernelFn globalAvgPool(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  int64_t planes = x[0] * x[1], area = x[2] * x[3];
  cudaStream_t st = streamOf(s);
  return [planes, area, st](const KernelIO& io) {
    sumRows(planes, area, MatrixTerm<float>{io.in[0].f32(), area},
            StoreMean{io.out[0].f32(), double(area)}, st);
  };
}

KernelFn globalAvgPoolGrad(const KernelSig& s) {
  const Shape& x = s.in[1].shape;
  int64_t area = x[2] * x[3];
  cudaStream_t st = streamOf(s);
  return [area, st](const KernelIO& io) {
    int64_t n = io.out[0].numel();
    if (n == 0) return;
    spreadKernel<<<gridFor(n), kBlock, 0, st>>>(io.in[0].f32(), io.out[0].f32(), n, area);
    NL_CHECK_LAUNCH(spreadKernel);
  };
}

}  // namespace

void launchMean(const double* values, int64_t count, double divisor, float* out, cudaStream_t s,
                const double* weights) {
  meanKernel<<<1, kBlock, 0, s>>>(values, count, divisor, weights, out);
  NL_CHECK_LAUNCH(meanKernel);
}

void registerReductions(KernelRegistry& r) {
  auto add = [&](const char* op, const char* name, std::function<KernelFn(const KernelSig&)> make,
                 std::function<int64_t(const KernelSig&)> workspace = nullptr) {
    KernelImpl k = plainKernel(name, std::move(make));
    k.workspace = std::move(workspace);
    r.add(op, DeviceKind::Cuda, std::move(k));
  };
  add("ReduceRows", "cuda.reduce_rows", reduceRows,
      [](const KernelSig& s) { return reduceRowsPlan(s).partialBytes(); });
  add("ReduceChannels", "cuda.reduce_channels", reduceChannels,
      [](const KernelSig& s) { return ChannelDims(s.in[0].shape).workspace(); });
  add("SumSquares", "cuda.sum_squares", sumSquares, [](const KernelSig& s) {
    return std::max<int64_t>(1, squaresChunks(numel(s.in[0].shape))) * int64_t(sizeof(double));
  });
  add("Histogram", "cuda.histogram", histogram);
  add("GlobalAvgPool2d", "cuda.global_avg_pool2d", globalAvgPool);
  add("GlobalAvgPool2dGrad", "cuda.global_avg_pool2d_grad", globalAvgPoolGrad);
}

}  // namespace netloom::cuda
