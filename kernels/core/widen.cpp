// A float kernel's widened twin (widen.h). The tensors live between launches in 16
// bits, so the memory plan holds half the bytes; the conversions cost a pass over them
// each launch, which a kernel that reads bf16 itself saves.
#include "kernels/core/widen.h"

#include <algorithm>
#include <memory>

namespace netloom {

namespace {

constexpr int64_t kAlign = 64;

int64_t aligned(int64_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// Where each bf16 tensor's float copy lies in the workspace (-1: the tensor is float
// and the kernel reads it where it is), after the float kernel's own scratch.
struct WidePlan {
  int64_t innerBytes = 0;
  std::vector<int64_t> in, out;
  int64_t bytes = 0;
};

WidePlan widePlan(const KernelImpl& inner, const KernelSig& s) {
  WidePlan p;
  if (inner.workspace) p.innerBytes = aligned(std::max<int64_t>(0, inner.workspace(widenedSig(s))));
  p.bytes = p.innerBytes;
  auto place = [&](const std::vector<TensorDesc>& ds, std::vector<int64_t>& at) {
    for (const TensorDesc& d : ds) {
      at.push_back(d.dtype == DType::BF16 ? p.bytes : -1);
      if (d.dtype == DType::BF16) p.bytes += aligned(storedElements(d) * int64_t(sizeof(float)));
    }
  };
  place(s.in, p.in);
  place(s.out, p.out);
  return p;
}

// The float kernel's tensors, as the signature has them with bf16 as float, made once: a
// launch only points them at the step's memory or the workspace.
struct WideTensors {
  std::vector<TensorRef> in, out;
};

std::vector<TensorRef> refsOf(const std::vector<TensorDesc>& ds) {
  std::vector<TensorRef> refs;
  for (const TensorDesc& d : ds) refs.push_back(TensorRef{nullptr, d.shape, d.dtype, d.device});
  return refs;
}

KernelFn prepareWidened(const KernelImpl& inner, const KernelSig& s, const HalfCopies& copies) {
  const WidePlan plan = widePlan(inner, s);
  KernelFn run = inner.prepare(widenedSig(s));
  std::vector<int64_t> inCount, outCount;
  for (const TensorDesc& d : s.in) inCount.push_back(storedElements(d));
  for (const TensorDesc& d : s.out) outCount.push_back(storedElements(d));
  // One launch at a time per prepared kernel (each program prepares its own).
  const KernelSig wide = widenedSig(s);
  auto refs = std::make_shared<WideTensors>(WideTensors{refsOf(wide.in), refsOf(wide.out)});
  return [plan, run, inCount, outCount, refs, copies](const KernelIO& io) {
    char* ws = static_cast<char*>(io.workspace);
    std::vector<TensorRef>&in = refs->in, &out = refs->out;
    for (size_t k = 0; k < in.size(); ++k) {
      in[k].data = plan.in[k] < 0 ? io.in[k].data : ws + plan.in[k];
      if (plan.in[k] >= 0)
        copies.widen(static_cast<const uint16_t*>(io.in[k].data), in[k].f32(), inCount[k]);
    }
    for (size_t k = 0; k < out.size(); ++k)
      out[k].data = plan.out[k] < 0 ? io.out[k].data : ws + plan.out[k];
    KernelIO inner = io;
    inner.in = in.data();
    inner.out = out.data();
    inner.workspace = plan.innerBytes > 0 ? ws : nullptr;
    inner.workspaceBytes = plan.innerBytes;
    run(inner);
    for (size_t k = 0; k < out.size(); ++k)
      if (plan.out[k] >= 0)
        copies.narrow(out[k].f32(), static_cast<uint16_t*>(io.out[k].data), outCount[k]);
  };
}

}  // namespace

KernelImpl widenedTwin(const KernelImpl& inner, const HalfCopiesFor& copies) {
  KernelImpl w;
  w.name = inner.name + "+bf16";
  w.halfTensors = true;
  w.widened = true;
  w.anyLayout = inner.anyLayout;
  w.decline = [inner](const KernelSig& s) -> std::string {
    if (!hasHalfTensors(s)) return "is for bf16 tensors";
    return inner.decline(widenedSig(s));
  };
  w.prepare = [inner, copies](const KernelSig& s) { return prepareWidened(inner, s, copies(s)); };
  w.workspace = [inner](const KernelSig& s) { return widePlan(inner, s).bytes; };
  if (inner.packs)
    w.packs = [inner](const KernelSig& s, int input) { return inner.packs(widenedSig(s), input); };
  w.detail = [inner](const KernelSig& s) {
    std::string d = inner.detail ? inner.detail(widenedSig(s)) : std::string();
    return d + (d.empty() ? "" : "; ") + "bf16 tensors converted to float and back around it";
  };
  return w;
}

std::string declineConvertingCopy(const KernelSig& s) {
  const DType a = s.in[0].dtype, b = s.out[0].dtype;
  if (a == b || (a == DType::F32 && b == DType::BF16) || (a == DType::BF16 && b == DType::F32))
    return {};
  return "copies, or converts between float32 and bf16, only";
}

}  // namespace netloom
