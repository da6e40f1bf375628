// SGD and Adam/AdamW on CUDA: the parameter and its optimizer state updated in place,
// element by element, with the CPU's update rules (kernels/core/functors.h). A plan's
// run of updates is one multi-tensor launch; a lone update has a launch of its own.
#include <algorithm>
#include <climits>
#include <memory>

#include "kernels/core/collectives.h"
#include "kernels/core/device.h"
#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

// The learning rate and step come from device memory, written before each step, so
// that a recorded step (a CUDA Graph) replays with each step's own values.
// Under loss scaling (fn::LossScale's state, else null): 0 skips the step, else the
// gradient's factor.
__device__ float unscaling(const float* lossScale) {
  if (!lossScale) return 1.f;
  return lossScale[fn::LossScale::kSkipNow] != 0.f ? 0.f : 1.f / lossScale[fn::LossScale::kUsed];
}

__global__ void sgdKernel(const DeviceStepValues* values, const float* guard,
                          const float* lossScale, float momentum, float weightDecay, bool nesterov,
                          float* p, const float* g, float* buf, int64_t n) {
  if (guard && *guard == 0.f) return;  // a step that was not finite changes nothing
  const float unscale = unscaling(lossScale);
  if (unscale == 0.f) return;
  const fn::SgdStep step{float(values->lr), momentum, weightDecay, nesterov};
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (buf)
      step(p[i], g[i] * unscale, buf[i]);
    else
      step(p[i], g[i] * unscale);
  }
}

struct AdamSettings {
  float beta1, beta2, eps, weightDecay;
  bool decoupled;
};

__global__ void adamKernel(const DeviceStepValues* values, const float* guard,
                           const float* lossScale, AdamSettings a, float* p, const float* g,
                           float* m, float* v, int64_t n) {
  if (guard && *guard == 0.f) return;  // a step that was not finite changes nothing
  const float unscale = unscaling(lossScale);
  if (unscale == 0.f) return;
  __shared__ fn::AdamStep shared;  // the step's constants, folded once per block
  if (threadIdx.x == 0)
    shared = fn::AdamStep::make(a.beta1, a.beta2, a.eps, a.weightDecay, a.decoupled, values->lr,
                                values->step);
  __syncthreads();
  const fn::AdamStep step = shared;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    step(p[i], g[i] * unscale, m[i], v[i]);
}

__global__ void lossScaleSeedKernel(const DeviceStepValues* values, fn::LossScale ls,
                                    const float* state, float* y) {
  *y = ls.current(state) * float(values->lossWeight);
}

__global__ void lossSeedKernel(const DeviceStepValues* values, float* y) {
  *y = float(values->lossWeight);
}

// Σ of the gradients' squares, one scalar each, in order as on the CPU.
struct Squares {
  static constexpr int kMax = 32;
  const float* at[kMax];
  int n;
};
__global__ void sumIntoKernel(Squares squares, const float* partial, float* out) {
  float total = partial ? *partial : 0.f;
  for (int i = 0; i < squares.n; ++i) total += *squares.at[i];
  *out = total;
}
__global__ void lossScaleCheckKernel(fn::LossScale ls, float* state, Squares squares,
                                     const float* partial) {
  float total = partial ? *partial : 0.f;
  for (int i = 0; i < squares.n; ++i) total += *squares.at[i];
  ls.check(state, total);
}

// Inputs the state, then each gradient's Σ grad². More than Squares::kMax are summed
// in pieces into the workspace, in the same order.
KernelFn lossScaleCheck(const KernelSig& s) {
  fn::LossScale ls{float(s.attrs->f("init_scale")), float(s.attrs->i("growth_interval"))};
  cudaStream_t st = streamOf(s);
  return [ls, st](const KernelIO& io) {
    // Pieces of up to kMax: all but the last fold into a running partial kept in
    // the state's kUsed slot, which check() then overwrites.
    float* state = io.in[0].f32();
    size_t first = 1;
    const float* partial = nullptr;
    while (io.nin - first > size_t(Squares::kMax)) {
      Squares piece{};
      piece.n = Squares::kMax;
      for (int i = 0; i < Squares::kMax; ++i) piece.at[i] = io.in[first + size_t(i)].f32();
      sumIntoKernel<<<1, 1, 0, st>>>(piece, partial, state + fn::LossScale::kUsed);
      NL_CHECK_LAUNCH(sumIntoKernel);
      partial = state + fn::LossScale::kUsed;
      first += Squares::kMax;
    }
    Squares rest{};
    rest.n = int(io.nin - first);
    for (int i = 0; i < rest.n; ++i) rest.at[i] = io.in[first + size_t(i)].f32();
    lossScaleCheckKernel<<<1, 1, 0, st>>>(ls, state, rest, partial);
    NL_CHECK_LAUNCH(lossScaleCheckKernel);
  };
}

// Inputs param, grad[, momentum buffer].
KernelFn sgd(const KernelSig& s) {
  float mu = float(s.attrs->f("momentum")), wd = float(s.attrs->f("weight_decay"));
  bool nesterov = s.attrs->b("nesterov"), scaled = s.attrs->b("loss_scaled");
  cudaStream_t st = streamOf(s);
  return [mu, wd, nesterov, scaled, st](const KernelIO& io) {
    int64_t n = io.in[0].numel();
    if (n == 0) return;
    size_t tensors = io.nin - (scaled ? 1 : 0);
    float* buf = tensors > 2 ? io.in[2].f32() : nullptr;
    const float* lossScale = scaled ? io.in[io.nin - 1].f32() : nullptr;
    sgdKernel<<<gridFor(n), kBlock, 0, st>>>(io.stepValues, io.guard, lossScale, mu, wd, nesterov,
                                             io.in[0].f32(), io.in[1].f32(), buf, n);
    NL_CHECK_LAUNCH(sgdKernel);
  };
}

// Inputs param, grad, exp_avg, exp_avg_sq.
KernelFn adam(const KernelSig& s) {
  float b1 = float(s.attrs->f("beta1")), b2 = float(s.attrs->f("beta2"));
  float eps = float(s.attrs->f("eps")), wd = float(s.attrs->f("weight_decay"));
  bool decoupled = s.attrs->b("decoupled"), scaled = s.attrs->b("loss_scaled");
  cudaStream_t st = streamOf(s);
  return [b1, b2, eps, wd, decoupled, scaled, st](const KernelIO& io) {
    int64_t n = io.in[0].numel();
    if (n == 0) return;
    const float* lossScale = scaled ? io.in[io.nin - 1].f32() : nullptr;
    adamKernel<<<gridFor(n), kBlock, 0, st>>>(
        io.stepValues, io.guard, lossScale, AdamSettings{b1, b2, eps, wd, decoupled},
        io.in[0].f32(), io.in[1].f32(), io.in[2].f32(), io.in[3].f32(), n);
    NL_CHECK_LAUNCH(adamKernel);
  };
}

// Multi-tensor updates: one launch for a group of parameters. Each block takes one
// chunk of one tensor; the table, in device memory, is made once at plan time (the
// tensors' addresses are fixed by the static plan).
constexpr int64_t kChunk = 4 * kBlock;
struct UpdateTensor {
  float* p;
  const float* g;
  float *s1, *s2;         // momentum buffer (or null), or exp_avg and exp_avg_sq
  int64_t n, firstChunk;  // the chunks before this tensor's
};

__device__ const UpdateTensor& tensorOfBlock(const UpdateTensor* t, int count) {
  int lo = 0, hi = count - 1;  // the last tensor whose first chunk is at most blockIdx.x
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (t[mid].firstChunk <= int64_t(blockIdx.x))
      lo = mid;
    else
      hi = mid - 1;
  }
  return t[lo];
}

__global__ void sgdGroupKernel(const DeviceStepValues* values, const float* guard,
                               const float* lossScale, float momentum, float weightDecay,
                               bool nesterov, const UpdateTensor* tensors, int count) {
  if (guard && *guard == 0.f) return;
  const float unscale = unscaling(lossScale);
  if (unscale == 0.f) return;
  const UpdateTensor& t = tensorOfBlock(tensors, count);
  const fn::SgdStep step{float(values->lr), momentum, weightDecay, nesterov};
  int64_t begin = (int64_t(blockIdx.x) - t.firstChunk) * kChunk;
  int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (t.s1)
      step(t.p[i], t.g[i] * unscale, t.s1[i]);
    else
      step(t.p[i], t.g[i] * unscale);
  }
}

__global__ void adamGroupKernel(const DeviceStepValues* values, const float* guard,
                                const float* lossScale, AdamSettings a, const UpdateTensor* tensors,
                                int count) {
  if (guard && *guard == 0.f) return;
  const float unscale = unscaling(lossScale);
  if (unscale == 0.f) return;
  __shared__ fn::AdamStep shared;
  if (threadIdx.x == 0)
    shared = fn::AdamStep::make(a.beta1, a.beta2, a.eps, a.weightDecay, a.decoupled, values->lr,
                                values->step);
  __syncthreads();
  const fn::AdamStep step = shared;
  const UpdateTensor& t = tensorOfBlock(tensors, count);
  int64_t begin = (int64_t(blockIdx.x) - t.firstChunk) * kChunk;
  int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    step(t.p[i], t.g[i] * unscale, t.s1[i], t.s2[i]);
}

// The group's table on the device, and how many chunks it has in all.
struct UpdateTable {
  std::shared_ptr<DeviceBuffer> table;
  int count = 0;
  int64_t chunks = 0;
  const float* lossScale = nullptr;
};

UpdateTable uploadTable(const KernelSig& s, const std::vector<std::vector<TensorRef>>& group,
                        bool scaled, bool adam) {
  std::vector<UpdateTensor> host;
  UpdateTable t;
  for (const std::vector<TensorRef>& in : group) {
    size_t tensors = in.size() - (scaled ? 1 : 0);
    UpdateTensor u{in[0].f32(),
                   in[1].f32(),
                   tensors > 2 ? in[2].f32() : nullptr,
                   adam ? in[3].f32() : nullptr,
                   in[0].numel(),
                   t.chunks};
    if (u.n == 0) continue;
    t.chunks += (u.n + kChunk - 1) / kChunk;
    host.push_back(u);
    if (scaled) t.lossScale = in.back().f32();
  }
  if (t.chunks > int64_t(INT32_MAX)) throw CudaError("a multi-tensor update of over 2^31 chunks");
  t.count = int(host.size());
  int64_t bytes = int64_t(host.size() * sizeof(UpdateTensor));
  t.table = std::make_shared<DeviceBuffer>(*s.device, std::max<int64_t>(bytes, 1));
  if (!t.table->ok()) throw CudaError("no device memory for a multi-tensor update's table");
  if (bytes) s.device->copyToDevice(t.table->data(), host.data(), bytes);
  return t;
}

KernelFn sgdGroup(const std::vector<KernelSig>& sigs,
                  const std::vector<std::vector<TensorRef>>& group) {
  const KernelSig& s = sigs[0];
  float mu = float(s.attrs->f("momentum")), wd = float(s.attrs->f("weight_decay"));
  bool nesterov = s.attrs->b("nesterov");
  UpdateTable t = uploadTable(s, group, s.attrs->b("loss_scaled"), false);
  cudaStream_t st = streamOf(s);
  return [mu, wd, nesterov, t, st](const KernelIO& io) {
    if (t.chunks == 0) return;
    sgdGroupKernel<<<unsigned(t.chunks), kBlock, 0, st>>>(
        io.stepValues, io.guard, t.lossScale, mu, wd, nesterov,
        static_cast<const UpdateTensor*>(t.table->data()), t.count);
    NL_CHECK_LAUNCH(sgdGroupKernel);
  };
}

KernelFn adamGroup(const std::vector<KernelSig>& sigs,
                   const std::vector<std::vector<TensorRef>>& group) {
  const KernelSig& s = sigs[0];
  AdamSettings a{float(s.attrs->f("beta1")), float(s.attrs->f("beta2")), float(s.attrs->f("eps")),
                 float(s.attrs->f("weight_decay")), s.attrs->b("decoupled")};
  UpdateTable t = uploadTable(s, group, s.attrs->b("loss_scaled"), true);
  cudaStream_t st = streamOf(s);
  return [a, t, st](const KernelIO& io) {
    if (t.chunks == 0) return;
    adamGroupKernel<<<unsigned(t.chunks), kBlock, 0, st>>>(
        io.stepValues, io.guard, t.lossScale, a, static_cast<const UpdateTensor*>(t.table->data()),
        t.count);
    NL_CHECK_LAUNCH(adamGroupKernel);
  };
}

}  // namespace

void stepShard(void* stream, const ShardStep& s) {
  if (s.n == 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (s.adam) {
    adamKernel<<<gridFor(s.n), kBlock, 0, st>>>(
        s.io->stepValues, s.io->guard, s.lossScale,
        AdamSettings{s.beta1, s.beta2, s.eps, s.weightDecay, s.decoupled}, s.p, s.g, s.m, s.v, s.n);
    NL_CHECK_LAUNCH(adamKernel);
    return;
  }
  sgdKernel<<<gridFor(s.n), kBlock, 0, st>>>(s.io->stepValues, s.io->guard, s.lossScale, s.momentum,
                                             s.weightDecay, s.nesterov, s.p, s.g, s.m, s.n);
  NL_CHECK_LAUNCH(sgdKernel);
}

void registerOptimizers(KernelRegistry& r) {
  r.add("LossScaleSeed", DeviceKind::Cuda,
        plainKernel("cuda.loss_scale_seed", [](const KernelSig& s) {
          fn::LossScale ls{float(s.attrs->f("init_scale")), float(s.attrs->i("growth_interval"))};
          cudaStream_t st = streamOf(s);
          return KernelFn([ls, st](const KernelIO& io) {
            lossScaleSeedKernel<<<1, 1, 0, st>>>(io.stepValues, ls, io.in[0].f32(),
                                                 io.out[0].f32());
            NL_CHECK_LAUNCH(lossScaleSeedKernel);
          });
        }));
  r.add("LossSeed", DeviceKind::Cuda, plainKernel("cuda.loss_seed", [](const KernelSig& s) {
          cudaStream_t st = streamOf(s);
          return KernelFn([st](const KernelIO& io) {
            lossSeedKernel<<<1, 1, 0, st>>>(io.stepValues, io.out[0].f32());
            NL_CHECK_LAUNCH(lossSeedKernel);
          });
        }));
  r.add("LossScaleCheck", DeviceKind::Cuda, plainKernel("cuda.loss_scale_check", lossScaleCheck));
  KernelImpl sgdImpl = plainKernel("cuda.sgd", sgd);
  sgdImpl.group = sgdGroup;
  r.add("SgdUpdate", DeviceKind::Cuda, std::move(sgdImpl));
  KernelImpl adamImpl = plainKernel("cuda.adam", adam);
  adamImpl.group = adamGroup;
  r.add("AdamUpdate", DeviceKind::Cuda, std::move(adamImpl));
}

}  // namespace netloom::cuda
