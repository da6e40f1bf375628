// "bf16 storage": under bf16, after autodiff, the matrix ops whose operands are both
// rounded to bf16 read them from 16-bit storage, where the device has a kernel for
// that (storeBf16Operands, engine/compiler/autocast.cpp): the products run on the
// device's bf16 units (the CPU's AVX512_BF16 or AMX, a GPU's tensor cores) at about
// twice the float rate. Then, where the products do, the
// activations and gradients autocast rounded to bf16 are stored in 16 bits wherever
// their readers run on bf16 tensors (storeBf16Activations): the memory plan holds half
// their bytes. Where the products compute in float, so do the convolutions, and the
// other kernels would convert much of what they read (without AVX-512, in plain
// layouts, Conv+BN planned 1.23x the float arena so): every activation stays float.
// Under bf16 and fp16 alike, first, the backward pass reads a value's rounding where
// nothing else reads the value, so the rounding may write over it.
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"
#include "engine/util/memory_budget.h"

namespace netloom {
namespace {

class Bf16Storage : public Pass {
 public:
  const char* name() const override { return "bf16 storage"; }
  bool applies(const PassContext& c) const override {
    return c.opts.precision != Precision::F32 && c.context.device != nullptr;
  }
  Result<std::string> run(PassContext& c) override {
    const KernelRegistry& kernels = KernelRegistry::instance();
    const bool bf16 = c.opts.precision == Precision::BF16;
    std::set<ValueId> keep(c.pinned.begin(), c.pinned.end());
    keep.insert(c.roots.begin(), c.roots.end());
    for (const auto& [param, grad] : c.grads) keep.insert(grad);
    if (c.loss != kNoValue) keep.insert(c.loss);
    const int shared = shareRoundings(c.g, keep);
    const std::vector<std::string> ops =
        bf16 ? storeBf16Operands(c.g, kernels, c.context) : std::vector<std::string>();
    // Products in float: converting the activations would cost more than it saves.
    const Bf16Activations stored =
        storeBf16Activations(c.g, kernels, c.context, keep, !ops.empty());
    std::string said;
    if (!bf16) {
      said = "under fp16 every tensor stays float32, holding fp16 values";
    } else if (ops.empty()) {
      said =
          "no matrix op has a bf16 kernel on this device: its operands and every activation "
          "stay float32, rounded to bf16 values";
    } else {
      said =
          counted(ops.size(), "matrix op") + " read bf16 operands from 16-bit storage; " +
          (stored.values == 0 ? "every activation stays float32 (no kernel here reads bf16 "
                                "tensors)"
                              : counted(size_t(stored.values), "activation") + " stored in bf16 (" +
                                    formatBytes(stored.bytes) + ", half their float size)");
    }
    if (shared > 0)
      said += "; " + counted(size_t(shared), "rounding") + " shared with another reader";
    return said;
  }
};

}  // namespace

std::unique_ptr<Pass> bf16StoragePass() {
  return std::make_unique<Bf16Storage>();
}

}  // namespace netloom
