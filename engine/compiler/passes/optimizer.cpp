// "optimizer": the updates, after what reads the gradients first: their norms and
// histograms (--gradient-norms), and fp16's check that they are finite
// (insertOptimizer, engine/compiler/optimizer.cpp).
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"

namespace netloom {
namespace {

// A backward node of `op` reading `grad` (its squares, its histogram); its output.
Result<ValueId> readGradient(Graph& g, ValueId param, ValueId grad, const OpDef& op,
                             const char* suffix) {
  Node n;
  n.name = g.values[param].name + suffix;
  n.op = &op;
  n.backward = true;
  n.origin = g.values[param].name;
  n.inputs = {grad};
  auto id = g.addNode(std::move(n));
  if (!id) return id.error();
  return g.nodes[*id].outputs[0];
}

// Σ grad² of every gradient into fp16's finiteness check (and, with --gradient-norms,
// each one's norm and histogram kept for the run's report).
Status readGradients(PassContext& c, const Attrs& scaling) {
  Graph& g = c.g;
  Node check;
  check.name = "loss_scale/check";
  check.op = &internal_ops::lossScaleCheck();
  check.attrs = scaling;
  check.backward = true;
  check.inputs = {c.lossScale};
  for (const auto& [param, grad] : c.grads) {
    auto out = readGradient(g, param, grad, internal_ops::sumSquares(), "/grad_sq");
    if (!out) return out.error();
    check.inputs.push_back(*out);
    if (!c.opts.gradientNorms) continue;
    auto counts = readGradient(g, param, grad, internal_ops::histogram(), "/grad_histogram");
    if (!counts) return counts.error();
    c.prog.gradientSquares[g.values[param].name] = *out;
    c.prog.gradientHistograms[g.values[param].name] = *counts;
    for (ValueId v : {*out, *counts}) {
      c.pinned.insert(v);
      c.roots.push_back(v);
    }
  }
  if (c.scaled())
    if (auto id = g.addNode(std::move(check)); !id) return id.error();
  return {};
}

class Optimizer : public Pass {
 public:
  const char* name() const override { return "optimizer"; }
  bool applies(const PassContext& c) const override { return c.updates(); }
  Result<std::string> run(PassContext& c) override {
    Attrs scaling;
    scaling.set("init_scale", c.opts.initLossScale);
    scaling.set("growth_interval", c.opts.lossScaleInterval);
    if (c.scaled() && c.seed >= 0) {  // the loss gradient starts at the loss scale
      Node& seed = c.g.nodes[size_t(c.seed)];
      seed.op = &internal_ops::lossScaleSeed();
      seed.attrs = scaling;
      seed.inputs = {c.lossScale};
    }
    if (c.opts.gradientNorms || c.scaled())
      if (Status s = readGradients(c, scaling); !s) return s.error();
    if (!c.zeroBuckets.empty()) {
      if (Status s =
              insertZeroOptimizer(c.g, c.zeroBuckets, c.opts.optimizer, c.lossScale, *c.opts.comm);
          !s)
        return s.error();
      return "an update of this rank's shard of each of " +
             counted(c.zeroBuckets.size(), "bucket") + " (ZeRO-" + std::to_string(c.opts.zero) +
             ")";
    }
    if (Status s = insertOptimizer(c.g, c.grads, c.opts.optimizer, c.lossScale); !s)
      return s.error();
    return "an update for each of " + counted(c.grads.size(), "parameter") +
           (c.opts.gradientNorms ? ", each gradient's norm and histogram" : "") +
           (c.scaled() ? ", fp16 loss scaling" : "");
  }
};

}  // namespace

std::unique_ptr<Pass> optimizerPass() {
  return std::make_unique<Optimizer>();
}

}  // namespace netloom
