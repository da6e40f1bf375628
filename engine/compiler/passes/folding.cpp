// "folding": in a plan that only evaluates, BatchNorm folds into the layer before it
// (foldBatchNorms, engine/compiler/fold.cpp).
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"

namespace netloom {
namespace {

class Folding : public Pass {
 public:
  const char* name() const override { return "folding"; }
  bool optional() const override { return true; }
  bool applies(const PassContext& c) const override {
    return c.opts.evaluation && !c.opts.training;
  }
  Result<std::string> run(PassContext& c) override {
    auto folded = foldBatchNorms(c.g, c.pinned, KernelRegistry::instance(), c.context);
    if (!folded) return folded.error();
    c.prog.fusions.insert(c.prog.fusions.end(), folded->begin(), folded->end());
    return joined(*folded, "nothing to fold");
  }
};

}  // namespace

std::unique_ptr<Pass> foldingPass() {
  return std::make_unique<Folding>();
}

}  // namespace netloom
