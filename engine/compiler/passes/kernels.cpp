// "kernels": each node's kernel on the plan's device, chosen before the memory plan,
// which holds the workspaces they ask for, each live for its launch
// (chooseKernels, engine/compiler/kernel_choice.cpp).
#include "engine/compiler/pass.h"

namespace netloom {
namespace {

class Kernels : public Pass {
 public:
  const char* name() const override { return "kernels"; }
  uint8_t needs() const override { return kShapes; }
  uint8_t preserves() const override { return kAllAnalyses; }
  Result<std::string> run(PassContext& c) override {
    auto chosen =
        chooseKernels(c.g, KernelRegistry::instance(), c.context, c.opts.referenceKernels);
    if (!chosen) return chosen.error();
    Lowering& l = c.lower;
    l.chosen = std::move(*chosen);
    l.workspaceRequest.assign(l.chosen.size(), -1);
    size_t declined = 0;
    for (size_t k = 0; k < l.chosen.size(); ++k) {
      declined += !l.chosen[k].step.declined.empty();
      if (l.chosen[k].workspaceBytes <= 0) continue;
      l.workspaceRequest[k] = int64_t(l.requests.size());
      const int node = l.chosen[k].step.node;
      l.requests.push_back({l.chosen[k].workspaceBytes, node, node});
    }
    return counted(l.chosen.size(), "kernel") + " chosen; " + std::to_string(declined) +
           " where a faster one declined";
  }
};

}  // namespace

std::unique_ptr<Pass> kernelsPass() {
  return std::make_unique<Kernels>();
}

}  // namespace netloom
