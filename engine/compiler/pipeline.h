// Pipeline parallelism's stages: the forward graph's nodes cut into `stages`
// contiguous runs of its order, balanced by their forward FLOPs (and weights), the
// losses and metrics in the last. A value one stage writes and a later one reads
// crosses between them as a message, and its gradient comes back the same way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/graph/graph.h"

namespace netloom {

// Per node, its stage (0-based); -1 for data inputs, which every stage reading them
// reads for itself. `placed` pins nodes to stages by name (a block instance's name
// pins every node inside it, "name/..."); the others fall between them by their work.
// Errors: fewer nodes than stages, a stage left empty, a placement past the last
// stage or before an earlier node's (naming both nodes).
Result<std::vector<int>> pipelineStages(const Graph& g, int stages,
                                        const std::map<std::string, int>& placed = {});

// The weights several stages read (tied), each with the stages holding a copy and the
// stage whose initialisation one rank would keep: that of the last reader whose other
// weights are new, which initialises the tied one again (as bindParams does).
struct StageTie {
  ValueId param = kNoValue;
  std::vector<int> stages;
  int source = 0;
};
std::vector<StageTie> stageTies(const Graph& g, const std::vector<int>& stage);

// Each stage's nodes and the values that cross into it, for --explain.
std::string explainStages(const Graph& g, const std::vector<int>& stage, int microBatches);

}  // namespace netloom
