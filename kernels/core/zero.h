// ZeRO's kernels (Rajbhandari et al., 2020), the same on every backend (the
// optimizer's step on a shard is the backend's ParallelMath): the gradients of a bucket summed and
// cut into equal shards, one per data-parallel rank (reduce-scatter, ZeRO-2), and the update of one
// rank's shard of the bucket's parameters with its shard of the optimizer state, after which every
// rank gathers the updated parameters whole.
#pragma once

#include <cstdint>

#include "kernels/core/collectives.h"
#include "kernels/core/kernel.h"

namespace netloom {

// A bucket's elements end to end, cut into `parts` shards of `per` elements (the
// last padded): shard r is [r·per, min((r+1)·per, total)).
struct FlatShards {
  int64_t total = 0, per = 0;
  FlatShards(int64_t total, int parts) : total(total), per((total + parts - 1) / parts) {}
  int64_t begin(int r) const { return std::min(total, int64_t(r) * per); }
  int64_t end(int r) const { return std::min(total, int64_t(r + 1) * per); }
};

void registerZeroKernels(KernelRegistry& r, DeviceKind device, const ParallelMath& math);

}  // namespace netloom
