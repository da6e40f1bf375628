// Buffer lifetimes: for every value that lives in a step's arena, the step that
// writes it first and the step that reads it last. The in-place pass and the memory
// planner work on them.
#pragma once

#include <set>
#include <vector>

#include "engine/graph/graph.h"

namespace netloom {

// Activations and the loader's inputs live in the arena; parameters, buffers and
// optimizer state persist outside it.
bool livesInArena(const Value& v);

struct Lifetimes {
  std::vector<int> first, last;  // per value; -1 for values no step touches
};

// Steps are the graph's nodes in order. The loader's inputs are live from step 0 (they
// are filled before the step), and `pinned` values (read after the step: the loss,
// metrics, kept values) to the last step.
Lifetimes bufferLifetimes(const Graph& g, const std::set<ValueId>& pinned);

}  // namespace netloom
