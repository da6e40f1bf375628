// SGD and Adam/AdamW on CUDA: one fused launch per parameter tensor updates the
// parameter and its optimizer state in place, element by element, with the CPU's
// update rules (kernels/core/functors.h).
#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

// The learning rate and step come from device memory, written before each step, so
// that a recorded step (a CUDA Graph) replays with each step's own values.
__global__ void sgdKernel(const DeviceStepValues* values, const float* guard, float momentum,
                          float weightDecay, bool nesterov, float* p, const float* g, float* buf,
                          int64_t n) {
  if (guard && *guard == 0.f) return;  // a step that was not finite changes nothing
  const fn::SgdStep step{float(values->lr), momentum, weightDecay, nesterov};
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (buf)
      step(p[i], g[i], buf[i]);
    else
      step(p[i], g[i]);
  }
}

struct AdamSettings {
  float beta1, beta2, eps, weightDecay;
  bool decoupled;
};

__global__ void adamKernel(const DeviceStepValues* values, const float* guard, AdamSettings a,
                           float* p, const float* g, float* m, float* v, int64_t n) {
  if (guard && *guard == 0.f) return;  // a step that was not finite changes nothing
  __shared__ fn::AdamStep shared;      // the step's constants, folded once per block
  if (threadIdx.x == 0)
    shared = fn::AdamStep::make(a.beta1, a.beta2, a.eps, a.weightDecay, a.decoupled, values->lr,
                                values->step);
  __syncthreads();
  const fn::AdamStep step = shared;
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
    float* buf = io.nin > 2 ? io.in[2].f32() : nullptr;
    sgdKernel<<<gridFor(n), kBlock, 0, st>>>(io.stepValues, io.guard, mu, wd, nesterov,
                                             io.in[0].f32(), io.in[1].f32(), buf, n);
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
    adamKernel<<<gridFor(n), kBlock, 0, st>>>(
        io.stepValues, io.guard, AdamSettings{b1, b2, eps, wd, decoupled}, io.in[0].f32(),
        io.in[1].f32(), io.in[2].f32(), io.in[3].f32(), n);
    NL_CHECK_LAUNCH(adamKernel);
  };
}

}  // namespace

void registerOptimizers(KernelRegistry& r) {
  r.add("SgdUpdate", DeviceKind::Cuda, plainKernel("cuda.sgd", sgd));
  r.add("AdamUpdate", DeviceKind::Cuda, plainKernel("cuda.adam", adam));
}

}  // namespace netloom::cuda
