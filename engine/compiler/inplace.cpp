#include "engine/compiler/inplace.h"

#include <algorithm>

namespace netloom {

InPlacePlan noInPlace(const Graph& g) {
  InPlacePlan plan;
  plan.storage.resize(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) plan.storage[v] = ValueId(v);
  plan.overwrote.assign(g.values.size(), kNoValue);
  return plan;
}

InPlacePlan planInPlace(const Graph& g, const std::vector<int>& first, std::vector<int>& last,
                        const std::set<ValueId>& keep) {
  InPlacePlan plan = noInPlace(g);
  for (int i = 0; i < int(g.nodes.size()); ++i) {
    const Node& n = g.nodes[i];
    if (!n.op->inplaceable || n.op->external) continue;
    // Each output over a different dead input (a Pointwise chain writes several).
    std::vector<bool> claimed(n.inputs.size(), false);
    for (ValueId out : n.outputs) {
      const Value& o = g.values[out];
      if (o.kind != ValueKind::Activation || first[out] != i) continue;
      for (int k = 0; k < n.numDataInputs(); ++k) {
        ValueId in = n.inputs[k];
        const Value& v = g.values[in];
        // Dead after this node: no later step reads it, and nothing keeps it readable.
        // A loader's input is shared by a view alone, never written over.
        ValueId root = plan.storage[in];
        const bool input = g.values[root].kind == ValueKind::Input;
        if (claimed[size_t(k)] ||
            !(v.kind == ValueKind::Activation || v.kind == ValueKind::Input) ||
            (input && !n.op->view) || last[in] != i || keep.count(in))
          continue;
        if (bytesOf(v.desc) != bytesOf(o.desc) || v.desc.dtype != o.desc.dtype ||
            v.desc.layout != o.desc.layout)
          continue;
        // An input read at two ports (Add(x, x)) is claimed at both.
        for (int j = 0; j < n.numDataInputs(); ++j)
          claimed[size_t(j)] = claimed[size_t(j)] || n.inputs[j] == in;
        plan.storage[out] = root;
        plan.overwrote[out] = in;
        last[root] = std::max(last[root], last[out]);
        break;
      }
    }
  }
  return plan;
}

}  // namespace netloom
