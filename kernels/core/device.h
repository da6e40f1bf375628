// The one seam between the engine and the hardware it runs on. A Device allocates,
// copies and orders work; the engine's arenas, parameters and optimizer state live
// in its memory, and batches and scalars cross it only by the copies below. Each
// backend (kernels/cpu, kernels/cuda) implements it and registers its kernels; the
// list of backends is kernels/backends.cpp, and nothing in the core names one.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/core/kernel.h"
#include "kernels/core/tensor.h"

namespace netloom {

class KernelRegistry;

// What `netloom-train --list-devices` prints of one device.
struct DeviceInfo {
  DeviceId id;
  std::string name;           // "NVIDIA H200", "AMD EPYC 7B13"
  int64_t totalBytes = 0;     // memory the device has
  int64_t freeBytes = 0;      // of which free now
  std::string detail;         // "compute capability 9.0, driver 13.0", "16 threads"
  int computeCapability = 0;  // major*10+minor on CUDA; 0 elsewhere
};

// Work recorded once and launched again as a whole (a CUDA Graph).
class Replay {
 public:
  virtual ~Replay() = default;
  virtual void launch() = 0;
};

// Copies and fills are ordered on the device's stream, in the order they are
// issued, with every kernel launched on it. One thread at a time issues work to a
// device (the run's): its stream and library handles are not shared between threads. On a device
// whose memory the host cannot address they may return before they complete: call synchronize()
// before reading what copyToHost wrote, or before reusing the host memory a copy reads.
class Device {
 public:
  virtual ~Device() = default;

  virtual DeviceId id() const = 0;
  // Whether the host reads and writes this device's memory directly (the CPU):
  // then every copy is complete on return and synchronize() does nothing.
  virtual bool hostAddressable() const = 0;
  // Name and memory, as of now.
  virtual DeviceInfo info() const = 0;
  // Bytes in use on the device now (on the CPU: this process's resident memory);
  // cheap enough to ask during a run.
  virtual int64_t memoryInUse() const = 0;

  // Device memory aligned for any kernel (64 bytes at least); null when it cannot
  // be had. Zero bytes gives a valid, distinct pointer.
  virtual void* allocate(int64_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Host memory that copies to and from this device read fastest (pinned on CUDA).
  virtual void* allocateHost(int64_t bytes) = 0;
  virtual void releaseHost(void* p) = 0;

  virtual void copyToDevice(void* dst, const void* src, int64_t bytes) = 0;
  virtual void copyToHost(void* dst, const void* src, int64_t bytes) = 0;
  virtual void copyWithin(void* dst, const void* src, int64_t bytes) = 0;
  virtual void fill(void* dst, uint8_t byte, int64_t bytes) = 0;
  // `rows` runs of `width` bytes within the device, read every `srcPitch` bytes from
  // `src` and written every `dstPitch` bytes to `dst`: a strided copy in one go where
  // the device has one (cudaMemcpy2DAsync), else row by row.
  virtual void copyRows(void* dst, int64_t dstPitch, const void* src, int64_t srcPitch,
                        int64_t width, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r)
      copyWithin(static_cast<char*>(dst) + r * dstPitch,
                 static_cast<const char*>(src) + r * srcPitch, width);
  }
  // A few bytes (at most 64) to device memory, ordered like a copy; `src` may be
  // reused as soon as this returns, and the host does not wait.
  virtual void writeValues(void* dst, const void* src, int bytes) { copyToDevice(dst, src, bytes); }
  virtual void synchronize() = 0;
  // The native stream every kernel launches on (a cudaStream_t); null on the CPU.
  virtual void* stream() const { return nullptr; }

  // Σ x² in double over float tensors in this device's memory, after the work issued
  // so far (a NaN or infinity anywhere makes it non-finite): the check between a
  // step's gradients and its updates, without copying the gradients to the host.
  virtual double sumOfSquares(const std::vector<TensorRef>& tensors) = 0;
  // Whether every element of float tensors in this device's memory is finite, after
  // the work issued so far: sumOfSquares's check without its sum.
  virtual bool allFinite(const std::vector<TensorRef>& tensors) {
    return std::isfinite(sumOfSquares(tensors));
  }
  // Issues, with no wait: `*guard` = 0 when the scalar `loss` or Σ g² over `grads` is
  // not finite (it is never set back to 1 here). The same check, on the device.
  virtual void checkFinite(const TensorRef& loss, const std::vector<TensorRef>& grads,
                           float* guard) = 0;

  // Uploads on a second stream, so that the next batch's copy overlaps the step
  // running on the first. waitUploads() orders later work on the main stream after
  // every upload issued so far; uploadsAfterWork() orders later uploads after the
  // main stream's work issued so far (a buffer is overwritten only once read);
  // finishUploads() waits on the host until the uploads are done (their host memory
  // may then be reused). Where there is one stream these are plain copies.
  // Records the work `issue` puts on the stream, without running it, as one unit to
  // launch again and again; null with `why` set where the device cannot (then the
  // caller issues the work itself).
  virtual std::unique_ptr<Replay> capture(const std::function<void()>& issue, std::string& why) {
    why = "the device launches each kernel itself";
    return nullptr;
  }

  // Whether a kernel of `flops` floating-point operations over `bytes` of tensors is
  // best run by the calling thread alone (on the CPU, where waking the pool's other
  // threads costs more than they save), and that kernel made so. Elsewhere never.
  virtual bool runsAlone(double flops, int64_t bytes) const { return false; }
  virtual KernelFn alone(KernelFn fn) const { return fn; }

  virtual void upload(void* dst, const void* src, int64_t bytes) { copyToDevice(dst, src, bytes); }
  virtual void waitUploads() {}
  virtual void uploadsAfterWork() {}
  virtual void finishUploads() {}
};

// Memory on a device, released when it goes: the ParamStore's tensors, staging.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Null data (and a false ok()) when the memory cannot be had.
  DeviceBuffer(Device& device, int64_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void reset();
  bool ok() const { return m_data != nullptr; }
  void* data() const { return m_data; }
  float* f32() const { return static_cast<float*>(m_data); }
  int64_t bytes() const { return m_bytes; }
  Device* device() const { return m_device; }

 private:
  Device* m_device = nullptr;
  void* m_data = nullptr;
  int64_t m_bytes = 0;
};

// A device's memory as host code reads it: `count` floats at `src`, copied out
// where the host cannot address it.
std::vector<float> readFloats(Device& device, const void* src, int64_t count);
// The same of a tensor stored as `type`: float32 as it is, bf16 widened exactly.
std::vector<float> readAsFloats(Device& device, const void* src, DType type, int64_t count);
void writeFloats(Device& device, void* dst, const float* values, int64_t count);

// This machine's devices of one kind, or why there are none.
struct DeviceProbe {
  std::vector<DeviceInfo> devices;
  std::string unavailable;  // "no NVIDIA driver", "built without CUDA", a CUDA error
};

// One backend: a folder of kernels and the device they run on.
struct Backend {
  DeviceKind kind = DeviceKind::Cpu;
  std::string name;  // "cpu", "cuda": how DeviceId::toString spells the kind
  void (*registerKernels)(KernelRegistry&) = nullptr;
  std::function<DeviceProbe()> probe;
  // Opens device `index` (known to exist from probe()); null with `error` set when
  // it cannot be used.
  std::function<std::unique_ptr<Device>(int index, std::string& error)> open;
};

// The backends this build has, CPU first (kernels/backends.cpp).
const std::vector<Backend>& backends();
const Backend* findBackend(DeviceKind kind);

// Reads "cpu", "cuda", "cuda:N"; empty on success, else what is wrong with `text`.
std::string parseDeviceId(const std::string& text, DeviceId& out);

// The process's device for `id`, opened on first use and kept for the process's life
// (a CUDA context is costly, and plans keep pointers into its memory); null with
// `error` naming why it is unavailable ("cuda:0 is not available: no NVIDIA driver").
Device* openDevice(const DeviceId& id, std::string& error);
// The CPU, which is always there.
Device& cpuDevice();

}  // namespace netloom
