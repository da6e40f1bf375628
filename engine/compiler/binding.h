// Making a plan real, after the passes: the run's memory reserved before anything is
// allocated, and the persistent tensors bound to the store.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/compiler/compile.h"
#include "engine/compiler/memory_planner.h"
#include "engine/util/memory_budget.h"

namespace netloom {

// Binds every persistent tensor to its store entry, creating and initialising the
// parameters of a node that the store did not hold yet. Initialisers write
// PyTorch's layout; the store converts where it keeps a tensor packed.
Status bindParams(Program& p, ParamStore& store, uint64_t seed);

// Plans what a program adds to the run's memory before any of it is allocated: the
// persistent tensors the store does not hold yet (and the copies their initialisers
// fill), then the arena of `mem`, whose first requests hold the values `requested`
// (workspaces follow); adds what it planned to `planned`. Each refusal names the
// largest tensor, which is what to shrink.
Status planBudget(const Program& p, ParamStore& store, const MemoryPlan& mem,
                  const std::vector<BufferRequest>& requests, const std::vector<ValueId>& requested,
                  const CompileOptions& opts, MemoryBudget& budget, int64_t& planned);

// Where the optimizer updates start: the autodiff and optimizer passes append them
// after the whole backward pass, so the loss and gradients can be checked before any
// parameter changes. Should a gradient be written after the first update, the check
// has to wait for the end of the step (steps.size()).
size_t updatesBegin(const Program& p);

}  // namespace netloom
