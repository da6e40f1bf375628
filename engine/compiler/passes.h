// Compiler passes, each a small function over the IR, tested on its own.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/proto/project.pb.h"

namespace netloom {

// Merges Linear followed by ReLU into one Linear with a fused activation when the
// Linear's output feeds only that ReLU and is not pinned. Returns what it fused.
std::vector<std::string> fuseLinearActivation(Graph& g, const std::set<ValueId>& pinned);

// Appends one update node per parameter with a gradient, with the optimizer's state
// tensors named as PyTorch names them (exp_avg, exp_avg_sq, momentum_buffer).
Status insertOptimizer(Graph& g, const std::map<ValueId, ValueId>& grads,
                       const proto::Optimizer& opt);

// Removes nodes that neither produce one of `roots` (transitively) nor update state.
void eliminateDeadNodes(Graph& g, const std::vector<ValueId>& roots);

// The optimizer settings with every default applied (PyTorch's defaults).
struct OptimizerSettings {
  proto::Optimizer::Kind kind = proto::Optimizer::ADAM;
  double lr = 1e-3, momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
  bool nesterov = false;
};
Result<OptimizerSettings> optimizerSettings(const proto::Optimizer& opt);

}  // namespace netloom
