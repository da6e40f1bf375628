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

// Autocast (train.precision bf16 or fp16): the float inputs and the outputs of the
// matrix ops (Linear, MatMul, Conv2d, ConvTranspose2d) pass through RoundHalf, so
// they compute on 16-bit values, accumulate in float and keep float master weights,
// as under PyTorch's autocast; their gradients are rounded alike. Returns the nodes
// it rounded around.
std::vector<std::string> insertAutocast(Graph& g, const std::string& format);

// Loss scaling's state (fn::LossScale), as it is stored with the optimizer state.
constexpr const char* kLossScaleState = "loss_scale";

// Appends one update node per parameter with a gradient, with the optimizer's state
// tensors named as PyTorch names them (exp_avg, exp_avg_sq, momentum_buffer).
// Under loss scaling, each update also reads `lossScale`, the state that says
// whether to skip the step and what to divide the gradient by.
Status insertOptimizer(Graph& g, const std::map<ValueId, ValueId>& grads,
                       const proto::Optimizer& opt, ValueId lossScale = kNoValue);

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
