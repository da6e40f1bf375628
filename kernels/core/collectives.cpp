// The gradient buckets' kernels, the same on every backend: they hand the bucket to
// the run's communicator, which knows the device's memory (Gloo sums host memory).
#include "kernels/core/collectives.h"

#include <memory>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"
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

// One boxing, host memory: `in` and `out` are this rank's parts.
KernelFn boxingKernel(const KernelSig& s) {
  Communicator* comm = s.tensorComm;
  const Layout from = layoutOf(s.attrs->s("from")), to = layoutOf(s.attrs->s("to"));
  const int parts = comm->size(), me = comm->rank();
  const size_t elem = dtypeSize(s.in[0].dtype);
  const Shape in = s.in[0].shape, out = s.out[0].shape;
  const int64_t inBytes = numel(in) * int64_t(elem), outBytes = numel(out) * int64_t(elem);
  auto scratch = std::make_shared<std::vector<char>>();
  if (from.kind == 'S' && to.kind == 'B')  // all-gather, then each part into its place
    return [=](const KernelIO& io) {
      if (from.axis == 0) return comm->allgather(io.in[0].data, io.out[0].data, inBytes);
      scratch->resize(size_t(outBytes));
      comm->allgather(io.in[0].data, scratch->data(), inBytes);
      for (int k = 0; k < parts; ++k)
        putPart(scratch->data() + k * inBytes, out, from.axis, k, parts, io.out[0].data, elem);
    };
  if (from.kind == 'P' && to.kind == 'B')
    return [=](const KernelIO& io) {
      std::memcpy(io.out[0].data, io.in[0].data, size_t(inBytes));
      comm->allreduce(static_cast<float*>(io.out[0].data), numel(in));
    };
  if (from.kind == 'P' && to.kind == 'S')  // the parts laid end to end, then summed apart
    return [=](const KernelIO& io) {
      scratch->resize(size_t(inBytes));
      for (int k = 0; k < parts; ++k)
        takePart(io.in[0].data, in, to.axis, k, parts, scratch->data() + k * outBytes, elem);
      comm->reduceScatter(reinterpret_cast<const float*>(scratch->data()),
                          static_cast<float*>(io.out[0].data), numel(out));
    };
  if (from.kind == 'S' && to.kind == 'S')  // rank k gets our part k along `to`
    return [=](const KernelIO& io) {
      scratch->resize(size_t(2 * inBytes));
      char* send = scratch->data();
      char* recv = send + inBytes;
      const int64_t block = inBytes / parts;
      for (int k = 0; k < parts; ++k)
        takePart(io.in[0].data, in, to.axis, k, parts, send + k * block, elem);
      comm->alltoall(send, recv, block);
      for (int k = 0; k < parts; ++k)
        putPart(recv + k * block, out, from.axis, k, parts, io.out[0].data, elem);
    };
  if (from.kind == 'B' && to.kind == 'S')
    return [=](const KernelIO& io) {
      takePart(io.in[0].data, in, to.axis, me, parts, io.out[0].data, elem);
    };
  if (from.kind == 'B' && to.kind == 'P')  // rank 0 keeps the value, the others add zeros
    return [=](const KernelIO& io) {
      if (me == 0)
        std::memcpy(io.out[0].data, io.in[0].data, size_t(inBytes));
      else
        std::memset(io.out[0].data, 0, size_t(outBytes));
    };
  return [=](const KernelIO& io) {  // S(a) -> P: this rank's part, zeros elsewhere
    std::memset(io.out[0].data, 0, size_t(outBytes));
    putPart(io.in[0].data, out, from.axis, me, parts, io.out[0].data, elem);
  };
}

}  // namespace

void registerCollectiveKernels(KernelRegistry& r, DeviceKind device) {
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
                   if (!s.tensorComm) return "the run has no tensor group";
                   if (s.device && !s.device->hostAddressable())
                     return "boxing runs on host memory only";
                   if (s.attrs->i("parts") != s.tensorComm->size())
                     return "the plan is for another number of ranks";
                   return {};
                 },
                 boxingKernel};
  r.add("Boxing", device, std::move(box));
  registerZeroKernels(r, device);
  registerPipelineKernels(r, device);
}

}  // namespace netloom
