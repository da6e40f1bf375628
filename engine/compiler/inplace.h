// The in-place pass: an op that declares OpDef::inplaceable (element-wise, or a copy
// such as Flatten) writes its output over a data input whose last reader it is, so the
// two share one buffer in the arena. Runs after the layout pass (sizes and layouts are
// final) and before the memory plan, on the lifetimes the plan uses. Every kernel of
// such an op takes its output at its input's address.
#pragma once

#include <set>
#include <vector>

#include "engine/graph/graph.h"

namespace netloom {

struct InPlacePlan {
  // Per value: the value whose buffer it takes (the first of a chain of in-place
  // writes), or itself.
  std::vector<ValueId> storage;
  // Per value: the input it overwrote, or kNoValue.
  std::vector<ValueId> overwrote;
};

// `first` and `last`: the step that writes each value first and reads it last (-1 for
// values that live outside the arena); `last` of each chain's first value is extended to
// the chain's end. Values in `keep` are never overwritten. Only activations are
// overwritten, and only by an output of the same size, type and layout; a loader's
// input is shared by views only (OpDef::view), which write nothing, nor does anything
// in place of them then. Each output of a node with several (a Pointwise chain) takes
// a different input's buffer.
InPlacePlan planInPlace(const Graph& g, const std::vector<int>& first, std::vector<int>& last,
                        const std::set<ValueId>& keep);

// A plan that writes nothing in place.
InPlacePlan noInPlace(const Graph& g);

}  // namespace netloom
