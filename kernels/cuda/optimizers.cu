// SGD and Adam/AdamW on CUDA: one fused launch per parameter tensor updates the
// parameter and its optimizer state in place, element by element, with the CPU's
// update rules (kernels/core/functors.h).
#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

__global__ void sgdKernel(fn::SgdStep step, float* p, const float* g, float* buf, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (buf)
      step(p[i], g[i], buf[i]);
    else
      step(p[i], g[i]);
  }
}

__global__ void adamKernel(fn::AdamStep step, float* p, const float* g, float* m, float* v,
                           int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    step(p[i], g[i], m[i], v[i]);
}

// Inputs param, grad[, momentum buffer].
KernelFn sgd(const KernelSig& s) {
  float mu = float(s.attrs->f("momentum")), wd = float(s.attrs->f("weight_decay"));
  bool nesterov = s.attrs->b("nesterov");
  cudaStream_t st = streamOf(s);
  return [mu, wd, nesterov, st](const KernelIO& io) {
    int64_t n = io.in[0].numel();
    if (n == 0) return;
    fn::SgdStep step{float(io.ctx->lr), mu, wd, nesterov};
    float* buf = io.nin > 2 ? io.in[2].f32() : nullptr;
    sgdKernel<<<gridFor(n), kBlock, 0, st>>>(step, io.in[0].f32(), io.in[1].f32(), buf, n);
    NL_CHECK_LAUNCH(sgdKernel);
  };
}

// Inputs param, grad, exp_avg, exp_avg_sq.
KernelFn adam(const KernelSig& s) {
  float b1 = float(s.attrs->f("beta1")), b2 = float(s.attrs->f("beta2"));
  float eps = float(s.attrs->f("eps")), wd = float(s.attrs->f("weight_decay"));
  bool decoupled = s.attrs->b("decoupled");
  cudaStream_t st = streamOf(s);
  return [b1, b2, eps, wd, decoupled, st](const KernelIO& io) {
    int64_t n = io.in[0].numel();
    if (n == 0) return;
    fn::AdamStep step = fn::AdamStep::make(b1, b2, eps, wd, decoupled, io.ctx->lr, io.ctx->step);
    adamKernel<<<gridFor(n), kBlock, 0, st>>>(step, io.in[0].f32(), io.in[1].f32(), io.in[2].f32(),
                                              io.in[3].f32(), n);
    NL_CHECK_LAUNCH(adamKernel);
  };
}

}  // namespace

void registerOptimizers(KernelRegistry& r) {
  r.add("SgdUpdate", DeviceKind::Cuda, plainKernel("cuda.sgd", sgd));
  r.add("AdamUpdate", DeviceKind::Cuda, plainKernel("cuda.adam", adam));
}

}  // namespace netloom::cuda
