// Registers pipeline parallelism's kernels (PipeSend, PipeRecv, MicroBatch,
// MicroMean, MicroMeanGrad) for a backend whose memory the host addresses.
#pragma once

#include "kernels/core/kernel.h"

namespace netloom {

void registerPipelineKernels(KernelRegistry& r, DeviceKind device);

}  // namespace netloom
