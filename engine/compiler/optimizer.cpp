// The optimizer: PyTorch's defaults applied, and one update node per parameter.
#include <cmath>
#include <functional>

#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"
#include "engine/ops/optimizer_settings.h"
#include "kernels/core/communicator.h"

namespace netloom {
namespace {

// An update's attributes and state, whose tensors state(suffix) adds under PyTorch's
// names; under loss scaling it reads the scale's state last.
void describeUpdate(Node& n, const OptimizerSettings& s,
                    const std::function<void(const std::string&)>& state, ValueId lossScale) {
  n.attrs.set("weight_decay", s.weightDecay);
  if (s.kind == proto::Optimizer::SGD) {
    n.attrs.set("momentum", s.momentum);
    n.attrs.set("nesterov", s.nesterov);
    if (s.momentum > 0) state("momentum_buffer");
  } else {
    n.attrs.set("beta1", s.beta1);
    n.attrs.set("beta2", s.beta2);
    n.attrs.set("eps", s.eps);
    n.attrs.set("decoupled", s.kind == proto::Optimizer::ADAMW);
    state("exp_avg");
    state("exp_avg_sq");
  }
  if (lossScale != kNoValue) {
    n.attrs.set("loss_scaled", true);
    n.inputs.push_back(lossScale);
  }
}

}  // namespace

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
    describeUpdate(n, s, state, lossScale);
    if (auto id = g.addNode(std::move(n)); !id) return id.error();
  }
  return {};
}

Status insertZeroOptimizer(Graph& g, const std::vector<GradientBucket>& buckets,
                           const proto::Optimizer& opt, ValueId lossScale, Communicator& comm) {
  auto settings = optimizerSettings(opt);
  if (!settings) return settings.error();
  const OptimizerSettings& s = *settings;
  const bool sgd = s.kind == proto::Optimizer::SGD;
  for (const GradientBucket& b : buckets) {
    Node n;
    n.name = b.name + "/update";
    n.op = &internal_ops::zeroUpdate();
    n.backward = true;
    n.origin = b.params.front();
    n.inputs = b.paramValues;
    const bool sharded = b.shard != kNoValue;
    if (sharded)
      n.inputs.push_back(b.shard);
    else
      n.inputs.insert(n.inputs.end(), b.grads.begin(), b.grads.end());
    auto flat = std::make_shared<FlatShard>();
    int64_t total = 0;
    for (ValueId p : b.paramValues) {
      flat->members.push_back({g.values[p].name, g.values[p].desc.shape});
      total += numel(g.values[p].desc.shape);
    }
    flat->parts = comm.size();
    flat->index = comm.rank();
    auto state = [&](const std::string& suffix) {
      auto mine = std::make_shared<FlatShard>(*flat);
      mine->suffix = suffix;
      Value v;
      v.name = b.name + "." + suffix;
      v.kind = ValueKind::State;
      v.desc = TensorDesc{{(total + comm.size() - 1) / comm.size()}, DType::F32, {}};
      v.flat = std::move(mine);
      n.inputs.push_back(g.addValue(std::move(v)));
    };
    n.attrs.set("params", int64_t(b.paramValues.size()));
    n.attrs.set("grads", std::string(sharded ? "shard" : "whole"));
    n.attrs.set("parts", int64_t(comm.size()));
    n.attrs.set("kind", std::string(sgd ? "sgd" : "adam"));
    describeUpdate(n, s, state, lossScale);
    if (auto id = g.addNode(std::move(n)); !id) return id.error();
  }
  return {};
}

}  // namespace netloom
