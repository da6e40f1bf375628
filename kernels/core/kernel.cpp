#include "kernels/core/kernel.h"

#include "kernels/cpu/cpu_util.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace netloom {

const char* layoutName(Layout l) {
  return l == Layout::Blocked16 ? "nChw16c" : "nchw";
}

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry;
    registerCpuKernels(*r);
    return r;
  }();
  return *registry;
}

void KernelRegistry::add(const std::string& op, DeviceKind device, KernelImpl impl) {
  m_lists[{op, device}].push_back(std::move(impl));
}

const std::vector<KernelImpl>* KernelRegistry::list(const std::string& op,
                                                    DeviceKind device) const {
  auto it = m_lists.find({op, device});
  return it == m_lists.end() ? nullptr : &it->second;
}

void cpu::configureThreads(int threads) {
  omp_set_num_threads(threads);
#if defined(__SSE__)
#pragma omp parallel num_threads(threads)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // flush-to-zero and denormals-are-zero
#endif
}

void registerCpuKernels(KernelRegistry& r) {
  cpu::registerGemm(r);
  cpu::registerElementwise(r);
  cpu::registerLosses(r);
  cpu::registerShape(r);
  cpu::registerOptimizers(r);
  cpu::registerConv(r);
  cpu::registerPoolNorm(r);
}

}  // namespace netloom
