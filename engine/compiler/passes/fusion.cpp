// "fusion": an op takes the activation that alone reads its output into its own
// kernel (fuseActivations, engine/compiler/fusion.cpp). Values move to another
// producer but are never renamed.
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"

namespace netloom {
namespace {

class Fusion : public Pass {
 public:
  const char* name() const override { return "fusion"; }
  bool optional() const override { return true; }
  uint8_t needs() const override { return kProducers; }
  uint8_t preserves() const override { return kShapes; }
  Result<std::string> run(PassContext& c) override {
    auto fused = fuseActivations(c.g, c.pinned, KernelRegistry::instance(), c.context,
                                 &c.analyses.readers());
    c.prog.fusions.insert(c.prog.fusions.end(), fused.begin(), fused.end());
    return joined(fused, "nothing to fuse");
  }
};

}  // namespace

std::unique_ptr<Pass> fusionPass() {
  return std::make_unique<Fusion>();
}

}  // namespace netloom
