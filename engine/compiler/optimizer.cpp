// The optimizer: PyTorch's defaults applied, and one update node per parameter.
#include <cmath>

#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"
#include "engine/ops/optimizer_settings.h"

namespace netloom {

Status insertOptimizer(Graph& g, const std::map<ValueId, ValueId>& grads,
                       const proto::Optimizer& opt, ValueId lossScale) {
  auto settings = optimizerSettings(opt);
  if (!settings) return settings.error();
  const OptimizerSettings& s = *settings;
  bool sgd = s.kind == proto::Optimizer::SGD;
  const OpDef* op = sgd ? &internal_ops::sgdUpdate() : &internal_ops::adamUpdate();
  for (const auto& [param, grad] : grads) {
    Node n;
    n.name = g.values[param].name + "/update";
    n.op = op;
    n.backward = true;
    n.origin = g.values[param].name;
    n.inputs = {param, grad};
    // Copied in: clang before 16 cannot capture a structured binding.
    auto state = [&, param = param](const std::string& suffix) {
      Value v;
      v.name = g.values[param].name + "." + suffix;
      v.kind = ValueKind::State;
      v.desc = g.values[param].desc;
      v.shard = g.values[param].shard;  // split as its parameter is
      n.inputs.push_back(g.addValue(std::move(v)));
    };
    if (sgd) {
      n.attrs.set("momentum", s.momentum);
      n.attrs.set("nesterov", s.nesterov);
      n.attrs.set("weight_decay", s.weightDecay);
      if (s.momentum > 0) state("momentum_buffer");
    } else {
      n.attrs.set("beta1", s.beta1);
      n.attrs.set("beta2", s.beta2);
      n.attrs.set("eps", s.eps);
      n.attrs.set("weight_decay", s.weightDecay);
      n.attrs.set("decoupled", s.kind == proto::Optimizer::ADAMW);
      state("exp_avg");
      state("exp_avg_sq");
    }
    if (lossScale != kNoValue) {
      n.attrs.set("loss_scaled", true);
      n.inputs.push_back(lossScale);
    }
    if (auto id = g.addNode(std::move(n)); !id) return id.error();
  }
  return {};
}

}  // namespace netloom
