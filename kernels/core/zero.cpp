#include "kernels/core/zero.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"
#include "kernels/core/functors.h"

namespace netloom {
namespace {

// Elements [begin, end) of `count` tensors laid end to end, copied out to `dst`, or
// (back) from `src` into them.
void copyRange(const TensorRef* t, size_t count, int64_t begin, int64_t end, float* dst) {
  int64_t at = 0;
  for (size_t k = 0; k < count && at < end; ++k) {
    const int64_t n = t[k].numel(), lo = std::max(begin, at), hi = std::min(end, at + n);
    if (lo < hi) std::memcpy(dst + (lo - begin), t[k].f32() + (lo - at), size_t(hi - lo) * 4);
    at += n;
  }
}
void copyBack(const float* src, int64_t begin, int64_t end, const TensorRef* t, size_t count) {
  int64_t at = 0;
  for (size_t k = 0; k < count && at < end; ++k) {
    const int64_t n = t[k].numel(), lo = std::max(begin, at), hi = std::min(end, at + n);
    if (lo < hi) std::memcpy(t[k].f32() + (lo - at), src + (lo - begin), size_t(hi - lo) * 4);
    at += n;
  }
}

int64_t totalOf(const std::vector<TensorDesc>& d, size_t count) {
  int64_t n = 0;
  for (size_t k = 0; k < count; ++k) n += numel(d[k].shape);
  return n;
}

std::string declineHost(const KernelSig& s) {
  if (!s.comm) return "the run has no communicator";
  if (s.device && !s.device->hostAddressable()) return "ZeRO's shards are in host memory only";
  for (const TensorDesc& d : s.in)
    if (d.dtype != DType::F32 || d.layout != Layout::Plain) return "plain float tensors only";
  return {};
}

// Inputs: the bucket's gradients; output: this rank's shard of their sum.
KernelFn scatterKernel(const KernelSig& s) {
  Communicator* comm = s.comm;
  const FlatShards shards(totalOf(s.in, s.in.size()), comm->size());
  auto staging = std::make_shared<std::vector<float>>();
  return [comm, shards, staging](const KernelIO& io) {
    staging->assign(size_t(shards.per * comm->size()), 0.f);
    copyRange(io.in, io.nin, 0, shards.total, staging->data());
    comm->reduceScatter(staging->data(), io.out[0].f32(), shards.per);
  };
}

// Inputs: the bucket's parameters (k), its gradients whole (k) or this rank's shard
// of them (1), the state shards, [the loss scale's state].
KernelFn updateKernel(const KernelSig& s) {
  Communicator* comm = s.comm;
  const Attrs& a = *s.attrs;
  const size_t k = size_t(a.i("params"));
  const bool wholeGrads = a.s("grads") == "whole", adam = a.s("kind") == "adam";
  const bool scaled = a.b("loss_scaled");
  const FlatShards shards(totalOf(s.in, k), comm->size());
  const float b1 = float(a.f("beta1")), b2 = float(a.f("beta2")), eps = float(a.f("eps"));
  const float wd = float(a.f("weight_decay")), mu = float(a.f("momentum"));
  const bool decoupled = a.b("decoupled"), nesterov = a.b("nesterov");
  auto scratch = std::make_shared<std::vector<float>>();
  return [=](const KernelIO& io) {
    if (io.guard && *io.guard == 0.f) return;
    float unscale = 1.f;
    if (scaled) {
      const float* state = io.in[io.nin - 1].f32();
      if (state[fn::LossScale::kSkipNow] != 0.f) return;
      unscale = 1.f / state[fn::LossScale::kUsed];
    }
    const int r = comm->rank();
    const int64_t lo = shards.begin(r), n = shards.end(r) - lo, per = shards.per;
    scratch->assign(size_t(per * (comm->size() + 2)), 0.f);
    float* p = scratch->data();  // this rank's parameters, then all of them gathered
    float* all = p + per;
    copyRange(io.in, k, lo, lo + n, p);
    const float* g = io.in[k].f32();
    size_t state = k + 1;
    if (wholeGrads) {
      copyRange(io.in + k, k, lo, lo + n, all);  // its part of the summed gradients
      g = all;
      state = 2 * k;
    }
    std::vector<float> grad(g, g + n);
    for (float& x : grad) x *= unscale;
    if (adam) {
      fn::AdamStep step = fn::AdamStep::make(b1, b2, eps, wd, decoupled, io.ctx->lr, io.ctx->step);
      float *m = io.in[state].f32(), *v = io.in[state + 1].f32();
      for (int64_t i = 0; i < n; ++i) step(p[i], grad[size_t(i)], m[i], v[i]);
    } else {
      fn::SgdStep step{float(io.ctx->lr), mu, wd, nesterov};
      const bool momentum = io.nin - (scaled ? 1 : 0) > state;
      float* buf = momentum ? io.in[state].f32() : nullptr;
      for (int64_t i = 0; i < n; ++i)
        momentum ? step(p[i], grad[size_t(i)], buf[i]) : step(p[i], grad[size_t(i)]);
    }
    comm->allgather(p, all, per * int64_t(sizeof(float)));
    copyBack(all, 0, shards.total, io.in, k);
  };
}

}  // namespace

void registerZeroKernels(KernelRegistry& r, DeviceKind device) {
  r.add("ZeroScatter", device, KernelImpl{"collective.zero_scatter", declineHost, scatterKernel});
  r.add("ZeroUpdate", device, KernelImpl{"collective.zero_update", declineHost, updateKernel});
}

}  // namespace netloom
