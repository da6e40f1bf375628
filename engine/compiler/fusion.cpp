// Fusion: a matrix op takes the activation that alone reads its output into its own
// kernel (OpDef::epilogue, the op's "activation" attribute).
#include <algorithm>

#include "engine/compiler/passes.h"

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

}  // namespace netloom
