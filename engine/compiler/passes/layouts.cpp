// "layouts": convolution regions run in oneDNN's blocked nChw16c, with reorders at
// their edges and packed weights (assignLayouts, engine/compiler/layout.cpp).
#include "engine/compiler/layout.h"
#include "engine/compiler/pass.h"

namespace netloom {
namespace {

class Layouts : public Pass {
 public:
  const char* name() const override { return "layouts"; }
  bool optional() const override { return true; }
  bool applies(const PassContext& c) const override { return !c.opts.referenceKernels; }
  Result<std::string> run(PassContext& c) override {
    ParamStore& store = c.store;
    auto held = [&store](const std::string& name) -> const TensorDesc* {
      ParamStore::Entry* e = store.find(name);
      return e ? &e->desc : nullptr;
    };
    auto lr = assignLayouts(c.g, c.pinned, KernelRegistry::instance(), c.context, held);
    if (!lr) return lr.error();
    c.prog.blockedTensors = lr->blocked;
    c.prog.reorders = lr->reorders;
    c.prog.packedWeights = lr->packed;
    return counted(size_t(lr->blocked), "activation") + " in nChw16c, " +
           counted(size_t(lr->reorders), "reorder") + ", " + counted(size_t(lr->packed), "weight") +
           " packed";
  }
};

}  // namespace

std::unique_ptr<Pass> layoutsPass() {
  return std::make_unique<Layouts>();
}

}  // namespace netloom
