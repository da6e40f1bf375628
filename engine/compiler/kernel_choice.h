// Kernel choice: for every node, the first kernel in its op's ordered list for the
// device that accepts the node's configuration (a node with a blocked tensor goes to
// kernels that read layouts), with why the faster ones declined.
#pragma once

#include <vector>

#include "engine/graph/graph.h"
#include "engine/runtime/program.h"
#include "engine/util/status.h"

namespace netloom {

struct ChosenKernel {
  PlanStep step;  // node, FLOPs, kernel name and why others declined; no fn yet
  const KernelImpl* impl = nullptr;
  KernelSig sig;
  int64_t workspaceBytes = 0;  // the scratch the kernel asks for, live for its launch
};

// `context` carries the device, autocast and communicator every kernel is asked
// with. With `reference`, each list's plain reference (its last kernel but the
// widened twins) is tried first and alone, then its twin for bf16 tensors. Nodes filled from
// outside the step (the loader's) get none. Fails naming the node that no kernel takes, and why
// each declined.
Result<std::vector<ChosenKernel>> chooseKernels(const Graph& g, const KernelRegistry& kernels,
                                                const KernelSig& context, bool reference);

}  // namespace netloom
