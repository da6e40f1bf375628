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

class Communicator;

class Device;

// How a tensor lies in memory. Plain is row-major, as every shape-level op, the
// user and PyTorch see it (NCHW for activations, O×I×kh×kw for weights). Blocked16
// is oneDNN's nChw16c for 4-D activations (channels in blocks of 16 innermost),
// which its vectorised convolutions, pooling and normalisation run on. Packed is a
// parameter stored, with its gradient and optimizer state, in the layout a
// backend's kernels prefer, named by TensorDesc::format. A Blocked16 tensor whose
// channels do not divide by 16 pads its last block: it holds N·⌈C/16⌉·16·H·W
// elements (storedElements), the padding zero, which every kernel that writes one
// keeps so (oneDNN's rule for its padded layouts). Every other layout holds numel.
enum class Layout : uint8_t { Plain, Blocked16, Packed };

struct TensorDesc {
  Shape shape;
  DType dtype = DType::F32;
  DeviceId device;
  Layout layout = Layout::Plain;
  std::string format = {};  // Packed only: the backend's name for the layout

  bool sameLayout(const TensorDesc& o) const { return layout == o.layout && format == o.format; }
};

std::string layoutName(const TensorDesc& d);  // "nchw", "nChw16c", or the packed format

// Channels rounded up to whole blocks of 16: what Blocked16 stores of C.
inline int64_t paddedChannels(int64_t c) {
  return (c + 15) / 16 * 16;
}

// Whether `d` is Blocked16 with a padded last block of channels.
inline bool paddedBlocked(const TensorDesc& d) {
  return d.layout == Layout::Blocked16 && d.shape.size() == 4 && d.shape[1] % 16 != 0;
}

// The elements a tensor of `d` holds in memory: numel, or more for padded blocks.
inline int64_t storedElements(const TensorDesc& d) {
  if (!paddedBlocked(d)) return numel(d.shape);
  const Shape& s = d.shape;
  return s[0] * paddedChannels(s[1]) * s[2] * s[3];
}

// The bytes a tensor of `d` holds.
inline int64_t bytesOf(const TensorDesc& d) {
  return storedElements(d) * int64_t(dtypeSize(d.dtype));
}

// What a kernel is chosen and prepared for: known at plan time, fixed afterwards.
struct KernelSig {
  const Attrs* attrs = nullptr;
  std::vector<TensorDesc> in;
  std::vector<TensorDesc> out;
  Device* device = nullptr;  // where it runs: a backend's kernels take its stream from it
  // Under autocast (train.precision bf16 or fp16) the matrix ops read 16-bit values,
  // which TF32 holds exactly: a GPU's TF32 tensor cores then lose nothing more.
  bool autocast = false;
  // A data-parallel run's collectives (the gradient buckets' kernels); null alone.
  Communicator* comm = nullptr;
  // Under tensor parallelism: the ranks a tensor is split over (the boxing kernels),
  // and the ranks holding the same parts of it, which sum the split parameters'
  // gradients (null: none besides this one).
  Communicator* tensorComm = nullptr;
  Communicator* dataComm = nullptr;
  // Under pipeline parallelism: the ranks of the pipeline, stage k on rank k.
  Communicator* stageComm = nullptr;
};

// Per-step values the runtime passes to every launch.
struct StepContext {
  int64_t step = 0;      // 1-based optimizer step
  double lr = 0.0;       // learning rate for this step
  uint64_t seed = 0;     // run seed; kernels derive counter-based random streams
  bool training = true;  // Dropout and friends read this
  // The loss gradient's seed: this rank's share of the step's global batch, so the
  // gradients summed across ranks are those of the global batch's mean loss.
  double lossWeight = 1.0;
};

// The per-step values of a StepContext as kernels on a device read them: in device
// memory, written before each step, so that a launch sequence recorded once (a CUDA
// Graph) replays with each step's own values. A device kernel reads these, never the
// host's ctx, for anything that changes from step to step.
struct DeviceStepValues {
  int64_t step = 0;
  double lr = 0.0;
  uint64_t seed = 0;
  double lossWeight = 1.0;
};

struct KernelIO {
  const TensorRef* in = nullptr;
  const TensorRef* out = nullptr;
  size_t nin = 0, nout = 0;
  const StepContext* ctx = nullptr;
  void* workspace = nullptr;  // KernelImpl::workspace bytes of the planned arena
  int64_t workspaceBytes = 0;
  const DeviceStepValues* stepValues = nullptr;  // device memory; null on the CPU
  // An optimizer update's guard, in device memory: 1 while every step checked so far
  // was finite, 0 from the first that was not, and then the update does nothing.
  // Null: update.
  const float* guard = nullptr;
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
  // The packed format (TensorDesc::format) the kernel would have parameter input
  // `input` stored in for this signature, or empty where PyTorch's layout suits it.
  std::function<std::string(const KernelSig&, int input)> packs = nullptr;
  // What `--explain` adds about the prepared kernel (the library's implementation,
  // conversions it makes inside a launch); may be null.
  std::function<std::string(const KernelSig&)> detail = nullptr;
  // Scratch memory a launch needs (a cuDNN algorithm's workspace), planned in the
  // arena for the launch alone and passed as KernelIO::workspace; null: none. Asked
  // before prepare(), which must choose the algorithm this was asked for.
  std::function<int64_t(const KernelSig&)> workspace = nullptr;
  // A multi-tensor kernel (the optimizer updates): consecutive launches of it with
  // the same attributes become one launch that does all of theirs. Given each one's
  // signature and its bound inputs, returns that launch; null: launched one by one.
  std::function<KernelFn(const std::vector<KernelSig>&, const std::vector<std::vector<TensorRef>>&)>
      group = nullptr;
  // Whether the kernel reads and writes bf16 tensors where its signature has them. The
  // registry has every other kernel decline a signature with one (it would read their
  // bits as floats); a device may give each kernel a widened twin for the bf16 tensors
  // it does not take itself (KernelRegistry::widenHalf).
  bool halfTensors = false;
  // A kernel's widened twin: it converts the bf16 tensors of its signature to float
  // and back around the kernel run on floats, in its launch's workspace.
  bool widened = false;
};

// Whether any tensor of `s` is bf16.
bool hasHalfTensors(const KernelSig& s);

// `s` with its bf16 tensors as float: what a widened kernel asks its float kernel.
KernelSig widenedSig(const KernelSig& s);

class KernelRegistry {
 public:
  // Built on first use from every backend's registration list.
  static KernelRegistry& instance();

  void add(const std::string& op, DeviceKind device, KernelImpl impl);
  const std::vector<KernelImpl>* list(const std::string& op, DeviceKind device) const;
  // Appends to each of `device`'s lists a widened twin of each kernel there, made by
  // `widen`, for the bf16 tensors the kernel does not read itself: after every kernel
  // of its own, the reference's twin last.
  void widenHalf(DeviceKind device, const std::function<KernelImpl(const KernelImpl&)>& widen);
  // The ops with kernels on `device`.
  std::vector<std::string> ops(DeviceKind device) const;

 private:
  std::map<std::pair<std::string, DeviceKind>, std::vector<KernelImpl>> m_lists;
};

// The CPU's Reorder kernel prepared for converting a host tensor of `from` into the
// layout of `to` (its launch takes the two as its input and output); null when none
// takes the pair.
KernelFn layoutConverter(const TensorDesc& from, const TensorDesc& to);

// Copies a tensor of `from`'s shape, in host memory, from one layout into another
// through the CPU's Reorder kernel; false when none takes the pair.
bool convertLayout(const TensorDesc& from, const void* src, const TensorDesc& to, void* dst);

}  // namespace netloom
