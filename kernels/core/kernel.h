// Kernels per (op, device), as ordered lists: the fastest first, a reference last.
// Each kernel may decline a configuration with a stated reason; the compiler takes
// the first that accepts and `--explain` prints why the others declined.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/core/attrs.h"
#include "kernels/core/tensor.h"

namespace netloom {

struct TensorDesc {
  Shape shape;
  DType dtype = DType::F32;
  Device device;
};

// What a kernel is chosen and prepared for: known at plan time, fixed afterwards.
struct KernelSig {
  const Attrs* attrs = nullptr;
  std::vector<TensorDesc> in;
  std::vector<TensorDesc> out;
};

// Per-step values the runtime passes to every launch.
struct StepContext {
  int64_t step = 0;      // 1-based optimizer step
  double lr = 0.0;       // learning rate for this step
  uint64_t seed = 0;     // run seed; kernels derive counter-based random streams
  bool training = true;  // Dropout and friends read this
};

struct KernelIO {
  const TensorRef* in = nullptr;
  const TensorRef* out = nullptr;
  size_t nin = 0, nout = 0;
  const StepContext* ctx = nullptr;
};

using KernelFn = std::function<void(const KernelIO&)>;

struct KernelImpl {
  std::string name;
  // Empty when the kernel takes the configuration, else the reason it declines.
  std::function<std::string(const KernelSig&)> decline;
  // Prepares plan-time state and returns the launch function.
  std::function<KernelFn(const KernelSig&)> prepare;
};

class KernelRegistry {
 public:
  static KernelRegistry& instance();  // built once by registerAll*()

  void add(const std::string& op, DeviceKind device, KernelImpl impl);
  const std::vector<KernelImpl>* list(const std::string& op, DeviceKind device) const;

 private:
  std::map<std::pair<std::string, DeviceKind>, std::vector<KernelImpl>> m_lists;
};

// Explicit registration lists, one per device backend (no static initialisers).
void registerCpuKernels(KernelRegistry& r);

}  // namespace netloom
