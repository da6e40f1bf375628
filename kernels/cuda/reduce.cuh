// Reductions shared by the CUDA backend's own kernels: rows reduced by a team of
// threads (a warp, or a whole block for long rows), and column sums over a matrix,
// as planned in grids.h. Every sum runs in an order fixed by the shapes, so a launch
// gives the same bits every time; sums the CPU takes in double are taken in double.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/grids.h"

// Checks the launch just issued on this thread. A launch returns no status, so the
// error names the kernel instead of cudaGetLastError.
#define NL_CHECK_LAUNCH(kernel) ::netloom::cuda::check(cudaGetLastError(), "launch of " #kernel)

namespace netloom::cuda {

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
// fmaxf drops NaN; the callers' rows turn NaN through their sums instead.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// The `kThreads` consecutive threads of a kBlock-thread block that share a row. With
// kThreads == kBlock every thread of a block walks the same rows, so the block-wide
// barriers in teamReduce are reached by all of them.
template <int kThreads>
struct Team {
  static constexpr int kPerBlock = kBlock / kThreads;
  __device__ static int lane() { return int(threadIdx.x) % kThreads; }
  __device__ static int64_t first() {
    return int64_t(blockIdx.x) * kPerBlock + int64_t(threadIdx.x) / kThreads;
  }
  __device__ static int64_t stride() { return int64_t(gridDim.x) * kPerBlock; }
};

// Combines v over the team; every thread of the team gets the result, bit for bit
// the same (each butterfly step combines the same two values on both partners).
template <int kThreads, class T, class Op>
__device__ T teamReduce(T v, Op op) {
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (kThreads == 32) {
    return v;
  } else {
    __shared__ T warps[kBlock / 32];
    __syncthreads();  // the previous reduction's readers are done with `warps`
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
    __syncthreads();
    v = warps[0];
    for (int w = 1; w < kBlock / 32; ++w) v = op(v, warps[w]);
    return v;
  }
}

// Element (r, c) of a row-major matrix, as a double.
template <class T>
struct MatrixTerm {
  const T* x;
  int64_t cols;
  __device__ double operator()(int64_t r, int64_t c) const { return double(x[r * cols + c]); }
};

struct StoreDouble {
  double* to;
  __device__ void operator()(int64_t i, double v) const { to[i] = v; }
};
struct StoreFloat {
  float* to;
  __device__ void operator()(int64_t i, double v) const { to[i] = float(v); }
};

// For each row r < rows, the sum of term(r, j) over j < cols in double; out(r, sum)
// once per row.
template <int kThreads, class Term, class Out>
__global__ void rowSumKernel(int64_t rows, int64_t cols, Term term, Out out) {
  using T = Team<kThreads>;
  for (int64_t r = T::first(); r < rows; r += T::stride()) {
    double acc = 0;
    for (int64_t j = T::lane(); j < cols; j += kThreads) acc += term(r, j);
    acc = teamReduce<kThreads>(acc, SumOp{});
    if (T::lane() == 0) out(r, acc);
  }
}

template <class Term, class Out>
void sumRows(int64_t rows, int64_t cols, Term term, Out out, cudaStream_t s) {
  if (rows == 0) return;
  if (rowThreads(cols) == 32)
    rowSumKernel<32><<<rowGrid(rows, 32), kBlock, 0, s>>>(rows, cols, term, out);
  else
    rowSumKernel<kBlock><<<rowGrid(rows, kBlock), kBlock, 0, s>>>(rows, cols, term, out);
  NL_CHECK_LAUNCH(rowSumKernel);
}

// Launches a per-row kernel template (kernel<kThreads>) with a warp per row, or a
// block per row from kLongRow elements on.
#define NL_LAUNCH_ROWS(kernel, rows, cols, stream, ...)                                          \
  do {                                                                                           \
    if (::netloom::cuda::rowThreads(cols) == 32)                                                 \
      kernel<32><<<::netloom::cuda::rowGrid(rows, 32), ::netloom::cuda::kBlock, 0, stream>>>(    \
          __VA_ARGS__);                                                                          \
    else                                                                                         \
      kernel<::netloom::cuda::kBlock><<<::netloom::cuda::rowGrid(rows, ::netloom::cuda::kBlock), \
                                        ::netloom::cuda::kBlock, 0, stream>>>(__VA_ARGS__);      \
    NL_CHECK_LAUNCH(kernel);                                                                     \
  } while (0)

// Block (tile, chunk) of a ColumnSums plan: its 32 columns over its rows, 8 lanes
// each taking every 8th row, then the lanes added in order.
template <class Term, class Out>
__global__ void columnSumKernel(ColumnSums plan, Term term, double* partial, Out out) {
  __shared__ double lanes[kColumnLanes][kColumnTile];
  int tx = int(threadIdx.x) % kColumnTile, ly = int(threadIdx.x) / kColumnTile;
  int64_t col = int64_t(blockIdx.x) * kColumnTile + tx, chunk = blockIdx.y;
  int64_t lo = chunk * plan.rowsPerChunk, hi = lo + plan.rowsPerChunk;
  if (hi > plan.rows) hi = plan.rows;
  double acc = 0;
  if (col < plan.cols)
    for (int64_t r = lo + ly; r < hi; r += kColumnLanes) acc += term(r, col);
  lanes[ly][tx] = acc;
  __syncthreads();
  if (ly != 0 || col >= plan.cols) return;
  for (int l = 1; l < kColumnLanes; ++l) acc += lanes[l][tx];
  if (plan.chunks == 1)
    out(col, acc);
  else
    partial[chunk * plan.cols + col] = acc;
}

template <class Out>
__global__ void columnFinishKernel(ColumnSums plan, const double* partial, Out out) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < plan.cols;
       c += int64_t(gridDim.x) * blockDim.x) {
    double acc = 0;
    for (int64_t k = 0; k < plan.chunks; ++k) acc += partial[k * plan.cols + c];
    out(c, acc);
  }
}

// out(c, Σ_r term(r, c)) for every column; `partial` holds plan.partialBytes().
template <class Term, class Out>
void sumColumns(const ColumnSums& plan, Term term, double* partial, Out out, cudaStream_t s) {
  if (plan.cols == 0) return;
  dim3 grid(unsigned(plan.tiles), unsigned(plan.chunks));
  columnSumKernel<<<grid, kBlock, 0, s>>>(plan, term, partial, out);
  NL_CHECK_LAUNCH(columnSumKernel);
  if (plan.chunks == 1) return;
  columnFinishKernel<<<gridFor(plan.cols), kBlock, 0, s>>>(plan, partial, out);
  NL_CHECK_LAUNCH(columnFinishKernel);
}

// *out = float(Σ values / divisor), the values added in a fixed order by one block:
// the last step of every loss, metric and Σ x² (reductions.cu).
// With `weights` (count of them, in device memory), divides by their sum instead.
void launchMean(const double* values, int64_t count, double divisor, float* out, cudaStream_t s,
                const double* weights = nullptr);

}  // namespace netloom::cuda
