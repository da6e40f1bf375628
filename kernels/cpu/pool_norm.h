// Shared by pool.cpp, norm.cpp and layer_norm.cpp (not exported): their registration
// functions and the chunking they share.
#pragma once

#include <algorithm>

#include "kernels/cpu/dnnl_util.h"

namespace netloom::cpu {

// Items per parallel chunk when each item is `workPerItem` elements of work.
inline int64_t grainFor(int64_t workPerItem) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, workPerItem));
}

void registerPooling(KernelRegistry& r);
void registerNormalization(KernelRegistry& r);  // BatchNorm
void registerLayerNorm(KernelRegistry& r);

}  // namespace netloom::cpu
