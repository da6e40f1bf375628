// "bf16 storage": under bf16, after autodiff, the matrix ops whose operands are both
// rounded to bf16 read them from 16-bit storage, where the device has a kernel for
// that (storeBf16Operands, engine/compiler/autocast.cpp). The values are the same;
// the products run on the CPU's bf16 units at about twice the float rate.
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"

namespace netloom {
namespace {

class Bf16Storage : public Pass {
 public:
  const char* name() const override { return "bf16 storage"; }
  bool applies(const PassContext& c) const override {
    return c.opts.precision == Precision::BF16 && c.context.device != nullptr;
  }
  Result<std::string> run(PassContext& c) override {
    const std::vector<std::string> ops =
        storeBf16Operands(c.g, KernelRegistry::instance(), c.context);
    if (ops.empty())
      return std::string(
          "no matrix op has a bf16 kernel on this device: its operands stay float32, rounded "
          "to bf16 values");
    return counted(ops.size(), "matrix op") + " read bf16 operands from 16-bit storage";
  }
};

}  // namespace

std::unique_ptr<Pass> bf16StoragePass() {
  return std::make_unique<Bf16Storage>();
}

}  // namespace netloom
