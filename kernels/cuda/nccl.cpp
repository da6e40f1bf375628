#include "kernels/cuda/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <map>
#include <vector>

namespace netloom::cuda {

namespace {

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Device& device, ncclComm_t comm, int rank, int size)
      : m_device(device),
        m_comm(comm),
        m_rank(rank),
        m_size(size),
        m_compute(static_cast<cudaStream_t>(device.stream())) {
    check(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking), "creating its stream");
  }
  ~NcclCommunicator() override {
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
      ncclResult_t res = ncclGroupStart();
      for (int k = 0; k < m_size && res == ncclSuccess; ++k) {
        res = ncclSend(static_cast<char*>(d) + k * bytes, size_t(bytes), ncclUint8, k, m_comm,
                       m_stream);
        if (res == ncclSuccess)
          res = ncclRecv(static_cast<char*>(r) + k * bytes, size_t(bytes), ncclUint8, k, m_comm,
                         m_stream);
      }
      const ncclResult_t end = ncclGroupEnd();
      return res != ncclSuccess ? res : end;
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

  void check(cudaError_t e, const char* what) const {
    if (e != cudaSuccess)
      throw CommError("rank " + std::to_string(m_rank) + ": " + what + ": " +
                      cudaGetErrorString(e));
  }
  void nccl(ncclResult_t r, const std::string& what) const {
    if (r != ncclSuccess)
      throw CommError("rank " + std::to_string(m_rank) + ": NCCL failed on " + what + ": " +
                      ncclGetErrorString(r) + " (" + ncclGetLastError(m_comm) + ")");
  }

  Device& m_device;
  ncclComm_t m_comm;
  int m_rank, m_size;
  cudaStream_t m_compute, m_stream = nullptr;
  std::map<std::string, Bucket> m_buckets;
  void* m_staging = nullptr;
  int64_t m_stagingBytes = 0;
};

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
