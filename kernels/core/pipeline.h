// Registers pipeline parallelism's kernels (PipeSend, PipeRecv, MicroBatch,
// MicroMean, MicroMeanGrad, PipeTie) for a backend, with its arithmetic.
#pragma once

#include "kernels/core/collectives.h"
#include "kernels/core/kernel.h"

namespace netloom {

void registerPipelineKernels(KernelRegistry& r, DeviceKind device, const ParallelMath& math);

}  // namespace netloom
