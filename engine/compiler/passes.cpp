#include "engine/compiler/passes.h"

#include <algorithm>
#include <cmath>

namespace netloom {

std::vector<std::string> fuseLinearActivation(Graph& g, const std::set<ValueId>& pinned) {
  std::vector<std::string> fused;
  auto users = consumers(g);
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& lin = g.nodes[i];
    // A matrix op that takes an activation into its kernel, followed by its only
    // user, an activation it can take.
    const AttrDef* slot = lin.op->attr("activation");
    if (!slot || lin.attrs.s("activation") != "none") continue;
    ValueId v = lin.outputs[0];
    if (pinned.count(v) || users[v].size() != 1) continue;
    Node& act = g.nodes[users[v][0]];
    const std::string& epilogue = act.op->epilogue;
    if (epilogue.empty() ||
        std::find(slot->choices.begin(), slot->choices.end(), epilogue) == slot->choices.end())
      continue;
    lin.attrs.set("activation", epilogue);
    lin.outputs = act.outputs;
    g.values[act.outputs[0]].producer = NodeId(i);
    g.values[v].producer = -1;
    dead[users[v][0]] = true;
    fused.push_back(lin.name + " + " + act.name + " -> " + lin.op->name + " with " + act.op->name);
  }
  removeNodes(g, dead);
  return fused;
}

std::vector<std::string> insertAutocast(Graph& g, const std::string& format) {
  const OpDef* round = OpRegistry::instance().find("RoundHalf");
  std::vector<std::string> rounded;
  std::vector<Node> old = std::move(g.nodes);
  g.nodes.clear();
  std::map<ValueId, ValueId> replaced;  // a matrix op's output -> its rounded value
  std::set<ValueId> isRounded;
  auto roundOf = [&](ValueId v, const std::string& name, const std::string& origin) -> ValueId {
    Node r;
    r.name = name;
    r.op = round;
    r.attrs.set("format", format);
    r.inputs = {v};
    r.origin = origin;
    auto id = g.addNode(std::move(r));  // a float tensor always passes inference
    ValueId out = g.nodes[*id].outputs[0];
    isRounded.insert(out);
    return out;
  };
  for (Node& n : old) {
    for (ValueId& v : n.inputs)
      if (auto it = replaced.find(v); it != replaced.end()) v = it->second;
    bool matrix = n.op->autocast;
    if (matrix)
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        ValueId v = n.inputs[k];
        if (g.values[v].desc.dtype != DType::F32 || isRounded.count(v)) continue;
        n.inputs[k] = roundOf(v, n.name + "/autocast/in" + std::to_string(k), n.name);
      }
    NodeId id = NodeId(g.nodes.size());
    for (ValueId v : n.outputs) g.values[v].producer = id;
    std::string name = n.name;
    std::vector<ValueId> outputs = n.outputs;
    g.nodes.push_back(std::move(n));
    if (!matrix) continue;
    for (size_t k = 0; k < outputs.size(); ++k)
      if (g.values[outputs[k]].desc.dtype == DType::F32)
        replaced[outputs[k]] =
            roundOf(outputs[k], name + "/autocast/out" + std::to_string(k), name);
    rounded.push_back(name);
  }
  return rounded;
}

std::vector<GradientBucket> insertGradientBuckets(Graph& g, const std::map<ValueId, ValueId>& grads,
                                                  int64_t firstBytes, int64_t bytes) {
  std::map<ValueId, ValueId> paramOf;  // gradient -> parameter
  for (const auto& [param, grad] : grads) paramOf[grad] = param;
  // The gradients in the order they are written, each with its writer.
  std::vector<std::pair<ValueId, size_t>> written;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].outputs)
      if (paramOf.count(v)) written.push_back({v, i});
  std::vector<GradientBucket> buckets;
  std::vector<std::vector<ValueId>> members;
  std::map<size_t, std::vector<size_t>> startsAfter;  // node -> buckets whose last it writes
  int64_t cap = firstBytes;
  for (size_t k = 0; k < written.size(); ++k) {
    ValueId v = written[k].first;
    int64_t size = numel(g.values[v].desc.shape) * int64_t(dtypeSize(g.values[v].desc.dtype));
    if (buckets.empty() || (buckets.back().bytes > 0 && buckets.back().bytes + size > cap)) {
      if (!buckets.empty()) cap = bytes;
      buckets.push_back({});
      members.push_back({});
    }
    buckets.back().params.push_back(g.values[paramOf[v]].name);
    buckets.back().bytes += size;
    members.back().push_back(v);
    bool last = k + 1 == written.size();
    if (!last) {
      ValueId next = written[k + 1].first;
      int64_t nextSize =
          numel(g.values[next].desc.shape) * int64_t(dtypeSize(g.values[next].desc.dtype));
      last = buckets.back().bytes + nextSize > cap;
    }
    if (last) startsAfter[written[k].second].push_back(buckets.size() - 1);
  }
  for (size_t b = 0; b < buckets.size(); ++b)
    buckets[b].name = "bucket " + std::to_string(b) + " (" + buckets[b].params.front() +
                      (buckets[b].params.size() > 1 ? " .. " + buckets[b].params.back() : "") + ")";
  const OpDef* start = OpRegistry::instance().find("BucketStart");
  const OpDef* wait = OpRegistry::instance().find("BucketWait");
  auto bucketNode = [&](const OpDef* op, size_t b) {
    Node n;
    n.name = buckets[b].name + (op == start ? "/start" : "/wait");
    n.op = op;
    n.backward = true;
    n.origin = buckets[b].params.front();
    n.attrs.set("bucket", buckets[b].name);
    n.inputs = members[b];
    g.addNode(std::move(n));  // no outputs: inference cannot fail
  };
  std::vector<Node> old = std::move(g.nodes);
  g.nodes.clear();
  for (size_t i = 0; i < old.size(); ++i) {
    for (ValueId v : old[i].outputs) g.values[v].producer = NodeId(g.nodes.size());
    g.nodes.push_back(std::move(old[i]));
    for (size_t b : startsAfter[i]) bucketNode(start, b);
  }
  for (size_t b = 0; b < buckets.size(); ++b) bucketNode(wait, b);
  return buckets;
}

Result<OptimizerSettings> optimizerSettings(const proto::Optimizer& opt) {
  OptimizerSettings s;
  s.kind = opt.kind() == proto::Optimizer::KIND_UNSPECIFIED ? proto::Optimizer::ADAM : opt.kind();
  s.lr = opt.has_lr() ? opt.lr() : (s.kind == proto::Optimizer::SGD ? 0.01 : 1e-3);
  s.momentum = opt.momentum();
  s.nesterov = opt.nesterov();
  if (opt.has_beta1()) s.beta1 = opt.beta1();
  if (opt.has_beta2()) s.beta2 = opt.beta2();
  if (opt.has_eps()) s.eps = opt.eps();
  s.weightDecay = opt.has_weight_decay() ? opt.weight_decay()
                                         : (s.kind == proto::Optimizer::ADAMW ? 0.01 : 0.0);
  // As torch.optim: what it refuses is an error; lr 0, momentum of 1 or more and
  // weight decay above 1 are allowed (checkProject warns about them).
  if (!proto::Optimizer::Kind_IsValid(s.kind))
    return makeError("train.optimizer.kind: " + std::to_string(int(s.kind)) +
                     " is not a known optimizer (SGD, ADAM, ADAMW)");
  if (!(s.lr >= 0) || !std::isfinite(s.lr))
    return makeError("train.optimizer.lr must be a finite number of at least 0");
  if (!(s.momentum >= 0) || !std::isfinite(s.momentum))
    return makeError("train.optimizer.momentum must be a finite number of at least 0");
  if (s.nesterov && s.momentum == 0)
    return makeError("train.optimizer.nesterov needs momentum > 0");
  if (!(s.beta1 >= 0 && s.beta1 < 1 && s.beta2 >= 0 && s.beta2 < 1))
    return makeError("train.optimizer.beta1 and beta2 must be in [0, 1)");
  if (!(s.eps >= 0) || !std::isfinite(s.eps))
    return makeError("train.optimizer.eps must be a finite number of at least 0");
  if (!(s.weightDecay >= 0) || !std::isfinite(s.weightDecay))
    return makeError("train.optimizer.weight_decay must be a finite number of at least 0");
  return s;
}

Status insertOptimizer(Graph& g, const std::map<ValueId, ValueId>& grads,
                       const proto::Optimizer& opt, ValueId lossScale) {
  auto settings = optimizerSettings(opt);
  if (!settings) return settings.error();
  const OptimizerSettings& s = *settings;
  bool sgd = s.kind == proto::Optimizer::SGD;
  const OpDef* op = OpRegistry::instance().find(sgd ? "SgdUpdate" : "AdamUpdate");
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

void eliminateDeadNodes(Graph& g, const std::vector<ValueId>& roots) {
  std::vector<bool> neededValue(g.values.size(), false);
  for (ValueId v : roots) neededValue[v] = true;
  std::vector<bool> dead(g.nodes.size(), true);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    bool needed = !n.op->mutates.empty();
    for (ValueId v : n.outputs) needed = needed || neededValue[v];
    if (!needed) continue;
    dead[k] = false;
    for (ValueId v : n.inputs) neededValue[v] = true;
  }
  removeNodes(g, dead);
}

}  // namespace netloom
