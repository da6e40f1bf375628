#include "kernels/cpu/backend.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "kernels/core/collectives.h"
#include "kernels/core/widen.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/half.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace netloom {

void cpu::configureThreads(int threads) {
  omp_set_num_threads(threads);
#if defined(__SSE__)
#pragma omp parallel num_threads(threads)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // flush-to-zero and denormals-are-zero
#endif
}

KernelImpl cpu::widenBf16(const KernelImpl& inner) {
  return widenedTwin(inner, [](const KernelSig&) {
    return HalfCopies{widenElements, narrowElements};
  });
}

namespace {

std::string processorName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "CPU" : line.substr(start);
      }
    }
  return "CPU";
}

// Main memory, where every buffer is host memory and every copy a memcpy that is
// complete on return.
class CpuDevice final : public Device {
 public:
  DeviceId id() const override { return DeviceId{}; }
  bool hostAddressable() const override { return true; }

  DeviceInfo info() const override {
    DeviceInfo d;
    d.name = processorName();
    struct sysinfo si {};
    if (sysinfo(&si) == 0) {
      d.totalBytes = int64_t(si.totalram) * si.mem_unit;
      d.freeBytes = int64_t(si.freeram + si.bufferram) * si.mem_unit;
    }
    d.detail = std::to_string(omp_get_num_procs()) + " threads";
    return d;
  }

  // Below both bounds a kernel takes a few microseconds on one core, about what
  // waking the pool's other threads and meeting them again costs. Above them it is
  // shared: with the batches assembled by the step's own threads (BatchLoader's
  // onCaller), no other thread of the run competes for a core, and the MLP's
  // 64 × 128 × 256 products (4 MFLOP) gain from the second core.
  bool runsAlone(double flops, int64_t bytes) const override {
    return flops < 1e6 && bytes < (int64_t(1) << 18);
  }
  KernelFn alone(KernelFn fn) const override {
    return [fn = std::move(fn)](const KernelIO& io) {
      const int threads = omp_get_max_threads();
      if (threads == 1) return fn(io);
      struct Restore {
        int threads;
        ~Restore() { omp_set_num_threads(threads); }
      } restore{threads};
      omp_set_num_threads(1);
      fn(io);
    };
  }

  int64_t memoryInUse() const override {
    std::ifstream in("/proc/self/statm");
    int64_t pages = 0, resident = 0;
    in >> pages >> resident;
    return resident * int64_t(sysconf(_SC_PAGESIZE));
  }

  void* allocate(int64_t bytes) override {
    size_t rounded = (size_t(std::max<int64_t>(bytes, 1)) + 63) / 64 * 64;
    return std::aligned_alloc(64, rounded);
  }
  void release(void* p) override { std::free(p); }
  void* allocateHost(int64_t bytes) override { return allocate(bytes); }
  void releaseHost(void* p) override { std::free(p); }

  void copyToDevice(void* dst, const void* src, int64_t bytes) override {
    copyShared(dst, src, bytes);
  }
  void copyToHost(void* dst, const void* src, int64_t bytes) override { copy(dst, src, bytes); }
  void copyWithin(void* dst, const void* src, int64_t bytes) override { copy(dst, src, bytes); }
  void fill(void* dst, uint8_t byte, int64_t bytes) override {
    if (bytes > 0) std::memset(dst, byte, size_t(bytes));
  }
  void synchronize() override {}

  void checkFinite(const TensorRef& loss, const std::vector<TensorRef>& grads,
                   float* guard) override {
    if (!std::isfinite(loss.f32()[0]) || !allFinite(grads)) *guard = 0.f;
  }

  // A float is NaN or ±inf exactly when its exponent bits are all set: an integer
  // test OR-ed over the elements, which vectorises (a float sum does not, without
  // reassociation), on every thread, where the double squares took a few percent of
  // an MLP's step on one.
  bool allFinite(const std::vector<TensorRef>& tensors) override {
    std::atomic<bool> finite{true};
    for (const TensorRef& t : tensors) {
      const auto* x = static_cast<const uint32_t*>(t.data);
      cpu::parallelForElements(t.numel(), [&](int64_t lo, int64_t hi) {
        uint32_t bad = 0;
        for (int64_t i = lo; i < hi; ++i) bad |= uint32_t((~x[i] & 0x7f800000u) == 0);
        if (bad) finite.store(false, std::memory_order_relaxed);
      });
    }
    return finite.load();
  }

  double sumOfSquares(const std::vector<TensorRef>& tensors) override {
    double total = 0;
    for (const TensorRef& t : tensors) {
      const float* x = t.f32();
      const int64_t n = t.numel();
#pragma omp simd reduction(+ : total)
      for (int64_t i = 0; i < n; ++i) total += double(x[i]) * double(x[i]);
    }
    return total;
  }

 private:
  static void copy(void* dst, const void* src, int64_t bytes) {
    if (bytes > 0 && dst != src) std::memcpy(dst, src, size_t(bytes));
  }
  // Into a program's memory from the host's (a batch, a few hundred KB, from the
  // trainer's thread) on every thread: alone, it kept the others waiting for the
  // step's first kernel. Copies within, which boxings make on threads of their own,
  // stay on the calling thread.
  static void copyShared(void* dst, const void* src, int64_t bytes) {
    if (bytes <= 0 || dst == src) return;
    cpu::parallelForElements(bytes / 4, [&](int64_t lo, int64_t hi) {
      if (hi == bytes / 4) hi = (bytes + 3) / 4;  // the last thread takes the odd bytes
      std::memcpy(static_cast<char*>(dst) + lo * 4, static_cast<const char*>(src) + lo * 4,
                  size_t(std::min(bytes, hi * 4) - lo * 4));
    });
  }
};

void registerCpuKernels(KernelRegistry& r) {
  cpu::registerGemm(r);
  cpu::registerElementwise(r);
  cpu::registerLosses(r);
  cpu::registerShape(r);
  cpu::registerOptimizers(r);
  cpu::registerConv(r);
  cpu::registerLayouts(r);
  cpu::registerPoolNorm(r);
  cpu::registerSequence(r);
  cpu::registerRmsNorm(r);
  cpu::registerAttention(r);
  registerCollectiveKernels(r, DeviceKind::Cpu);
  // Last: every float kernel's twin for bf16 tensors, after the kernels that read them.
  r.widenHalf(DeviceKind::Cpu, cpu::widenBf16);
}

}  // namespace

Backend cpu::backend() {
  Backend b;
  b.kind = DeviceKind::Cpu;
  b.name = "cpu";
  b.registerKernels = registerCpuKernels;
  b.probe = [] {
    DeviceProbe p;
    CpuDevice probe;
    p.devices.push_back(probe.info());
    return p;
  };
  b.open = [](int, std::string&) -> std::unique_ptr<Device> {
    return std::make_unique<CpuDevice>();
  };
  return b;
}

}  // namespace netloom
