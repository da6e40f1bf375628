// How a model's forward graph spreads over `ranks` ranks: an SBP for every value and
// a signature for every node, chosen in graph order, each the one whose boxings of
// its inputs take the least time on the link (engine/graph/sbp.h's boxing: the bytes
// over the link's measured bandwidth, plus its latency per message), unless a hint
// names the node's signature. Data enters split by the batch, S(0), as data parallelism has it;
// parameters are laid out as the chosen signature needs, so they cost no boxing; a
// loss or metric over batch-split inputs is each rank's own mean, a partial value
// weighted by the rank's share of the batch (as the data-parallel step weights it).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/graph/graph.h"
#include "kernels/core/communicator.h"

namespace netloom {

// A node's signature picked by hand: the node's name and the signature's str()
// ("B | S(0), S(0) -> S(1)").
using SbpHint = std::pair<std::string, std::string>;

struct SbpBoxingStep {
  ValueId value = kNoValue;
  NodeId reader = -1;
  Sbp from, to;
  Boxing box;
};

// A parameter's gradient has the dual of its SBP (autodiff's rule): a broadcast
// weight's gradient is partial on every rank and summed (all-reduce, the data-parallel
// buckets), a split one's is split alike, and a partial one's is broadcast.
Sbp gradientSbp(const Sbp& param);

// What one rank holds under a plan, in bytes: its parts of the parameters, their
// gradients and an optimizer's state (`stateCopies` tensors per parameter: 2 for
// Adam, 1 for SGD with momentum), of every value the forward pass writes, and the
// largest tensor a boxing builds whole.
struct RankMemory {
  int64_t weights = 0, gradients = 0, optimizerState = 0, activations = 0, boxing = 0;
  int64_t total() const { return weights + gradients + optimizerState + activations + boxing; }
};

struct SbpPlan {
  int ranks = 1;
  std::map<ValueId, Sbp> sbp;                // every value the nodes read or write
  std::map<NodeId, SbpSignature> signature;  // every node
  std::vector<SbpBoxingStep> boxings;        // in graph order
  LinkCost link;                             // the cost model it was planned with
  int64_t bytesPerStep() const;              // the boxings' bytes, per rank
  double secondsPerStep() const;             // their time on `link`, forward
  // Bytes per rank a training step sums of the parameters' gradients (those partial).
  int64_t gradientBytes(const Graph& g) const;
  RankMemory memory(const Graph& g, int stateCopies) const;
  // Every node's signature, every value's SBP and per-rank shape, every boxing with
  // its bytes, and what a rank holds.
  std::string explain(const Graph& g) const;
};

struct SbpPlanOptions {
  std::vector<SbpHint> hints;
  // Tensor parallelism: a node with a signature that splits one of its parameters
  // takes one of those, the cheapest, unless a hint says otherwise.
  bool splitWeights = false;
  // Every rank reads the whole batch (B), as an evaluation of a tensor group does,
  // and each loss and metric is the whole batch's on every rank; else each rank
  // reads its share, S(0).
  bool wholeInputs = false;
  // Parameters laid out already (by name): the plans of one model share its store.
  std::map<std::string, Sbp> held;
  // What moving bytes costs: the tensor group's measured link, else an assumed one.
  LinkCost link;
};

// Errors name the node: a hint for a node that is not there, or naming a signature
// the node does not have (listing those it has), or one whose split does not divide.
Result<SbpPlan> planSbp(const Graph& g, int ranks, const SbpPlanOptions& opts);
inline Result<SbpPlan> planSbp(const Graph& g, int ranks, const std::vector<SbpHint>& hints = {}) {
  return planSbp(g, ranks, SbpPlanOptions{hints, false, false, {}, {}});
}

}  // namespace netloom
