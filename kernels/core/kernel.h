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

// How a 4-D N×C×H×W tensor lies in memory. Plain is row-major NCHW, as every
// shape-level op and the user see it; Blocked16 is oneDNN's nChw16c (channels in
// blocks of 16 innermost), which its vectorised convolutions, pooling and batch
// normalisation run on. The compiler's layout pass assigns Blocked16 only where C
// is a multiple of 16, so both layouts hold the same bytes count.
enum class Layout : uint8_t { Plain, Blocked16 };

const char* layoutName(Layout l);  // "nchw", "nChw16c"

struct TensorDesc {
  Shape shape;
  DType dtype = DType::F32;
  Device device;
  Layout layout = Layout::Plain;
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
  // Whether the kernel reads the signature's layouts; the others take only plain
  // tensors and are skipped for a signature with a blocked one.
  bool anyLayout = false;
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
