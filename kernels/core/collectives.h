// Registers the gradient buckets' kernels (BucketStart, BucketWait) for a backend.
#pragma once

#include "kernels/core/kernel.h"

namespace netloom {

void registerCollectiveKernels(KernelRegistry& r, DeviceKind device);

}  // namespace netloom
