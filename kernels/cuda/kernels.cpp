// The CUDA backend's registration list.
#include "kernels/core/collectives.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"

namespace netloom::cuda {

void registerKernels(KernelRegistry& r) {
  registerElementwise(r);
  registerGemm(r);
  registerConv(r);
  registerPoolNorm(r);
  registerPool(r);
  registerLosses(r);
  registerReductions(r);
  registerShape(r);
  registerLayerNorm(r);
  registerOptimizers(r);
  registerFold(r);
  registerRmsNorm(r);
  registerSequence(r);
  registerBatchMatMul(r);
  registerAttention(r);
  registerCollectiveKernels(r, DeviceKind::Cuda, parallelMath());
  // Last: every float kernel's twin for bf16 tensors, after the kernels that read them.
  r.widenHalf(DeviceKind::Cuda, bf16Twin);
}

}  // namespace netloom::cuda
