// Launch shapes and kernel-list shorthand shared by the CUDA backend's kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/core/collectives.h"
#include "kernels/core/kernel.h"

namespace netloom::cuda {

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n elements: enough to fill any current GPU.
inline unsigned gridFor(int64_t n) {
  return unsigned(std::min<int64_t>((n + kBlock - 1) / kBlock, 65535 * 8));
}

// A kernel that takes every plain configuration.
inline KernelImpl plainKernel(std::string name, std::function<KernelFn(const KernelSig&)> make) {
  return KernelImpl{std::move(name), [](const KernelSig&) { return std::string(); },
                    std::move(make)};
}

void registerElementwise(KernelRegistry& r);
void registerGemm(KernelRegistry& r);      // cuBLASLt: Linear, MatMul
void registerConv(KernelRegistry& r);      // cuDNN: Conv2d, ConvTranspose2d and gradients
void registerPoolNorm(KernelRegistry& r);  // cuDNN: pooling, BatchNorm, Softmax
void registerPool(KernelRegistry& r);      // pooling cuDNN cannot express (after cuDNN's)
void registerLosses(KernelRegistry& r);
void registerReductions(KernelRegistry& r);
void registerShape(KernelRegistry& r);
void registerLayerNorm(KernelRegistry& r);
void registerOptimizers(KernelRegistry& r);
void registerFold(KernelRegistry& r);  // BatchNorm folded for evaluation
void registerRmsNorm(KernelRegistry& r);
void registerSequence(KernelRegistry& r);  // Transpose, SumTo, Embedding, positions, rotary
void registerBatchMatMul(KernelRegistry& r);
void registerAttention(KernelRegistry& r);

// A float kernel's widened twin for bf16 tensors (kernels/core/widen.h), its copies
// on the kernel's stream; in elementwise.cu.
KernelImpl bf16Twin(const KernelImpl& inner);

// The parallel kernels' arithmetic (kernels/core/collectives.h), on the device's stream.
ParallelMath parallelMath();
void stepShard(void* stream, const ShardStep& s);  // ZeRO's update of a shard, in optimizers.cu

}  // namespace netloom::cuda
