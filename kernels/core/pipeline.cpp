// Pipeline parallelism's kernels, on any backend: messages between the stages of a
// pipeline group (KernelSig::stageComm), micro-batches cut from a batch, and the
// mean of per-micro-batch scalars.
#include "kernels/core/pipeline.h"

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"
#include "kernels/core/moves.h"

namespace netloom {
namespace {

void* streamOf(const KernelSig& s) {
  return s.device ? s.device->stream() : nullptr;
}

std::string needsStages(const KernelSig& s) {
  return Moves(s.device).declines(s.stageComm, "pipeline group");
}

KernelFn sendKernel(const KernelSig& s) {
  Communicator* comm = Moves(s.device).speaker(s.stageComm);
  const Moves mem(s.device);
  const int peer = int(s.attrs->i("peer"));
  const uint32_t tag = uint32_t(s.attrs->i("tag"));
  const int64_t bytes = bytesOf(s.in[0]);
  return [=](const KernelIO& io) {
    comm->send(io.in[0].data, bytes, peer, tag);
    mem.zero(io.out[0].data, 4);
  };
}

KernelFn recvKernel(const KernelSig& s) {
  Communicator* comm = Moves(s.device).speaker(s.stageComm);
  const int peer = int(s.attrs->i("peer"));
  const uint32_t tag = uint32_t(s.attrs->i("tag"));
  const int64_t bytes = bytesOf(s.out[0]);
  return [=](const KernelIO& io) { comm->recv(io.out[0].data, bytes, peer, tag); };
}

KernelFn microBatchKernel(const KernelSig& s) {
  const Moves mem(s.device);
  const Shape whole = s.in[0].shape;
  const int index = int(s.attrs->i("index")), parts = int(s.attrs->i("parts"));
  const size_t elem = dtypeSize(s.in[0].dtype);
  return [=](const KernelIO& io) {
    mem.takePart(io.in[0].data, whole, 0, index, parts, io.out[0].data, elem);
  };
}

KernelFn meanKernel(const KernelSig& s, const ParallelMath& math) {
  std::shared_ptr<char> acc = Moves(s.device).scratch(sizeof(double));
  auto mean = math.meanOfScalars;
  void* stream = streamOf(s);
  return [acc, mean, stream](const KernelIO& io) {
    mean(stream, io.in, io.nin, io.out[0].f32(), reinterpret_cast<double*>(acc.get()));
  };
}

KernelFn meanGradKernel(const KernelSig& s, const ParallelMath& math) {
  const float parts = float(s.attrs->i("parts"));
  auto scale = math.scaleScalar;
  void* stream = streamOf(s);
  return [parts, scale, stream](const KernelIO& io) {
    scale(stream, io.in[0].f32(), io.out[0].f32(), 1.f / parts);
  };
}

// The stages holding a tied weight send each other their parts of its gradient and
// sum them in stage order: every holder gets the same bits.
KernelFn tieKernel(const KernelSig& s, const ParallelMath& math) {
  const Moves mem(s.device);
  Communicator* comm = mem.speaker(s.stageComm);
  const std::vector<int64_t> stages = s.attrs->ints("stages");
  const uint32_t tag = uint32_t(s.attrs->i("tag"));
  const int64_t n = numel(s.in[0].shape), bytes = n * int64_t(sizeof(float));
  const int me = s.stageComm->rank();
  std::shared_ptr<char> parts = mem.scratch(bytes * int64_t(stages.size()));
  auto sum = math.sumBlocks;
  void* stream = streamOf(s);
  return [=](const KernelIO& io) {
    for (int64_t st : stages)
      if (st != me) comm->send(io.in[0].data, bytes, int(st), tag);
    float* blocks = reinterpret_cast<float*>(parts.get());
    for (size_t k = 0; k < stages.size(); ++k) {
      if (stages[k] == me)
        mem.copy(blocks + k * size_t(n), io.in[0].data, bytes);
      else
        comm->recv(blocks + k * size_t(n), bytes, int(stages[k]), tag);
    }
    sum(stream, blocks, int(stages.size()), n, io.out[0].f32());
  };
}

}  // namespace

void registerPipelineKernels(KernelRegistry& r, DeviceKind device, const ParallelMath& math) {
  auto any = [](const KernelSig&) { return std::string(); };
  auto with = [math](KernelFn (*make)(const KernelSig&, const ParallelMath&)) {
    return [math, make](const KernelSig& s) { return make(s, math); };
  };
  r.add("PipeSend", device, KernelImpl{"pipeline.send", needsStages, sendKernel});
  r.add("PipeRecv", device, KernelImpl{"pipeline.recv", needsStages, recvKernel});
  r.add("MicroBatch", device, KernelImpl{"pipeline.micro_batch", any, microBatchKernel});
  r.add("MicroMean", device, KernelImpl{"pipeline.mean", any, with(meanKernel)});
  r.add("MicroMeanGrad", device, KernelImpl{"pipeline.mean_grad", any, with(meanGradKernel)});
  r.add("PipeTie", device, KernelImpl{"pipeline.tie", needsStages, with(tieKernel)});
}

}  // namespace netloom
