// "chains": element-wise ops of one shape, each reading the one before, run as one
// Pointwise loop (fuseElementwiseChains, engine/compiler/chains.cpp).
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"

namespace netloom {
namespace {

class Chains : public Pass {
 public:
  const char* name() const override { return "chains"; }
  bool optional() const override { return true; }
  uint8_t needs() const override { return kProducers; }
  uint8_t preserves() const override { return kShapes; }
  Result<std::string> run(PassContext& c) override {
    auto fused = fuseElementwiseChains(c.g, c.pinned, KernelRegistry::instance(), c.context,
                                       &c.analyses.readers());
    c.prog.chains = fused;
    return joined(fused, "no chain");
  }
};

}  // namespace

std::unique_ptr<Pass> chainsPass() {
  return std::make_unique<Chains>();
}

}  // namespace netloom
