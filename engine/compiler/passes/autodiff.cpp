// "autodiff": the backward graph from the loss (engine/compiler/autodiff.cpp). Without
// the update each gradient is kept for whoever asked; fp16 adds the loss-scaling
// state that the seed, the check and the updates read.
#include "engine/compiler/autodiff.h"

#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"
#include "kernels/core/functors.h"

namespace netloom {
namespace {

class Autodiff : public Pass {
 public:
  const char* name() const override { return "autodiff"; }
  bool applies(const PassContext& c) const override { return c.opts.training; }
  Result<std::string> run(PassContext& c) override {
    Graph& g = c.g;
    std::vector<ValueId> wrt;
    for (const std::string& name : c.opts.gradientsOf) {
      ValueId v = g.findValue(name);
      if (v == kNoValue) return makeError("no tensor named '" + name + "' to differentiate");
      wrt.push_back(v);
    }
    wrt.insert(wrt.end(), c.alsoWrt.begin(), c.alsoWrt.end());
    auto grads = autodiff(g, c.loss, wrt, &c.seed);
    if (!grads) return grads.error();
    c.grads = std::move(*grads);
    for (ValueId v : c.alsoWrt)  // a pipeline stage's received values: sent back, not updated
      if (auto it = c.grads.find(v); it != c.grads.end()) {
        c.receivedGrads[v] = it->second;
        c.grads.erase(it);
      }
    if (!c.updates()) {
      for (const auto& [v, grad] : c.grads) {
        c.prog.gradients[g.values[v].name] = grad;
        c.pinned.insert(grad);
        c.roots.push_back(grad);
      }
    } else if (c.scaled()) {
      Value state;
      state.name = kLossScaleState;
      state.kind = ValueKind::State;
      state.desc = TensorDesc{{fn::LossScale::kSize}, DType::F32, {}};
      c.lossScale = g.addValue(std::move(state));
      c.prog.lossScale = c.lossScale;
    }
    return counted(c.grads.size(), "gradient") + " of the loss";
  }
};

}  // namespace

std::unique_ptr<Pass> autodiffPass() {
  return std::make_unique<Autodiff>();
}

}  // namespace netloom
