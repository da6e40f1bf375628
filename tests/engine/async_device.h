// A device for tests that keeps a GPU's rules while running the CPU's kernels: its
// memory is host memory, but the host may not read it directly (hostAddressable() is
// false), so the engine takes every path it takes on a GPU. Copies keep CUDA's
// ordering and no more: a copy to the host lands only at synchronize(); an upload
// reads its host memory only when the main stream waits for it, so host memory reused
// before finishUploads() is caught; recording a step is refused (every launch is
// issued). A run on it must give the CPU's results bit for bit.
#pragma once

#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/core/device.h"

namespace netloom::testing {

class AsyncHostDevice final : public Device {
 public:
  DeviceId id() const override { return DeviceId{}; }  // the CPU's kernels
  bool hostAddressable() const override { return false; }
  DeviceInfo info() const override {
    DeviceInfo d;
    d.name = "asynchronous test device";
    d.totalBytes = d.freeBytes = int64_t(8) << 30;
    return d;
  }
  int64_t memoryInUse() const override { return 1 << 20; }

  void* allocate(int64_t bytes) override {
    return std::aligned_alloc(64, (size_t(std::max<int64_t>(bytes, 1)) + 63) / 64 * 64);
  }
  void release(void* p) override { std::free(p); }
  void* allocateHost(int64_t bytes) override { return allocate(bytes); }
  void releaseHost(void* p) override { std::free(p); }

  void copyToDevice(void* dst, const void* src, int64_t bytes) override { copy(dst, src, bytes); }
  void copyWithin(void* dst, const void* src, int64_t bytes) override { copy(dst, src, bytes); }
  // What the stream holds at this point, delivered to the host at synchronize().
  void copyToHost(void* dst, const void* src, int64_t bytes) override {
    if (bytes <= 0) return;
    const auto* from = static_cast<const unsigned char*>(src);
    m_toHost.push_back({dst, std::vector<unsigned char>(from, from + bytes)});
  }
  void fill(void* dst, uint8_t byte, int64_t bytes) override {
    if (bytes > 0) std::memset(dst, byte, size_t(bytes));
  }
  void synchronize() override {
    for (Pending& p : m_toHost) std::memcpy(p.dst, p.bytes.data(), p.bytes.size());
    m_toHost.clear();
    synchronizations += 1;
  }
  double sumOfSquares(const std::vector<TensorRef>& tensors) override {
    synchronize();
    return cpuDevice().sumOfSquares(tensors);
  }

  // Kernels here run as they are issued: the check is ordered by running it now.
  void checkFinite(const TensorRef& loss, const std::vector<TensorRef>& grads,
                   float* guard) override {
    cpuDevice().checkFinite(loss, grads, guard);
  }

  std::unique_ptr<Replay> capture(const std::function<void()>&, std::string& why) override {
    why = "the test device records nothing";
    return nullptr;
  }
  // An upload reads the host's memory when the main stream first needs it.
  void upload(void* dst, const void* src, int64_t bytes) override {
    m_uploads.push_back({dst, src, bytes});
  }
  void waitUploads() override {
    for (const Upload& u : m_uploads) copy(u.dst, u.src, u.bytes);
    m_uploads.clear();
  }
  void finishUploads() override { waitUploads(); }

  int synchronizations = 0;

 private:
  static void copy(void* dst, const void* src, int64_t bytes) {
    if (bytes > 0 && dst != src) std::memcpy(dst, src, size_t(bytes));
  }
  struct Pending {
    void* dst;
    std::vector<unsigned char> bytes;
  };
  struct Upload {
    void* dst;
    const void* src;
    int64_t bytes;
  };
  std::vector<Pending> m_toHost;
  std::vector<Upload> m_uploads;
};

}  // namespace netloom::testing
