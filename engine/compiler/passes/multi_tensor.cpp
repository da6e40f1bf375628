// "multi-tensor": each run of consecutive updates by one kernel with equal attributes
// is done by its first step's launch.
#include "engine/compiler/pass.h"

namespace netloom {
namespace {

// Steps [i, end) as one launch of their kernel's group form.
Status group(PassContext& c, size_t i, size_t end) {
  Program& prog = c.prog;
  const std::vector<ChosenKernel>& chosen = c.lower.chosen;
  const KernelImpl* impl = chosen[i].impl;
  std::vector<KernelSig> sigs;
  std::vector<std::vector<TensorRef>> tensors;
  for (size_t k = i; k < end; ++k) {
    sigs.push_back(chosen[k].sig);
    tensors.push_back(prog.steps[k].in);
  }
  try {
    prog.steps[i].fn = impl->group(sigs, tensors);
  } catch (const std::exception& e) {
    return makeError("the " + std::to_string(end - i) + " updates from node '" +
                     c.g.nodes[prog.steps[i].node].origin + "' (kernel " + impl->name +
                     ") failed to prepare as one launch: " + e.what());
  }
  prog.steps[i].groupEnd = end;
  prog.steps[i].alone = false;  // the group's launch is as its kernel made it
  for (size_t k = i + 1; k < end; ++k) prog.steps[k].fn = nullptr;
  return {};
}

class MultiTensor : public Pass {
 public:
  const char* name() const override { return "multi-tensor"; }
  bool optional() const override { return true; }
  bool planOnly() const override { return false; }
  uint8_t preserves() const override { return kAllAnalyses; }
  Result<std::string> run(PassContext& c) override {
    const std::vector<ChosenKernel>& chosen = c.lower.chosen;
    size_t groups = 0, grouped = 0;
    for (size_t i = c.prog.updatesBegin; i < chosen.size();) {
      const KernelImpl* impl = chosen[i].impl;
      size_t end = i + 1;
      while (end < chosen.size() && impl->group && chosen[end].impl == impl &&
             chosen[end].sig.attrs->values() == chosen[i].sig.attrs->values())
        ++end;
      if (end - i > 1) {
        if (Status s = group(c, i, end); !s) return s.error();
        ++groups;
        grouped += end - i;
      }
      i = end;
    }
    return groups ? counted(grouped, "update") + " in " + counted(groups, "launch")
                  : std::string("none");
  }
};

}  // namespace

std::unique_ptr<Pass> multiTensorPass() {
  return std::make_unique<MultiTensor>();
}

}  // namespace netloom
