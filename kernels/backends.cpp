// The backends of this build, one line each; the core knows none of them.
#include "kernels/core/device.h"
#include "kernels/core/kernel.h"
#include "kernels/cpu/backend.h"
#ifdef NETLOOM_WITH_CUDA
#include "kernels/cuda/backend.h"
#endif

namespace netloom {

namespace {

// A kind of device this build cannot drive: parsed, listed, and refused with why.
[[maybe_unused]] Backend absent(DeviceKind kind, std::string name, std::string why) {
  Backend b;
  b.kind = kind;
  b.name = std::move(name);
  b.registerKernels = [](KernelRegistry&) {};
  b.probe = [why] { return DeviceProbe{{}, why}; };
  b.open = [why](int, std::string& error) -> std::unique_ptr<Device> {
    error = why;
    return nullptr;
  };
  return b;
}

}  // namespace

const std::vector<Backend>& backends() {
  static const std::vector<Backend> list = {
      cpu::backend(),
#ifdef NETLOOM_WITH_CUDA
      cuda::backend(),
#else
      absent(DeviceKind::Cuda, "cuda", "built without CUDA"),
#endif
  };
  return list;
}

}  // namespace netloom
