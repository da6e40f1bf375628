#include "kernels/core/zero.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"
#include "kernels/core/moves.h"

namespace netloom {
namespace {

// Elements [begin, end) of `count` tensors laid end to end, copied out to `dst`, or
// (back) from `src` into them.
void copyRange(const Moves& mem, const TensorRef* t, size_t count, int64_t begin, int64_t end,
               float* dst) {
  int64_t at = 0;
  for (size_t k = 0; k < count && at < end; ++k) {
    const int64_t n = t[k].numel(), lo = std::max(begin, at), hi = std::min(end, at + n);
    if (lo < hi) mem.copy(dst + (lo - begin), t[k].f32() + (lo - at), (hi - lo) * 4);
    at += n;
  }
}
void copyBack(const Moves& mem, const float* src, int64_t begin, int64_t end, const TensorRef* t,
              size_t count) {
  int64_t at = 0;
  for (size_t k = 0; k < count && at < end; ++k) {
    const int64_t n = t[k].numel(), lo = std::max(begin, at), hi = std::min(end, at + n);
    if (lo < hi) mem.copy(t[k].f32() + (lo - at), src + (lo - begin), (hi - lo) * 4);
    at += n;
  }
}

int64_t totalOf(const std::vector<TensorDesc>& d, size_t count) {
  int64_t n = 0;
  for (size_t k = 0; k < count; ++k) n += numel(d[k].shape);
  return n;
}

std::string declines(const KernelSig& s) {
  if (std::string no = Moves(s.device).declines(s.comm, "communicator"); !no.empty()) return no;
  for (const TensorDesc& d : s.in)
    if (d.dtype != DType::F32 || d.layout != Layout::Plain) return "plain float tensors only";
  return {};
}

// Inputs: the bucket's gradients; output: this rank's shard of their sum.
KernelFn scatterKernel(const KernelSig& s) {
  const Moves mem(s.device);
  Communicator* comm = mem.speaker(s.comm);
  const int ranks = s.comm->size();
  const FlatShards shards(totalOf(s.in, s.in.size()), ranks);
  std::shared_ptr<char> staging = mem.scratch(shards.per * ranks * 4);
  return [=](const KernelIO& io) {
    float* all = reinterpret_cast<float*>(staging.get());
    copyRange(mem, io.in, io.nin, 0, shards.total, all);
    mem.zero(all + shards.total, (shards.per * ranks - shards.total) * 4);  // the padding
    comm->reduceScatter(all, io.out[0].f32(), shards.per);
  };
}

// Inputs: the bucket's parameters (k), its gradients whole (k) or this rank's shard
// of them (1), the state shards, [the loss scale's state].
KernelFn updateKernel(const KernelSig& s, const ParallelMath& math) {
  const Moves mem(s.device);
  Communicator* comm = mem.speaker(s.comm);
  const Attrs& a = *s.attrs;
  const size_t k = size_t(a.i("params"));
  const bool wholeGrads = a.s("grads") == "whole", scaled = a.b("loss_scaled");
  const int ranks = s.comm->size(), r = s.comm->rank();
  const FlatShards shards(totalOf(s.in, k), ranks);
  const size_t state = wholeGrads ? 2 * k : k + 1;
  const bool hasState = s.in.size() - (scaled ? 1 : 0) > state;
  ShardStep step;
  step.adam = a.s("kind") == "adam";
  step.beta1 = float(a.f("beta1"));
  step.beta2 = float(a.f("beta2"));
  step.eps = float(a.f("eps"));
  step.weightDecay = float(a.f("weight_decay"));
  step.momentum = float(a.f("momentum"));
  step.decoupled = a.b("decoupled");
  step.nesterov = a.b("nesterov");
  // This rank's parameters, then its gradients, then every rank's parameters gathered.
  std::shared_ptr<char> scratch = mem.scratch(shards.per * (ranks + 2) * 4);
  auto stepShard = math.stepShard;
  void* stream = s.device ? s.device->stream() : nullptr;
  return [=](const KernelIO& io) {
    const int64_t lo = shards.begin(r), n = shards.end(r) - lo, per = shards.per;
    float* p = reinterpret_cast<float*>(scratch.get());
    float* g = p + per;
    float* all = g + per;
    copyRange(mem, io.in, k, lo, lo + n, p);
    if (wholeGrads)
      copyRange(mem, io.in + k, k, lo, lo + n, g);  // its part of the summed gradients
    else
      mem.copy(g, io.in[k].data, n * 4);
    ShardStep run = step;
    run.io = &io;
    run.p = p;
    run.g = g;
    run.n = n;
    run.m = hasState ? io.in[state].f32() : nullptr;
    run.v = step.adam ? io.in[state + 1].f32() : nullptr;
    run.lossScale = scaled ? io.in[io.nin - 1].f32() : nullptr;
    stepShard(stream, run);
    comm->allgather(p, all, per * 4);
    copyBack(mem, all, 0, shards.total, io.in, k);
  };
}

}  // namespace

void registerZeroKernels(KernelRegistry& r, DeviceKind device, const ParallelMath& math) {
  r.add("ZeroScatter", device, KernelImpl{"collective.zero_scatter", declines, scatterKernel});
  r.add("ZeroUpdate", device,
        KernelImpl{"collective.zero_update", declines,
                   [math](const KernelSig& s) { return updateKernel(s, math); }});
}

}  // namespace netloom
