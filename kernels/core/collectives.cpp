// The parallel kernels, the same on every backend: the gradient buckets go to the
// run's communicator, which knows the device's memory (Gloo sums host memory), and
// boxings move through kernels/core/moves.h.
#include "kernels/core/collectives.h"

#include <memory>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"
#include "kernels/core/moves.h"
#include "kernels/core/pipeline.h"
#include "kernels/core/shard.h"
#include "kernels/core/zero.h"

namespace netloom {
namespace {

// Parses "S(2)", "B" or "P" as the boxing op writes them: kind letter and axis.
struct Layout {
  char kind = 'B';
  int axis = 0;
};
Layout layoutOf(const std::string& s) {
  Layout l{s.empty() ? 'B' : s[0], 0};
  if (l.kind == 'S') l.axis = std::stoi(s.substr(2));
  return l;
}

// One boxing: `in` and `out` are this rank's parts, in the memory of `s.device`.
KernelFn boxingKernel(const KernelSig& s) {
  const Moves mem(s.device);
  Communicator* comm = mem.speaker(s.tensorComm);
  const Layout from = layoutOf(s.attrs->s("from")), to = layoutOf(s.attrs->s("to"));
  const int parts = s.tensorComm->size(), me = s.tensorComm->rank();
  const size_t elem = dtypeSize(s.in[0].dtype);
  const Shape in = s.in[0].shape, out = s.out[0].shape;
  const int64_t inBytes = numel(in) * int64_t(elem), outBytes = numel(out) * int64_t(elem);
  if (from.kind == 'S' && to.kind == 'B') {  // all-gather, then each part into its place
    if (from.axis == 0)
      return [=](const KernelIO& io) { comm->allgather(io.in[0].data, io.out[0].data, inBytes); };
    std::shared_ptr<char> scratch = mem.scratch(outBytes);
    return [=](const KernelIO& io) {
      comm->allgather(io.in[0].data, scratch.get(), inBytes);
      for (int k = 0; k < parts; ++k)
        mem.putPart(scratch.get() + k * inBytes, out, from.axis, k, parts, io.out[0].data, elem);
    };
  }
  if (from.kind == 'P' && to.kind == 'B')
    return [=](const KernelIO& io) {
      mem.copy(io.out[0].data, io.in[0].data, inBytes);
      comm->allreduce(static_cast<float*>(io.out[0].data), numel(in));
    };
  if (from.kind == 'P' && to.kind == 'S') {  // the parts laid end to end, then summed apart
    std::shared_ptr<char> scratch = mem.scratch(inBytes);
    return [=](const KernelIO& io) {
      for (int k = 0; k < parts; ++k)
        mem.takePart(io.in[0].data, in, to.axis, k, parts, scratch.get() + k * outBytes, elem);
      comm->reduceScatter(reinterpret_cast<const float*>(scratch.get()),
                          static_cast<float*>(io.out[0].data), numel(out));
    };
  }
  if (from.kind == 'S' && to.kind == 'S') {  // rank k gets our part k along `to`
    std::shared_ptr<char> scratch = mem.scratch(2 * inBytes);
    return [=](const KernelIO& io) {
      char* send = scratch.get();
      char* recv = send + inBytes;
      const int64_t block = inBytes / parts;
      for (int k = 0; k < parts; ++k)
        mem.takePart(io.in[0].data, in, to.axis, k, parts, send + k * block, elem);
      comm->alltoall(send, recv, block);
      for (int k = 0; k < parts; ++k)
        mem.putPart(recv + k * block, out, from.axis, k, parts, io.out[0].data, elem);
    };
  }
  if (from.kind == 'B' && to.kind == 'S')
    return [=](const KernelIO& io) {
      mem.takePart(io.in[0].data, in, to.axis, me, parts, io.out[0].data, elem);
    };
  if (from.kind == 'B' && to.kind == 'P')  // rank 0 keeps the value, the others add zeros
    return [=](const KernelIO& io) {
      if (me == 0)
        mem.copy(io.out[0].data, io.in[0].data, inBytes);
      else
        mem.zero(io.out[0].data, outBytes);
    };
  return [=](const KernelIO& io) {  // S(a) -> P: this rank's part, zeros elsewhere
    mem.zero(io.out[0].data, outBytes);
    mem.putPart(io.in[0].data, out, from.axis, me, parts, io.out[0].data, elem);
  };
}

}  // namespace

void registerCollectiveKernels(KernelRegistry& r, DeviceKind device, const ParallelMath& math) {
  // The ranks a bucket sums over: all of them, or a tensor group's peers.
  auto group = [](const KernelSig& s) {
    return s.attrs->s("group") == "data" ? s.dataComm : s.comm;
  };
  auto decline = [group](const KernelSig& s) -> std::string {
    Communicator* comm = group(s);
    if (!comm) return "the run has no communicator";
    if (s.device && !s.device->hostAddressable() && !comm->sumsDeviceMemory())
      return comm->describe() + " sums host memory only";
    return {};
  };
  KernelImpl start{"collective.bucket_start", decline, [group](const KernelSig& s) -> KernelFn {
                     Communicator* comm = group(s);
                     std::string bucket = s.attrs->s("bucket");
                     return
                         [comm, bucket](const KernelIO& io) { comm->start(bucket, io.in, io.nin); };
                   }};
  start.anyLayout = true;  // summed element by element, whatever the layout
  r.add("BucketStart", device, std::move(start));
  KernelImpl wait{"collective.bucket_wait", decline, [group](const KernelSig& s) -> KernelFn {
                    Communicator* comm = group(s);
                    std::string bucket = s.attrs->s("bucket");
                    return [comm, bucket](const KernelIO&) { comm->wait(bucket); };
                  }};
  wait.anyLayout = true;
  r.add("BucketWait", device, std::move(wait));
  KernelImpl box{"collective.boxing",
                 [](const KernelSig& s) -> std::string {
                   if (std::string no = Moves(s.device).declines(s.tensorComm, "tensor group");
                       !no.empty())
                     return no;
                   if (s.attrs->i("parts") != s.tensorComm->size())
                     return "the plan is for another number of ranks";
                   return {};
                 },
                 boxingKernel};
  r.add("Boxing", device, std::move(box));
  registerZeroKernels(r, device, math);
  registerPipelineKernels(r, device, math);
}

}  // namespace netloom
