#include "kernels/cuda/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

namespace netloom::cuda {

namespace {

void checkCuda(cudaError_t e, int rank, const char* what) {
  if (e != cudaSuccess)
    throw CommError("rank " + std::to_string(rank) + ": " + what + ": " + cudaGetErrorString(e));
}
void checkNccl(ncclResult_t r, ncclComm_t comm, int rank, const std::string& what) {
  if (r != ncclSuccess)
    throw CommError("rank " + std::to_string(rank) + ": NCCL failed on " + what + ": " +
                    ncclGetErrorString(r) + " (" + ncclGetLastError(comm) + ")");
}

// Rank k of `size` in a grouped send to and receive from every rank (alltoall).
ncclResult_t exchange(const char* in, char* out, int64_t bytes, int size, ncclComm_t comm,
                      cudaStream_t stream) {
  ncclResult_t res = ncclGroupStart();
  for (int k = 0; k < size && res == ncclSuccess; ++k) {
    res = ncclSend(in + k * bytes, size_t(bytes), ncclUint8, k, comm, stream);
    if (res == ncclSuccess)
      res = ncclRecv(out + k * bytes, size_t(bytes), ncclUint8, k, comm, stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

class NcclCommunicator;
std::unique_ptr<Communicator> onStream(NcclCommunicator& owner);

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Device& device, ncclComm_t comm, int rank, int size)
      : m_device(device),
        m_comm(comm),
        m_rank(rank),
        m_size(size),
        m_compute(static_cast<cudaStream_t>(device.stream())) {
    check(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking), "creating its stream");
    m_onDevice = onStream(*this);
  }
  ~NcclCommunicator() override {
    m_onDevice.reset();
    for (auto& [name, b] : m_buckets) {
      cudaEventDestroy(b.ready);
      cudaEventDestroy(b.done);
    }
    if (m_staging) cudaFree(m_staging);
    if (m_stream) cudaStreamDestroy(m_stream);
    ncclCommDestroy(m_comm);
  }

  int rank() const override { return m_rank; }
  int size() const override { return m_size; }
  std::string describe() const override {
    return "NCCL, rank " + std::to_string(m_rank) + " of " + std::to_string(m_size);
  }
  bool sumsDeviceMemory() const override { return true; }
  Communicator* onDevice() override { return m_onDevice.get(); }

  // A group is split off this communicator (ncclCommSplit): every rank of this one
  // makes its groups in the same order, as engine/parallel's tensorGroups does.
  std::unique_ptr<Communicator> group(const std::vector<int>& members, uint32_t id) override {
    int key = -1;
    for (size_t k = 0; k < members.size(); ++k)
      if (members[k] == m_rank) key = int(k);
    if (key < 0) return nullptr;
    ncclComm_t comm = nullptr;
    nccl(ncclCommSplit(m_comm, int(id & 0x7fffffffu), key, &comm, nullptr), "splitting a group");
    return std::make_unique<NcclCommunicator>(m_device, comm, key, int(members.size()));
  }

  ncclComm_t comm() const { return m_comm; }
  cudaStream_t computeStream() const { return m_compute; }

  // The blocking calls take host memory (the trainer's scalars and sums), staged
  // through device memory.
  void allreduce(float* data, int64_t count, bool mean) override {
    staged(data, count * int64_t(sizeof(float)), [&](void* d) {
      return ncclAllReduce(d, d, size_t(count), ncclFloat, mean ? ncclAvg : ncclSum, m_comm,
                           m_stream);
    });
  }
  void allreduce(double* data, int64_t count) override {
    staged(data, count * int64_t(sizeof(double)), [&](void* d) {
      return ncclAllReduce(d, d, size_t(count), ncclDouble, ncclSum, m_comm, m_stream);
    });
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    staged(data, bytes, [&](void* d) {
      return ncclBroadcast(d, d, size_t(bytes), ncclUint8, root, m_comm, m_stream);
    });
  }
  void allgather(const void* in, void* out, int64_t bytes) override {
    std::vector<char> all(size_t(bytes) * size_t(m_size));
    std::memcpy(all.data() + size_t(bytes) * size_t(m_rank), in, size_t(bytes));
    staged(all.data(), int64_t(all.size()), [&](void* d) {
      char* base = static_cast<char*>(d);
      return ncclAllGather(base + bytes * m_rank, base, size_t(bytes), ncclUint8, m_comm, m_stream);
    });
    std::memcpy(out, all.data(), all.size());
  }
  void barrier() override {
    float one = 1.f;
    allreduce(&one, 1, false);
  }

  // Host memory in and out, as the other blocking calls: staged through one device
  // buffer holding the input, then the output.
  void reduceScatter(const float* in, float* out, int64_t count) override {
    const int64_t inBytes = count * m_size * int64_t(sizeof(float));
    twoWay(in, inBytes, out, count * int64_t(sizeof(float)), [&](void* d, void* r) {
      return ncclReduceScatter(d, r, size_t(count), ncclFloat, ncclSum, m_comm, m_stream);
    });
  }
  void alltoall(const void* in, void* out, int64_t bytes) override {
    twoWay(in, bytes * m_size, out, bytes * m_size, [&](void* d, void* r) {
      return exchange(static_cast<char*>(d), static_cast<char*>(r), bytes, m_size, m_comm,
                      m_stream);
    });
  }
  // NCCL orders one pair's messages as sent; the tag is not needed to match them.
  void send(const void* data, int64_t bytes, int to, uint32_t) override {
    twoWay(data, bytes, nullptr, 0, [&](void* d, void*) {
      return ncclSend(d, size_t(bytes), ncclUint8, to, m_comm, m_stream);
    });
  }
  void recv(void* data, int64_t bytes, int from, uint32_t) override {
    twoWay(nullptr, 0, data, bytes, [&](void*, void* r) {
      return ncclRecv(r, size_t(bytes), ncclUint8, from, m_comm, m_stream);
    });
  }

  void start(const std::string& name, const TensorRef* tensors, size_t count) override {
    Bucket& b = bucket(name);
    check(cudaEventRecord(b.ready, m_compute), "ordering a bucket after its gradients");
    check(cudaStreamWaitEvent(m_stream, b.ready, 0), "ordering a bucket after its gradients");
    nccl(ncclGroupStart(), name);
    for (size_t i = 0; i < count; ++i)
      nccl(ncclAllReduce(tensors[i].data, tensors[i].data, size_t(tensors[i].numel()), ncclFloat,
                         ncclSum, m_comm, m_stream),
           name);
    nccl(ncclGroupEnd(), name);
    check(cudaEventRecord(b.done, m_stream), "marking a bucket's sum");
  }
  void wait(const std::string& name) override {
    check(cudaStreamWaitEvent(m_compute, bucket(name).done, 0), "waiting for a bucket's sum");
  }

 private:
  struct Bucket {
    cudaEvent_t ready = nullptr, done = nullptr;
  };

  Bucket& bucket(const std::string& name) {
    auto [it, fresh] = m_buckets.try_emplace(name);
    if (fresh) {
      check(cudaEventCreateWithFlags(&it->second.ready, cudaEventDisableTiming), "an event");
      check(cudaEventCreateWithFlags(&it->second.done, cudaEventDisableTiming), "an event");
    }
    return it->second;
  }

  // `in` (inBytes of host memory) staged to the device, `op(deviceIn, deviceOut)`, and
  // deviceOut (outBytes) copied back to `out`.
  template <class Op>
  void twoWay(const void* in, int64_t inBytes, void* out, int64_t outBytes, const Op& op) {
    const int64_t total = inBytes + outBytes;
    if (total > m_stagingBytes) {
      if (m_staging) cudaFree(m_staging);
      m_staging = nullptr;
      check(cudaMalloc(&m_staging, size_t(total)), "staging a collective");
      m_stagingBytes = total;
    }
    char* dIn = static_cast<char*>(m_staging);
    char* dOut = dIn + inBytes;
    check(cudaStreamSynchronize(m_compute), "finishing the step before a collective");
    if (inBytes > 0)
      check(cudaMemcpyAsync(dIn, in, size_t(inBytes), cudaMemcpyHostToDevice, m_stream),
            "staging a collective");
    nccl(op(dIn, dOut), "a collective");
    if (outBytes > 0)
      check(cudaMemcpyAsync(out, dOut, size_t(outBytes), cudaMemcpyDeviceToHost, m_stream),
            "staging a collective");
    check(cudaStreamSynchronize(m_stream), "a collective");
  }

  template <class Op>
  void staged(void* host, int64_t bytes, const Op& op) {
    if (bytes > m_stagingBytes) {
      if (m_staging) cudaFree(m_staging);
      m_staging = nullptr;
      check(cudaMalloc(&m_staging, size_t(bytes)), "staging a collective");
      m_stagingBytes = bytes;
    }
    // After the step's work, which may still be writing what is summed.
    check(cudaStreamSynchronize(m_compute), "finishing the step before a collective");
    check(cudaMemcpyAsync(m_staging, host, size_t(bytes), cudaMemcpyHostToDevice, m_stream),
          "staging a collective");
    nccl(op(m_staging), "a collective");
    check(cudaMemcpyAsync(host, m_staging, size_t(bytes), cudaMemcpyDeviceToHost, m_stream),
          "staging a collective");
    check(cudaStreamSynchronize(m_stream), "a collective");
  }

  void check(cudaError_t e, const char* what) const { checkCuda(e, m_rank, what); }
  void nccl(ncclResult_t r, const std::string& what) const { checkNccl(r, m_comm, m_rank, what); }

  Device& m_device;
  ncclComm_t m_comm;
  int m_rank, m_size;
  cudaStream_t m_compute, m_stream = nullptr;
  std::map<std::string, Bucket> m_buckets;
  void* m_staging = nullptr;
  int64_t m_stagingBytes = 0;
  std::unique_ptr<Communicator> m_onDevice;
};

// NcclCommunicator's calls on device memory (Communicator::onDevice), queued on the
// device's stream. Point-to-point messages travel on two more communicators split
// off the owner's, "up" for messages to higher ranks and "down" for those to lower
// ones, and each is sent from a stream of its own: a send never holds up the step.
// NCCL runs one communicator's calls in the order issued, whatever their streams; as
// a lane carries messages one way only, two stages sending each other at once
// (1F1B's activations and gradients) never wait on each other. NCCL pairs one
// lane's messages between two ranks by their order; the pipeline schedule issues
// them in the same order at both ends (engine/compiler/passes/pipeline.cpp). A send
// first copies its bytes, in stream order, into memory of its own.
class NcclOnStream : public Communicator {
 public:
  explicit NcclOnStream(NcclCommunicator& owner)
      : m_owner(owner), m_comm(owner.comm()), m_stream(owner.computeStream()) {
    check(cudaMalloc(&m_one, sizeof(float)), "a barrier's value");
    check(cudaEventCreateWithFlags(&m_issued, cudaEventDisableTiming), "an event");
  }
  ~NcclOnStream() override {
    for (Lane& lane : m_lanes) {
      if (lane.stream) cudaStreamSynchronize(lane.stream);
      if (lane.comm) ncclCommDestroy(lane.comm);
      if (lane.stream) cudaStreamDestroy(lane.stream);
    }
    for (auto& [tag, kept] : m_kept)
      for (auto& [copy, bytes] : kept) cudaFree(copy);
    cudaEventDestroy(m_issued);
    cudaFree(m_one);
  }

  int rank() const override { return m_owner.rank(); }
  int size() const override { return m_owner.size(); }
  std::string describe() const override { return m_owner.describe() + ", device memory"; }
  bool sumsDeviceMemory() const override { return true; }

  void allreduce(float* data, int64_t count, bool mean) override {
    nccl(ncclAllReduce(data, data, size_t(count), ncclFloat, mean ? ncclAvg : ncclSum, m_comm,
                       m_stream),
         "an all-reduce");
  }
  void allreduce(double* data, int64_t count) override {
    nccl(ncclAllReduce(data, data, size_t(count), ncclDouble, ncclSum, m_comm, m_stream),
         "an all-reduce");
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    nccl(ncclBroadcast(data, data, size_t(bytes), ncclUint8, root, m_comm, m_stream),
         "a broadcast");
  }
  void allgather(const void* in, void* out, int64_t bytes) override {
    nccl(ncclAllGather(in, out, size_t(bytes), ncclUint8, m_comm, m_stream), "an all-gather");
  }
  void barrier() override { allreduce(static_cast<float*>(m_one), 1, false); }
  void reduceScatter(const float* in, float* out, int64_t count) override {
    nccl(ncclReduceScatter(in, out, size_t(count), ncclFloat, ncclSum, m_comm, m_stream),
         "a reduce-scatter");
  }
  void alltoall(const void* in, void* out, int64_t bytes) override {
    nccl(exchange(static_cast<const char*>(in), static_cast<char*>(out), bytes, size(), m_comm,
                  m_stream),
         "an all-to-all");
  }
  void send(const void* data, int64_t bytes, int to, uint32_t tag) override {
    if (to == rank()) return keep(data, bytes, tag);
    Lane& l = lane(to > rank());
    void* copy = nullptr;
    check(cudaEventRecord(m_issued, m_stream), "ordering a send after the step");
    check(cudaStreamWaitEvent(l.stream, m_issued, 0), "ordering a send after the step");
    check(cudaMallocAsync(&copy, size_t(std::max<int64_t>(bytes, 1)), l.stream), "a send's copy");
    check(cudaMemcpyAsync(copy, data, size_t(bytes), cudaMemcpyDeviceToDevice, l.stream),
          "a send's copy");
    nccl(ncclSend(copy, size_t(bytes), ncclUint8, to, l.comm, l.stream), "a send");
    check(cudaFreeAsync(copy, l.stream), "a send's copy");
  }
  void recv(void* data, int64_t bytes, int from, uint32_t tag) override {
    if (from == rank()) return take(data, bytes, tag);
    Lane& l = lane(from < rank());
    nccl(ncclRecv(data, size_t(bytes), ncclUint8, from, l.comm, m_stream), "a receive");
  }
  void start(const std::string& bucket, const TensorRef* t, size_t n) override {
    m_owner.start(bucket, t, n);
  }
  void wait(const std::string& bucket) override { m_owner.wait(bucket); }

 private:
  struct Lane {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };

  // The lanes are split off on the first message (every rank of a pipeline group sends
  // or receives in its first step), not in a step being recorded: a recording cannot
  // hold a send on a stream that never rejoins the step's.
  Lane& lane(bool up) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(m_stream, &capturing), "asking whether the step is recorded");
    if (capturing != cudaStreamCaptureStatusNone)
      throw CommError(
          "messages between pipeline stages go on streams of their own, which a "
          "recorded step cannot hold");
    if (!m_lanes[0].comm)
      for (Lane& l : m_lanes) {
        nccl(ncclCommSplit(m_comm, 0, rank(), &l.comm, nullptr), "making a lane for messages");
        check(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking), "a lane's stream");
      }
    return m_lanes[up ? 0 : 1];
  }

  // A message to this rank itself (NCCL orders one communicator's calls, so a send
  // and a receive of its own would wait on each other): a copy on the step's stream,
  // kept by tag until received.
  void keep(const void* data, int64_t bytes, uint32_t tag) {
    void* copy = nullptr;
    check(cudaMallocAsync(&copy, size_t(std::max<int64_t>(bytes, 1)), m_stream), "a message");
    check(cudaMemcpyAsync(copy, data, size_t(bytes), cudaMemcpyDeviceToDevice, m_stream),
          "a message");
    m_kept[tag].push_back({copy, bytes});
  }
  void take(void* data, int64_t bytes, uint32_t tag) {
    auto it = m_kept.find(tag);
    if (it == m_kept.end() || it->second.empty())
      throw CommError("rank " + std::to_string(rank()) + " receives from itself a message (tag " +
                      std::to_string(tag) + ") it never sent");
    auto [copy, kept] = it->second.front();
    it->second.pop_front();
    if (kept != bytes)
      throw CommError("rank " + std::to_string(rank()) + " sent itself " + std::to_string(kept) +
                      " bytes (tag " + std::to_string(tag) + ") and receives " +
                      std::to_string(bytes));
    check(cudaMemcpyAsync(data, copy, size_t(bytes), cudaMemcpyDeviceToDevice, m_stream),
          "a message");
    check(cudaFreeAsync(copy, m_stream), "a message");
  }

  void check(cudaError_t e, const char* what) const { checkCuda(e, rank(), what); }
  void nccl(ncclResult_t r, const std::string& what) const { checkNccl(r, m_comm, rank(), what); }

  std::map<uint32_t, std::deque<std::pair<void*, int64_t>>> m_kept;
  NcclCommunicator& m_owner;
  ncclComm_t m_comm;
  cudaStream_t m_stream;
  void* m_one = nullptr;
  cudaEvent_t m_issued = nullptr;
  Lane m_lanes[2];
};

std::unique_ptr<Communicator> onStream(NcclCommunicator& owner) {
  return std::make_unique<NcclOnStream>(owner);
}

std::string hex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<const unsigned char*>(data)[i];
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

}  // namespace

std::unique_ptr<Communicator> connectNccl(Device& device, int rank, int size,
                                          const std::function<void(const std::string&)>& publish,
                                          const std::function<std::string()>& fetch) {
  auto fail = [&](const std::string& what, ncclResult_t r) {
    return CommError("rank " + std::to_string(rank) + ": " + what + ": " + ncclGetErrorString(r));
  };
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      throw fail("making NCCL's unique id", r);
    publish(hex(&id, sizeof id));
  } else {
    std::string text = fetch();
    if (text.size() != 2 * sizeof id)
      throw CommError("rank " + std::to_string(rank) +
                      ": NCCL's unique id from rank 0 is malformed");
    for (size_t i = 0; i < sizeof id; ++i)
      id.internal[i] = char(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  }
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = ncclCommInitRank(&comm, size, id, rank); r != ncclSuccess)
    throw fail("joining the NCCL communicator", r);
  return std::make_unique<NcclCommunicator>(device, comm, rank, size);
}

}  // namespace netloom::cuda
