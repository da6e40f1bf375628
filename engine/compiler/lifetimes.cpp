#include "engine/compiler/lifetimes.h"

#include <algorithm>

namespace netloom {

bool livesInArena(const Value& v) {
  return v.kind == ValueKind::Activation || v.kind == ValueKind::Input;
}

Lifetimes bufferLifetimes(const Graph& g, const std::set<ValueId>& pinned) {
  const int steps = int(g.nodes.size());
  Lifetimes t;
  t.first.assign(g.values.size(), -1);
  t.last.assign(g.values.size(), -1);
  for (int i = 0; i < steps; ++i) {
    for (ValueId v : g.nodes[i].inputs)
      if (livesInArena(g.values[v])) {
        if (t.first[v] < 0) t.first[v] = g.values[v].kind == ValueKind::Input ? 0 : i;
        t.last[v] = std::max(t.last[v], i);
      }
    for (ValueId v : g.nodes[i].outputs) {
      if (t.first[v] < 0) t.first[v] = i;
      t.last[v] = std::max(t.last[v], i);
    }
  }
  for (ValueId v : pinned) t.last[v] = steps - 1;
  for (const auto& [field, v] : g.inputsByField)
    if (t.first[v] >= 0) t.first[v] = 0;
  return t;
}

}  // namespace netloom
