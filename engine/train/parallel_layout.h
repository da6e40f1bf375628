// How a project spreads over its ranks (train.distributed), as the editor draws it: each
// node's placement (its pipeline stage, or whether its weights are split over a
// tensor group), each wire's SBP and per-rank shape ("S(1) 64×(512/2)"), and each
// boxing collective with its bytes per step, from the same plans netloom-train
// compiles (engine/compiler/sbp_plan.h, engine/compiler/pipeline.h).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/proto/project.pb.h"

namespace netloom {

struct ParallelLayout {
  enum class Strategy { None, Data, Tensor, Pipeline };
  Strategy strategy = Strategy::None;
  int ranks = 1, parts = 1;  // all the ranks; those a tensor group or pipeline spans
  int zero = 0;
  std::map<std::string, int> stage;              // node -> pipeline stage
  std::map<std::string, std::string> signature;  // node -> its SBP signature
  std::set<std::string> splitWeights;            // nodes whose signature splits a weight
  std::map<std::pair<std::string, int>, std::string> wires;  // (node, output) -> label
  struct Boxing {
    std::string what;   // "all-gather S(0) -> B"
    int64_t bytes = 0;  // per rank, each forward pass
  };
  std::map<std::pair<std::string, int>, Boxing> boxings;  // (reader, input port) -> it
  std::string error;  // why the strategy cannot be planned, naming the node
  // What one rank holds, in bytes (the fullest stage of a pipeline): weights, their
  // gradients, the optimizer's state (its shard under ZeRO), activations and the
  // largest tensor a boxing builds whole.
  int64_t weights = 0, gradients = 0, optimizerState = 0, activations = 0, boxing = 0;
  std::string describe() const;                // "tensor parallel ×2 of 2 ranks", ...
  bool splits(const std::string& node) const;  // its weights are split over the group
};

// The layout of `project` at its batch size; Strategy::None for one rank.
ParallelLayout layoutParallel(const proto::Project& project);

// The signature of `node` that a Parallel toolbar action names: "column", "row" (a
// Linear's), "heads" (attention's split along axis 1), "data" (split by the batch,
// weights whole); empty when the node has none such. The model's shapes are at
// the project's batch times `parts`.
std::string signatureFor(const proto::Project& project, const std::string& node,
                         const std::string& kind, int parts);

}  // namespace netloom
