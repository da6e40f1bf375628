// Helpers for CPU kernels: OpenMP loops that stay serial for small sizes (a
// parallel region costs microseconds), and the stateless-kernel shorthand.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/core/kernel.h"

namespace netloom::cpu {

// Below this many elements an element-wise loop runs on one thread.
constexpr int64_t kParallelGrain = 1 << 15;

// body(lo, hi) on each thread's part of [0, n), or on all of it alone below `grain`;
// each part but the last a multiple of `align`.
template <class F>
inline void parallelFor(int64_t n, int64_t grain, F&& body, int64_t align = 1) {
  if (n < grain || omp_get_max_threads() == 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t chunk = ((n + nt - 1) / nt + align - 1) / align * align;
    int64_t lo = std::min<int64_t>(n, t * chunk), hi = std::min<int64_t>(n, lo + chunk);
    if (lo < hi) body(lo, hi);
  }
}

// parallelFor over the elements of float tensors: each thread's range starts on a
// 64-byte line (16 floats), so its vector loads and stores stay aligned and no line is
// written by two threads. A thread whose range started mid-line ran Adam's update 2×
// slower than its neighbour: every vector it read straddled two lines.
constexpr int64_t kLineFloats = 16;

template <class F>
inline void parallelForElements(int64_t n, F&& body) {
  parallelFor(n, kParallelGrain, std::forward<F>(body), kLineFloats);
}

// Items per parallel chunk when each item is `workPerItem` elements of work.
inline int64_t grainFor(int64_t workPerItem) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, workPerItem));
}

// A kernel that accepts every configuration and needs no plan-time state beyond
// what `make` captures from the signature.
inline KernelImpl kernel(std::string name, std::function<KernelFn(const KernelSig&)> make) {
  return KernelImpl{std::move(name), [](const KernelSig&) { return std::string(); },
                    std::move(make)};
}

// Sets the CPU thread count for every kernel (oneDNN and ours share the OpenMP
// pool) and makes each pool thread flush denormal floats to zero: gradients that
// decay towards zero otherwise slow some training steps by several times, and no
// result of a network depends on values below 1e-38.
void configureThreads(int threads);

void registerElementwise(KernelRegistry& r);
void registerGemm(KernelRegistry& r);
void registerLosses(KernelRegistry& r);
void registerShape(KernelRegistry& r);
void registerOptimizers(KernelRegistry& r);
void registerConv(KernelRegistry& r);
void registerLayouts(KernelRegistry& r);  // Reorder, ReduceChannels
void registerPoolNorm(KernelRegistry& r);
void registerSequence(KernelRegistry& r);  // Transpose, SumTo, Embedding, positions, rotary
void registerRmsNorm(KernelRegistry& r);
void registerAttention(KernelRegistry& r);

// The widened twin of a float kernel, for signatures with bf16 tensors (widen.cpp).
KernelImpl widenBf16(const KernelImpl& inner);

}  // namespace netloom::cpu
