// Dead-code elimination: what no loss, metric or kept value reads goes.
#include "engine/compiler/passes.h"

namespace netloom {

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
