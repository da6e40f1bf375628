// Folding BatchNorm into the layer before it, for plans that only evaluate: with
// running statistics BatchNorm is y = (x - mean) · s + β per channel, s = γ / √(var + ε),
// so after a layer whose channel c is row c of its weight plus bias c it is that layer
// with the weight's rows scaled by s and the bias (b - mean) · s + β. A FoldBatchNorm
// node computes those from the current parameters at the start of each launch: the
// weights are small next to the activations, and the plan needs no state to refresh.
#include <algorithm>

#include "engine/compiler/passes.h"
#include "kernels/core/device.h"

namespace netloom {

Result<std::vector<std::string>> foldBatchNorms(Graph& g, const std::set<ValueId>& pinned,
                                                const KernelRegistry& kernels,
                                                const KernelSig& context) {
  std::vector<std::string> folded;
  auto users = consumers(g);
  const size_t original = g.nodes.size();
  std::vector<bool> dead(original, false);
  std::vector<NodeId> before(original, -1);  // the FoldBatchNorm a layer reads, by layer
  for (size_t i = 0; i < original; ++i) {
    Node& bn = g.nodes[i];
    const OpDef* fold =
        bn.op->foldsInto.empty() ? nullptr : OpRegistry::instance().find(bn.op->foldsInto);
    if (!fold || bn.attrs.s("activation", "none") != "none") continue;
    const ValueId x = bn.inputs[0];
    const NodeId p = g.values[x].producer;
    if (p < 0 || pinned.count(x) || users[x].size() != 1) continue;
    const Node& layer = g.nodes[size_t(p)];
    const OpDef& op = *layer.op;
    if (!op.foldsChannelAffine || layer.outputs[0] != x || layer.numDataInputs() != 1 ||
        !op.foldsChannelAffine(g.values[x].desc.shape) ||
        layer.attrs.s("activation", "none") != "none")
      continue;
    bool hidden = false;  // the batch statistics: an evaluation plan reads neither
    for (size_t k = 1; k < bn.outputs.size(); ++k)
      hidden = hidden || !users[bn.outputs[k]].empty() || pinned.count(bn.outputs[k]);
    if (hidden) continue;
    // BatchNorm's inputs: x, [weight, bias], running_mean, running_var.
    const bool affine = bn.attrs.b("affine");
    const bool bias = layer.inputs.size() > 2;
    Node f;
    f.name = layer.name + "/fold/" + bn.name;
    f.op = fold;
    f.origin = layer.name;
    f.attrs.set("eps", bn.attrs.f("eps"));
    f.attrs.set("affine", affine);
    f.attrs.set("bias", bias);
    const size_t stats = affine ? 3 : 1;
    f.inputs = {layer.inputs[1], bn.inputs[stats], bn.inputs[stats + 1]};
    if (bias) f.inputs.push_back(layer.inputs[2]);
    if (affine) f.inputs.insert(f.inputs.end(), {bn.inputs[1], bn.inputs[2]});
    auto id = g.addNode(std::move(f));
    if (!id) return id.error();
    if (!hasKernel(g, g.nodes[size_t(*id)], kernels, context)) {  // this device keeps BatchNorm
      g.nodes.pop_back();
      continue;
    }
    // Both references are taken after addNode, which may move the nodes.
    Node& l = g.nodes[size_t(p)];
    const Node& added = g.nodes[size_t(*id)];
    l.inputs.resize(2);
    l.inputs[1] = added.outputs[0];
    l.inputs.push_back(added.outputs[1]);
    l.numParams = 2;
    if (l.op->attr("bias")) l.attrs.set("bias", true);
    l.outputs[0] = g.nodes[i].outputs[0];
    g.values[x].producer = -1;
    dead[i] = true;
    before[size_t(p)] = *id;
    folded.push_back(l.name + " + " + g.nodes[i].name + " -> " + l.op->name + " with " +
                     g.nodes[i].op->name + " folded into its weight and bias");
  }
  if (folded.empty()) return folded;
  // Each FoldBatchNorm just before its layer, the BatchNorms gone.
  std::vector<Node> order;
  for (size_t i = 0; i < original; ++i) {
    if (before[i] >= 0) order.push_back(std::move(g.nodes[size_t(before[i])]));
    if (!dead[i]) order.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(order);
  for (Value& v : g.values) v.producer = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].outputs) g.values[v].producer = NodeId(i);
  return folded;
}

}  // namespace netloom
