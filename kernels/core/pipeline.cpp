// Pipeline parallelism's kernels, host memory: messages between the stages of a
// pipeline group (KernelSig::stageComm), micro-batches cut from a batch, and the
// mean of per-micro-batch scalars.
#include "kernels/core/pipeline.h"

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"
#include "kernels/core/shard.h"

namespace netloom {
namespace {

std::string hostOnly(const KernelSig& s) {
  if (s.device && !s.device->hostAddressable()) return "pipeline stages run on host memory only";
  return {};
}

std::string needsStages(const KernelSig& s) {
  if (!s.stageComm) return "the run has no pipeline group";
  return hostOnly(s);
}

KernelFn sendKernel(const KernelSig& s) {
  Communicator* comm = s.stageComm;
  const int peer = int(s.attrs->i("peer"));
  const uint32_t tag = uint32_t(s.attrs->i("tag"));
  const int64_t bytes = bytesOf(s.in[0]);
  return [=](const KernelIO& io) {
    comm->send(io.in[0].data, bytes, peer, tag);
    *io.out[0].f32() = 0.f;
  };
}

KernelFn recvKernel(const KernelSig& s) {
  Communicator* comm = s.stageComm;
  const int peer = int(s.attrs->i("peer"));
  const uint32_t tag = uint32_t(s.attrs->i("tag"));
  const int64_t bytes = bytesOf(s.out[0]);
  return [=](const KernelIO& io) { comm->recv(io.out[0].data, bytes, peer, tag); };
}

KernelFn microBatchKernel(const KernelSig& s) {
  const Shape whole = s.in[0].shape;
  const int index = int(s.attrs->i("index")), parts = int(s.attrs->i("parts"));
  const size_t elem = dtypeSize(s.in[0].dtype);
  return [=](const KernelIO& io) {
    takePart(io.in[0].data, whole, 0, index, parts, io.out[0].data, elem);
  };
}

KernelFn meanKernel(const KernelSig&) {
  return [](const KernelIO& io) {
    double sum = 0;
    for (size_t k = 0; k < io.nin; ++k) sum += *io.in[k].f32();
    *io.out[0].f32() = float(sum / double(io.nin));
  };
}

KernelFn meanGradKernel(const KernelSig& s) {
  const float parts = float(s.attrs->i("parts"));
  return [parts](const KernelIO& io) { *io.out[0].f32() = *io.in[0].f32() / parts; };
}

// The stages holding a tied weight send each other their parts of its gradient and
// sum them in stage order: every holder gets the same bits.
KernelFn tieKernel(const KernelSig& s) {
  Communicator* comm = s.stageComm;
  const std::vector<int64_t> stages = s.attrs->ints("stages");
  const uint32_t tag = uint32_t(s.attrs->i("tag"));
  const int64_t n = numel(s.in[0].shape);
  auto parts = std::make_shared<std::vector<float>>();
  return [=](const KernelIO& io) {
    const int me = comm->rank();
    for (int64_t st : stages)
      if (st != me) comm->send(io.in[0].data, n * int64_t(sizeof(float)), int(st), tag);
    parts->assign(size_t(n * int64_t(stages.size())), 0.f);
    for (size_t k = 0; k < stages.size(); ++k) {
      float* at = parts->data() + k * size_t(n);
      if (stages[k] == me)
        std::memcpy(at, io.in[0].data, size_t(n) * sizeof(float));
      else
        comm->recv(at, n * int64_t(sizeof(float)), int(stages[k]), tag);
    }
    float* out = io.out[0].f32();
    for (int64_t i = 0; i < n; ++i) {
      float sum = (*parts)[size_t(i)];
      for (size_t k = 1; k < stages.size(); ++k) sum += (*parts)[k * size_t(n) + size_t(i)];
      out[i] = sum;
    }
  };
}

}  // namespace

void registerPipelineKernels(KernelRegistry& r, DeviceKind device) {
  r.add("PipeSend", device, KernelImpl{"pipeline.send", needsStages, sendKernel});
  r.add("PipeRecv", device, KernelImpl{"pipeline.recv", needsStages, recvKernel});
  r.add("MicroBatch", device, KernelImpl{"pipeline.micro_batch", hostOnly, microBatchKernel});
  r.add("MicroMean", device, KernelImpl{"pipeline.mean", hostOnly, meanKernel});
  r.add("MicroMeanGrad", device, KernelImpl{"pipeline.mean_grad", hostOnly, meanGradKernel});
  r.add("PipeTie", device, KernelImpl{"pipeline.tie", needsStages, tieKernel});
}

}  // namespace netloom
