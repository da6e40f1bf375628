// Reverse-mode autodiff over the IR: walks the forward nodes from the loss back,
// asking each op's gradient rule to emit backward nodes, and sums gradients that
// reach a tensor along several paths.
#pragma once

#include <map>

#include "engine/graph/graph.h"
#include "engine/ops/grad_builder.h"

namespace netloom {

// Builds the backward graph of `loss` (a scalar). Returns tensor -> gradient for
// every parameter the loss depends on, and for each of `alsoWrt` (e.g. inputs).
// `seed`, when given, receives the node that writes the loss's own gradient (1), which
// data parallelism and loss scaling replace.
Result<std::map<ValueId, ValueId>> autodiff(Graph& g, ValueId loss,
                                            const std::vector<ValueId>& alsoWrt = {},
                                            NodeId* seed = nullptr);

}  // namespace netloom
