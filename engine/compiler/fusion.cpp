// Fusion: an op takes the activation that alone reads its output into its own kernel
// (OpDef::epilogue, one of the choices of the op's "activation" attribute), where the
// device has a kernel for the fused form.
#include <algorithm>

#include "engine/compiler/passes.h"
#include "kernels/core/device.h"

namespace netloom {

const KernelImpl* firstKernel(const Graph& g, const Node& n, const KernelRegistry& kernels,
                              const KernelSig& context) {
  const auto* list = kernels.list(n.op->name, context.device->id().kind);
  if (!list) return nullptr;
  KernelSig sig = context;
  sig.attrs = &n.attrs;
  for (ValueId v : n.inputs) sig.in.push_back(g.values[v].desc);
  for (ValueId v : n.outputs) sig.out.push_back(g.values[v].desc);
  for (const KernelImpl& k : *list)
    if (k.decline(sig).empty()) return &k;
  return nullptr;
}

bool hasKernel(const Graph& g, const Node& n, const KernelRegistry& kernels,
               const KernelSig& context) {
  return firstKernel(g, n, kernels, context) != nullptr;
}

std::vector<std::string> fuseActivations(Graph& g, const std::set<ValueId>& pinned,
                                         const KernelRegistry& kernels, const KernelSig& context,
                                         const std::vector<std::vector<NodeId>>* readers) {
  std::vector<std::string> fused;
  std::vector<std::vector<NodeId>> own;
  if (!readers) own = consumers(g);
  const std::vector<std::vector<NodeId>>& users = readers ? *readers : own;
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& op = g.nodes[i];
    // An op that takes an activation into its kernel, its first output read by one
    // user alone, an activation it can take.
    const AttrDef* slot = op.op->attr("activation");
    if (!slot || op.attrs.s("activation") != "none") continue;
    ValueId v = op.outputs[0];
    if (pinned.count(v) || users[v].size() != 1) continue;
    Node& act = g.nodes[users[v][0]];
    const std::string& epilogue = act.op->epilogue;
    if (epilogue.empty() ||
        std::find(slot->choices.begin(), slot->choices.end(), epilogue) == slot->choices.end())
      continue;
    op.attrs.set("activation", epilogue);
    if (!hasKernel(g, op, kernels, context)) {  // this device computes it in two launches
      op.attrs.set("activation", std::string("none"));
      continue;
    }
    op.outputs[0] = act.outputs[0];
    g.values[act.outputs[0]].producer = NodeId(i);
    g.values[v].producer = -1;
    dead[users[v][0]] = true;
    fused.push_back(op.name + " + " + act.name + " -> " + op.op->name + " with " + act.op->name);
  }
  removeNodes(g, dead);
  return fused;
}

}  // namespace netloom
