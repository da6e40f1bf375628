// The layout pass: chooses for each activation the memory layout its kernels run
// fastest on, and places the conversions.
//
// oneDNN's convolutions, pooling and batch normalisation have vectorised code for
// channel-blocked tensors (nChw16c) that runs 2-4× faster than on plain NCHW. The
// pass finds the regions of a plan that can stay blocked end to end (chains of
// convolutions, normalisation, activations, pooling, residual sums, and their
// gradients), marks their tensors Blocked16, and inserts one Reorder node wherever
// a region meets a plain consumer (Flatten, a loss) or a plain producer. The
// conversion is part of the compiled plan, never a per-launch decision.
//
// A region is made blocked only when it touches a convolution: blocking a chain of
// element-wise ops alone gains nothing. A tensor whose channels do not divide by 16
// is blocked with its last block padded (zeros), where every kernel in its region
// takes that and the padding at most quadruples it: LeNet's 6-channel convolutions
// run 2.5-4x faster so than on plain NCHW. A convolution takes the most of its ports
// blocked that a kernel accepts; the others are converted around it. Inputs,
// parameters and anything read after a step (losses, metrics, kept tensors) stay
// plain.
//
// Then it packs convolution weights: a parameter that only convolutions and its
// optimizer update read, whose forward convolution runs blocked, is stored (with
// its gradient and optimizer state) in the layout that convolution's kernel prefers,
// so no step converts it. The parameter store converts to and from PyTorch's layout
// only at initialisation, checkpoints, import and export. A parameter already in
// the store keeps the layout it has there, so every plan that shares a store agrees.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "engine/graph/graph.h"
#include "kernels/core/kernel.h"

namespace netloom {

struct LayoutReport {
  int blocked = 0;   // activations in a blocked layout
  int reorders = 0;  // Reorder nodes inserted
  int packed = 0;    // parameters stored packed
};

// The layout a persistent tensor already has in the parameter store, or null.
using StoredLayout = std::function<const TensorDesc*(const std::string& name)>;

// Rewrites `g` in place. `pinned` values are read from outside the plan and stay
// plain. Kernels are asked (through their decline rule) whether they take the
// blocked configuration, so a node only becomes blocked where a kernel runs it.
// Fails only where `stored` holds a packed weight this plan's kernels cannot read.
// `context` is what every kernel of the plan will be asked with besides its tensors
// and attributes (the device, autocast, the communicator): a kernel's decline rule may
// consult the device (cuDNN asks it for a handle).
Result<LayoutReport> assignLayouts(Graph& g, const std::set<ValueId>& pinned,
                                   const KernelRegistry& kernels, const KernelSig& context,
                                   const StoredLayout& stored = {});

}  // namespace netloom
