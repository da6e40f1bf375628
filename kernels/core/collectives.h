// Registers the parallel kernels for a backend: the gradient buckets' (BucketStart,
// BucketWait), boxing, ZeRO's and the pipelines'. Their data movement is written once
// (kernels/core/moves.h); the little arithmetic inside them is the backend's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "kernels/core/kernel.h"

namespace netloom {

// One rank's shard of a bucket's parameters stepped by its optimizer (ZeRO): `n`
// elements of the parameters `p`, their summed gradient `g` (scratch: the step may
// write it) and the optimizer's state, all in the kernel's memory.
struct ShardStep {
  const KernelIO* io = nullptr;  // the step's learning rate, count and guard
  float* p = nullptr;
  float* g = nullptr;
  float* m = nullptr;  // Adam's first moment, or SGD's momentum buffer (null: none)
  float* v = nullptr;  // Adam's second moment
  int64_t n = 0;
  const float* lossScale = nullptr;  // fn::LossScale's state, or null
  bool adam = false;
  float beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0, momentum = 0;
  bool decoupled = false, nesterov = false;
};

// The arithmetic of the parallel kernels, on the backend's memory, launched on
// `stream` (the device's, Device::stream(); null on the CPU).
struct ParallelMath {
  // *out = (Σ_k *in[k]) / count, summed in double in k's order; `acc` is a double of
  // scratch in the same memory.
  std::function<void(void* stream, const TensorRef* in, size_t count, float* out, double* acc)>
      meanOfScalars;
  // *out = *in · factor.
  std::function<void(void* stream, const float* in, float* out, float factor)> scaleScalar;
  // out[i] = Σ_k blocks[k·n + i] for k = 0 … count−1 in order.
  std::function<void(void* stream, const float* blocks, int count, int64_t n, float* out)>
      sumBlocks;
  // Does nothing on a step that was not finite (the guard) or that the loss scale skips.
  std::function<void(void* stream, const ShardStep&)> stepShard;
};

// The CPU's: loops over host memory with kernels/core/functors.h's update rules.
ParallelMath hostParallelMath();

void registerCollectiveKernels(KernelRegistry& r, DeviceKind device,
                               const ParallelMath& math = hostParallelMath());

}  // namespace netloom
