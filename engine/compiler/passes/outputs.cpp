// "outputs": the loss, the metrics and the kept values, which every later pass keeps.
#include "engine/compiler/pass.h"

namespace netloom {
namespace {

Result<ValueId> resolveLoss(const Graph& g, const std::string& name) {
  if (!name.empty()) {
    const Node* n = g.findNode(name);
    if (!n) return makeError("train.loss names '" + name + "', but there is no such node");
    if (n->op->role != OpRole::Loss && g.values[n->outputs[0]].desc.shape.size() != 0)
      return makeError("train.loss names '" + name + "' (" + n->op->name +
                       "), which does not produce a scalar loss");
    return n->outputs[0];
  }
  std::vector<const Node*> losses;
  for (const Node& n : g.nodes)
    if (n.op->role == OpRole::Loss) losses.push_back(&n);
  if (losses.empty())
    return makeError("the model has no loss node: add one (SoftmaxCrossEntropy, MSELoss, BCELoss)");
  if (losses.size() > 1)
    return makeError("the model has several loss nodes ('" + losses[0]->name + "', '" +
                     losses[1]->name + "'): set train.loss to the one to minimise");
  return losses[0]->outputs[0];
}

class Outputs : public Pass {
 public:
  const char* name() const override { return "outputs"; }
  // The pinned values change, and with them the lifetimes.
  uint8_t preserves() const override { return kShapes | kProducers; }
  bool listed() const override { return false; }

  Result<std::string> run(PassContext& c) override {
    const Graph& g = c.g;
    auto loss = resolveLoss(g, c.opts.loss);
    if (!loss) return loss.error();
    c.loss = *loss;
    c.metricNames = c.opts.metrics;
    if (c.metricNames.empty())
      for (const Node& n : g.nodes)
        if (n.op->role == OpRole::Metric || n.op->role == OpRole::Loss)
          c.metricNames.push_back(n.name);
    c.pinned = {c.loss};
    for (const std::string& m : c.metricNames) {
      const Node* n = g.findNode(m);
      if (!n) return makeError("train.metrics names '" + m + "', but there is no such node");
      if (g.values[n->outputs[0]].desc.shape.size() != 0)
        return makeError("metric '" + m +
                         "' is not a scalar: " + shapeToString(g.values[n->outputs[0]].desc.shape));
      c.pinned.insert(n->outputs[0]);
    }
    for (const std::string& k : c.opts.keep) {
      ValueId v = g.findValue(k);
      if (v == kNoValue) return makeError("no tensor named '" + k + "' to keep");
      c.pinned.insert(v);
    }
    c.roots.assign(c.pinned.begin(), c.pinned.end());
    return std::string();
  }
};

}  // namespace

std::unique_ptr<Pass> outputsPass() {
  return std::make_unique<Outputs>();
}

}  // namespace netloom
