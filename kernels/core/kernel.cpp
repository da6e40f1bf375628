#include "kernels/core/kernel.h"

#include <cstring>

#include "kernels/core/device.h"

namespace netloom {

std::string layoutName(const TensorDesc& d) {
  switch (d.layout) {
    case Layout::Plain: break;
    case Layout::Blocked16: return "nChw16c";
    case Layout::Packed: return d.format;
  }
  return d.shape.size() == 4 ? "nchw" : "plain";
}

KernelFn layoutConverter(const TensorDesc& from, const TensorDesc& to) {
  const auto* list = KernelRegistry::instance().list("Reorder", DeviceKind::Cpu);
  KernelSig sig;
  sig.device = &cpuDevice();
  sig.in = {from};
  sig.out = {to};
  for (size_t k = 0; list && k < list->size(); ++k) {
    const KernelImpl& impl = (*list)[k];
    if (impl.anyLayout && impl.decline(sig).empty()) return impl.prepare(sig);
  }
  return nullptr;
}

bool convertLayout(const TensorDesc& from, const void* src, const TensorDesc& to, void* dst) {
  if (from.sameLayout(to)) {
    std::memcpy(dst, src, size_t(numel(from.shape)) * dtypeSize(from.dtype));
    return true;
  }
  KernelFn convert = layoutConverter(from, to);
  if (!convert) return false;
  TensorRef in{const_cast<void*>(src), from.shape, from.dtype, from.device};
  TensorRef out{dst, to.shape, to.dtype, to.device};
  StepContext ctx;
  convert(KernelIO{&in, &out, 1, 1, &ctx});
  return true;
}

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry;
    for (const Backend& b : backends()) b.registerKernels(*r);
    return r;
  }();
  return *registry;
}

bool hasHalfTensors(const KernelSig& s) {
  for (const auto* ds : {&s.in, &s.out})
    for (const TensorDesc& d : *ds)
      if (d.dtype == DType::BF16) return true;
  return false;
}

KernelSig widenedSig(const KernelSig& s) {
  KernelSig f = s;
  for (auto* ds : {&f.in, &f.out})
    for (TensorDesc& d : *ds)
      if (d.dtype == DType::BF16) d.dtype = DType::F32;
  return f;
}

void KernelRegistry::add(const std::string& op, DeviceKind device, KernelImpl impl) {
  if (!impl.halfTensors) {
    impl.decline = [inner = std::move(impl.decline)](const KernelSig& s) -> std::string {
      if (hasHalfTensors(s)) return "takes float32 tensors only, no bf16";
      return inner ? inner(s) : std::string();
    };
  }
  m_lists[{op, device}].push_back(std::move(impl));
}

void KernelRegistry::widenHalf(DeviceKind device,
                               const std::function<KernelImpl(const KernelImpl&)>& widen) {
  for (auto& [key, list] : m_lists) {
    if (key.second != device) continue;
    const size_t n = list.size();
    for (size_t k = 0; k < n; ++k) list.push_back(widen(list[k]));
  }
}

std::vector<std::string> KernelRegistry::ops(DeviceKind device) const {
  std::vector<std::string> out;
  for (const auto& [key, list] : m_lists)
    if (key.second == device && !list.empty()) out.push_back(key.first);
  return out;
}

const std::vector<KernelImpl>* KernelRegistry::list(const std::string& op,
                                                    DeviceKind device) const {
  auto it = m_lists.find({op, device});
  return it == m_lists.end() ? nullptr : &it->second;
}

}  // namespace netloom
