// Finding where a training step first went non-finite: a cheap test of the step's
// gradients each time the loss and gradients are checked, and, only when a check
// fails, a replay of the step that names the first tensor holding NaN or infinity.
#pragma once

#include <optional>
#include <string>

#include "engine/runtime/program.h"

namespace netloom {

// Σ g² in double over every gradient the optimizer updates read: non-finite exactly
// when one of them holds NaN or infinity. Call between the two halves of a step
// (Program::run up to updatesBegin, then the rest).
double updateGradientSquares(const Program& p);

struct NonFiniteTensor {
  std::string name;   // the tensor ("fc1.weight", "conv2"), or the parameter of a gradient
  std::string kind;   // "input", "parameter", "buffer", "activation", "gradient of", ...
  std::string node;   // for activations: the model node whose (forward or backward) pass wrote it
  int64_t index = 0;  // the first offending element, in the tensor's layout
  float value = 0;    // NaN or ±inf
  std::string describe() const;
};

// Replays steps [0, p.updatesBegin) on the inputs as they are now (feed the batch
// again first) and returns the first non-finite tensor in plan order: inputs and
// parameters as a step first reads them, then each step's outputs as it writes them.
// Changes running statistics as a training step would; empty when all are finite.
std::optional<NonFiniteTensor> firstNonFinite(const Program& p, const StepContext& ctx);

}  // namespace netloom
