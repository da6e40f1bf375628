#include <algorithm>
#include <mutex>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/cuda_util.h"

namespace netloom::cuda {

std::string describe(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

namespace {

std::string versionText(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

DeviceInfo infoOf(int index) {
  DeviceInfo d;
  d.id = DeviceId{DeviceKind::Cuda, index};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    d.name = "unreadable CUDA device";
    return d;
  }
  d.name = prop.name;
  d.computeCapability = prop.major * 10 + prop.minor;
  size_t freeBytes = 0, totalBytes = 0;
  int previous = 0;
  cudaGetDevice(&previous);
  if (cudaSetDevice(index) == cudaSuccess &&
      cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess) {
    d.freeBytes = int64_t(freeBytes);
    d.totalBytes = int64_t(totalBytes);
  } else {
    cudaGetLastError();
    d.totalBytes = int64_t(prop.totalGlobalMem);
  }
  cudaSetDevice(previous);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  d.detail = "compute capability " + std::to_string(prop.major) + "." + std::to_string(prop.minor) +
             ", driver " + versionText(driver) + ", runtime " + versionText(runtime);
  return d;
}

// This machine's CUDA devices, or why there are none. The count starts at 0: without
// a driver cudaGetDeviceCount fails and leaves it as it was.
DeviceProbe probe() {
  DeviceProbe p;
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    cudaGetLastError();
    p.unavailable = "no NVIDIA driver";
    return p;
  }
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    p.unavailable = e == cudaErrorNoDevice ? "no CUDA device" : describe(e);
    return p;
  }
  if (count == 0) p.unavailable = "no CUDA device";
  for (int i = 0; i < count; ++i) p.devices.push_back(infoOf(i));
  return p;
}

// A step recorded on the stream as a CUDA Graph, instantiated once and launched as
// one unit: the host issues one call per step instead of one per kernel.
class GraphReplay final : public Replay {
 public:
  GraphReplay(cudaGraphExec_t exec, cudaStream_t stream, int device)
      : m_exec(exec), m_stream(stream), m_device(device) {}
  ~GraphReplay() override { cudaGraphExecDestroy(m_exec); }
  void launch() override {
    NL_CUDA(cudaSetDevice(m_device));
    NL_CUDA(cudaGraphLaunch(m_exec, m_stream));
  }

 private:
  cudaGraphExec_t m_exec;
  cudaStream_t m_stream;
  int m_device;
};

// One GPU: a main stream every kernel and copy of a step is issued on, and a copy
// stream for uploads, ordered against it by two events.
class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index) : m_index(index) {}
  ~CudaDevice() override {
    cudaSetDevice(m_index);
    if (m_stream) cudaStreamDestroy(m_stream);
    if (m_copy) cudaStreamDestroy(m_copy);
    if (m_uploaded) cudaEventDestroy(m_uploaded);
    if (m_consumed) cudaEventDestroy(m_consumed);
    if (m_deviceTotal) cudaFree(m_deviceTotal);
    if (m_guardTotal) cudaFree(m_guardTotal);
    if (m_hostTotal) cudaFreeHost(m_hostTotal);
  }

  std::string init() {
    auto fail = [](cudaError_t e) {
      cudaGetLastError();
      return describe(e);
    };
    if (cudaError_t e = cudaSetDevice(m_index); e != cudaSuccess) return fail(e);
    if (cudaError_t e = cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking);
        e != cudaSuccess)
      return fail(e);
    if (cudaError_t e = cudaStreamCreateWithFlags(&m_copy, cudaStreamNonBlocking); e != cudaSuccess)
      return fail(e);
    if (cudaError_t e = cudaEventCreateWithFlags(&m_uploaded, cudaEventDisableTiming);
        e != cudaSuccess)
      return fail(e);
    if (cudaError_t e = cudaEventCreateWithFlags(&m_consumed, cudaEventDisableTiming);
        e != cudaSuccess)
      return fail(e);
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&m_deviceTotal), sizeof(double));
        e != cudaSuccess)
      return fail(e);
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&m_guardTotal), sizeof(double));
        e != cudaSuccess)
      return fail(e);
    if (cudaError_t e = cudaMallocHost(reinterpret_cast<void**>(&m_hostTotal), sizeof(double));
        e != cudaSuccess)
      return fail(e);
    return {};
  }

  DeviceId id() const override { return DeviceId{DeviceKind::Cuda, m_index}; }
  bool hostAddressable() const override { return false; }
  DeviceInfo info() const override { return infoOf(m_index); }
  int64_t memoryInUse() const override {
    select();
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return int64_t(totalBytes - freeBytes);
  }

  void* allocate(int64_t bytes) override {
    select();
    void* p = nullptr;
    if (cudaMalloc(&p, size_t(std::max<int64_t>(bytes, 256))) != cudaSuccess) {
      cudaGetLastError();  // out of memory is the caller's to report
      return nullptr;
    }
    return p;
  }
  // Never throws: called from destructors, which may run while an earlier CUDA error
  // unwinds the run (whose Failed event then says what went wrong).
  void release(void* p) override {
    cudaSetDevice(m_index);
    cudaFree(p);
    cudaGetLastError();
  }
  void* allocateHost(int64_t bytes) override {
    select();
    void* p = nullptr;
    if (cudaMallocHost(&p, size_t(std::max<int64_t>(bytes, 256))) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void releaseHost(void* p) override {
    cudaFreeHost(p);
    cudaGetLastError();
  }

  void copyToDevice(void* dst, const void* src, int64_t bytes) override {
    copy(dst, src, bytes, cudaMemcpyHostToDevice, m_stream);
  }
  void copyToHost(void* dst, const void* src, int64_t bytes) override {
    copy(dst, src, bytes, cudaMemcpyDeviceToHost, m_stream);
  }
  void copyWithin(void* dst, const void* src, int64_t bytes) override {
    copy(dst, src, bytes, cudaMemcpyDeviceToDevice, m_stream);
  }
  void copyRows(void* dst, int64_t dstPitch, const void* src, int64_t srcPitch, int64_t width,
                int64_t rows) override {
    if (width <= 0 || rows <= 0) return;
    select();
    NL_CUDA(cudaMemcpy2DAsync(dst, size_t(dstPitch), src, size_t(srcPitch), size_t(width),
                              size_t(rows), cudaMemcpyDeviceToDevice, m_stream));
  }
  void fill(void* dst, uint8_t byte, int64_t bytes) override {
    if (bytes <= 0) return;
    select();
    NL_CUDA(cudaMemsetAsync(dst, byte, size_t(bytes), m_stream));
  }
  void synchronize() override {
    select();
    NL_CUDA(cudaStreamSynchronize(m_stream));
  }
  void* stream() const override { return m_stream; }

  void checkFinite(const TensorRef& loss, const std::vector<TensorRef>& grads,
                   float* guard) override {
    select();
    cuda::checkFinite(loss, grads, guard, m_stream, m_guardTotal);
  }

  double sumOfSquares(const std::vector<TensorRef>& tensors) override {
    select();
    return cuda::sumOfSquares(tensors, m_stream, m_deviceTotal, m_hostTotal);
  }

  std::unique_ptr<Replay> capture(const std::function<void()>& issue, std::string& why) override {
    select();
    if (cudaError_t e = cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeThreadLocal);
        e != cudaSuccess) {
      why = describe(e);
      cudaGetLastError();
      return nullptr;
    }
    std::string issueError;
    try {
      issue();
    } catch (const std::exception& e) {
      issueError = e.what();  // a launch that cannot be recorded
    }
    cudaGraph_t graph = nullptr;
    cudaError_t ended = cudaStreamEndCapture(m_stream, &graph);
    if (!issueError.empty() || ended != cudaSuccess || !graph) {
      why = !issueError.empty() ? issueError : describe(ended);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      why = describe(made);
      cudaGetLastError();
      return nullptr;
    }
    return std::make_unique<GraphReplay>(exec, m_stream, m_index);
  }

  void upload(void* dst, const void* src, int64_t bytes) override {
    select();
    NL_CUDA(cudaStreamWaitEvent(m_copy, m_consumed, 0));
    copy(dst, src, bytes, cudaMemcpyHostToDevice, m_copy);
    NL_CUDA(cudaEventRecord(m_uploaded, m_copy));
  }
  void waitUploads() override {
    select();
    NL_CUDA(cudaStreamWaitEvent(m_stream, m_uploaded, 0));
  }
  void uploadsAfterWork() override {
    select();
    NL_CUDA(cudaEventRecord(m_consumed, m_stream));
  }
  void writeValues(void* dst, const void* src, int bytes) override {
    select();
    cuda::writeValues(dst, src, bytes, m_stream);
  }
  void finishUploads() override {
    select();
    NL_CUDA(cudaStreamSynchronize(m_copy));
  }

 private:
  // The runtime keeps one current device per host thread: every call names ours.
  void select() const { NL_CUDA(cudaSetDevice(m_index)); }
  void copy(void* dst, const void* src, int64_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    if (bytes <= 0) return;
    select();
    NL_CUDA(cudaMemcpyAsync(dst, src, size_t(bytes), kind, s));
  }

  int m_index;
  cudaStream_t m_stream = nullptr, m_copy = nullptr;
  cudaEvent_t m_uploaded = nullptr, m_consumed = nullptr;
  double* m_deviceTotal = nullptr;  // sumOfSquares' scratch
  double* m_hostTotal = nullptr;    // pinned
  double* m_guardTotal = nullptr;   // checkFinite's, which a recorded step holds
};

}  // namespace

Backend backend() {
  Backend b;
  b.kind = DeviceKind::Cuda;
  b.name = "cuda";
  b.registerKernels = registerKernels;
  b.probe = [] {
    // Probing creates contexts, which is slow: once per process.
    static std::once_flag once;
    static DeviceProbe result;
    std::call_once(once, [] { result = probe(); });
    DeviceProbe now = result;
    for (DeviceInfo& d : now.devices) d = infoOf(d.id.index);  // memory as of now
    return now;
  };
  b.open = [](int index, std::string& error) -> std::unique_ptr<Device> {
    auto device = std::make_unique<CudaDevice>(index);
    error = device->init();
    if (!error.empty()) return nullptr;
    return device;
  };
  return b;
}

}  // namespace netloom::cuda
