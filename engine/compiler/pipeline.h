// Pipeline parallelism's stages: the forward graph's nodes cut into `stages`
// contiguous runs of its order, balanced by their forward FLOPs (and weights), the
// losses and metrics in the last. A value one stage writes and a later one reads
// crosses between them as a message, and its gradient comes back the same way.
#pragma once

#include <string>
#include <vector>

#include "engine/graph/graph.h"

namespace netloom {

// Per node, its stage (0-based); -1 for data inputs, which every stage reading them
// reads for itself. An error where the graph has fewer nodes than stages.
Result<std::vector<int>> pipelineStages(const Graph& g, int stages);

// Each stage's nodes and the values that cross into it, for --explain.
std::string explainStages(const Graph& g, const std::vector<int>& stage, int microBatches);

}  // namespace netloom
