#include "engine/compiler/autodiff.h"

#include "engine/ops/internal_ops.h"

namespace netloom {

Result<std::map<ValueId, ValueId>> autodiff(Graph& g, ValueId loss,
                                            const std::vector<ValueId>& alsoWrt, NodeId* seedNode) {
  // Which values depend on a parameter (or a requested tensor): only those need gradients.
  for (ValueId v : alsoWrt) g.values[v].requiresGrad = true;
  for (const Node& n : g.nodes) {
    if (n.op->external || n.inputs.empty()) continue;  // data, constants, received values
    bool req = false;
    for (ValueId v : n.inputs) req = req || g.values[v].requiresGrad;
    for (ValueId v : n.outputs) g.values[v].requiresGrad = req;
  }
  if (g.values[loss].desc.shape.size() != 0)
    return makeError("the loss '" + g.values[loss].name + "' must be a scalar, it is " +
                     shapeToString(g.values[loss].desc.shape));
  if (!g.values[loss].requiresGrad)
    return makeError("the loss '" + g.values[loss].name + "' does not depend on any parameter");

  std::map<ValueId, ValueId> grads;
  size_t forwardCount = g.nodes.size();
  {
    Node seed;
    seed.name = "loss/grad/seed";
    seed.op = &internal_ops::constant();
    seed.attrs.set("value", 1.0);
    seed.attrs.set("shape", std::vector<int64_t>{});
    seed.backward = true;
    auto id = g.addNode(std::move(seed));
    if (!id) return id.error();
    grads[loss] = g.nodes[*id].outputs[0];
    if (seedNode) *seedNode = *id;
  }
  for (size_t k = forwardCount; k-- > 0;) {
    const Node& n = g.nodes[k];
    bool anyOut = false;
    for (ValueId v : n.outputs) anyOut = anyOut || grads.count(v);
    bool anyIn = false;
    for (ValueId v : n.inputs) anyIn = anyIn || g.values[v].requiresGrad;
    if (!anyOut || !anyIn) continue;
    if (!n.op->grad)
      return makeError("node '" + n.name + "' (" + n.op->name +
                       ") is not differentiable but lies between a parameter and the loss");
    GradBuilder b(g, static_cast<NodeId>(k), grads);
    n.op->grad(b);
    if (!b.error().empty())
      return makeError("autodiff of node '" + g.nodes[k].name + "': " + b.error());
  }
  std::map<ValueId, ValueId> out;
  std::vector<ValueId> wrt = g.params();
  wrt.insert(wrt.end(), alsoWrt.begin(), alsoWrt.end());
  for (ValueId p : wrt)
    if (auto it = grads.find(p); it != grads.end()) out[p] = it->second;
  return out;
}

}  // namespace netloom
