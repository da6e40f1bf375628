// The graph rewrites the passes of engine/compiler/passes/ call, each a function in a
// file of its own (fold.cpp, fusion.cpp, chains.cpp, autocast.cpp, gradient_buckets.cpp,
// optimizer.cpp, dead_code.cpp), tested on its own. The pass manager
// (engine/compiler/pass.h) runs them in order.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/proto/project.pb.h"
#include "kernels/core/kernel.h"

namespace netloom {

// Whether some kernel of `n`'s op on the plan's device (that of `context`, a plan's
// kernel context) takes `n` as it stands, in plain layouts (which every kernel list
// ends with): a rewriting pass makes only nodes the device can run.
bool hasKernel(const Graph& g, const Node& n, const KernelRegistry& kernels,
               const KernelSig& context);
// The first of those kernels (the one the plan would choose in plain layouts), or null.
const KernelImpl* firstKernel(const Graph& g, const Node& n, const KernelRegistry& kernels,
                              const KernelSig& context);

// A node whose op has an "activation" attribute takes in the activation that alone
// reads its (first) output: that op's OpDef::epilogue, one of the attribute's
// choices (Linear or BatchNorm with ReLU), unless the output is pinned or no kernel
// of the op on the device of `context` (a plan's kernel context) takes the fused
// form. Returns what it fused.
// `readers`, when given, is consumers(g) as it stands (the pass manager's analysis).
std::vector<std::string> fuseActivations(Graph& g, const std::set<ValueId>& pinned,
                                         const KernelRegistry& kernels, const KernelSig& context,
                                         const std::vector<std::vector<NodeId>>* readers = nullptr);

// Element-wise chains (after autodiff, so the backward pass's too): ops with
// OpDef::elementwise over float tensors of one shape, each reading the one before,
// become one Pointwise node (at most kMaxPointSteps), placed where the last of them
// was, where every other reader of their values comes after it and the device has a
// kernel for it. Its outputs are the last op's value and each other value read outside
// the chain or pinned. Returns what it fused.
std::vector<std::string> fuseElementwiseChains(
    Graph& g, const std::set<ValueId>& pinned, const KernelRegistry& kernels,
    const KernelSig& context, const std::vector<std::vector<NodeId>>* readers = nullptr);

// Plans that only evaluate: each op with a `foldsInto` op (BatchNorm) whose input
// alone comes from a layer that folds a per-channel affine map (foldsChannelAffine:
// Conv2d, Linear over N × features) is folded into it. A node of the `foldsInto` op
// computes the layer's weight and bias with it folded in, before the layer, which then
// writes the folded op's output. Only where the plan's device has a kernel for that
// node. Returns what it folded.
Result<std::vector<std::string>> foldBatchNorms(Graph& g, const std::set<ValueId>& pinned,
                                                const KernelRegistry& kernels,
                                                const KernelSig& context);

// Autocast (train.precision bf16 or fp16): the float inputs and the outputs of the
// matrix ops (OpDef::autocast: Linear, MatMul, Conv2d, ConvTranspose2d) pass through
// RoundHalf, so
// they compute on 16-bit values, accumulate in float and keep float master weights,
// as under PyTorch's autocast; their gradients are rounded alike. Returns the nodes
// it rounded around.
std::vector<std::string> insertAutocast(Graph& g, const std::string& format);

// After autodiff, under bf16 or fp16: roundings of one value to one format (autocast
// makes one for each matrix op that reads the value) are one value: every reader reads
// the first, and the others, unread, go as dead code. Three Linears reading one
// LayerNorm's output kept three roundings of it for their weights' gradients. Gradients
// are untouched (each reader's was rounded apart, as PyTorch's casts are). Values in
// `keep` stay as they are. Returns how many roundings it shared.
int shareRoundings(Graph& g, const std::set<ValueId>& keep);

// After autodiff, under bf16: each matrix op (Linear, MatMul) whose two operands both
// hold bf16 values (a RoundHalf to bf16, or a ReLU gradient of one), where the device
// has a kernel for bf16 operands (oneDNN's bf16 product on a CPU with AVX512_BF16 or
// AMX), reads them from 16-bit storage: a rounding read only as such operands becomes a
// CastBf16; any other operand keeps its float and gets a CastBf16 beside it for them. The values
// are those the rounding gave; the products accumulate in float and are float. Returns the matrix
// ops that read bf16 operands.
std::vector<std::string> storeBf16Operands(Graph& g, const KernelRegistry& kernels,
                                           const KernelSig& context);

// After storeBf16Operands: every other rounding to bf16 whose readers all run on bf16
// tensors on the device (a kernel of their own, or on a CPU a float kernel widened,
// KernelRegistry::widenHalf) becomes a CastBf16 into 16-bit storage; and a cast whose
// input only it and the backward pass read moves into that input's producer, which
// then writes bf16. Values in `keep` (what the host reads, the parameters' gradients)
// stay float, as do the tensors of optimizer updates and collectives.
struct Bf16Activations {
  int values = 0;     // activations stored in bf16
  int64_t bytes = 0;  // their bytes, half of what float would take
};
// First, in any case: where a value is read besides its rounding only by the backward
// pass, the backward pass reads the rounding (one tensor kept, not two). Then, with
// `store`, the rest.
Bf16Activations storeBf16Activations(Graph& g, const KernelRegistry& kernels,
                                     const KernelSig& context, const std::set<ValueId>& keep,
                                     bool store);

// Data parallelism: the parameters' gradients in buckets, in the order the backward
// pass writes them (about `firstBytes` for the first, so its sum starts early, then
// about `bytes` each). Each bucket's BucketStart follows the node that writes its
// last gradient, so the sum runs while the backward pass goes on; every BucketWait
// is appended after the backward pass, before anything reads the gradients.
struct GradientBucket {
  std::string name;  // the same on every rank and for every batch size
  std::vector<std::string> params;
  int64_t bytes = 0;
  std::vector<ValueId> grads, paramValues;  // in the order they are written
  ValueId shard = kNoValue;                 // ZeRO-2: this rank's shard of their sum
};
// `group` "data": summed over the ranks that hold the same parts (tensor
// parallelism's split parameters), named apart from those summed over all.
// `zeroParts` > 0 (ZeRO-2): each bucket is summed into this rank's shard of it,
// one of that many (ZeroScatter), where it would have started.
std::vector<GradientBucket> insertGradientBuckets(Graph& g, const std::map<ValueId, ValueId>& grads,
                                                  int64_t firstBytes, int64_t bytes,
                                                  const std::string& group = "all",
                                                  int zeroParts = 0);

// Loss scaling's state (fn::LossScale), as it is stored with the optimizer state.
constexpr const char* kLossScaleState = "loss_scale";

// Appends one update node per parameter with a gradient, with the optimizer's state
// tensors named as PyTorch names them (exp_avg, exp_avg_sq, momentum_buffer).
// Under loss scaling, each update also reads `lossScale`, the state that says
// whether to skip the step and what to divide the gradient by.
Status insertOptimizer(Graph& g, const std::map<ValueId, ValueId>& grads,
                       const proto::Optimizer& opt, ValueId lossScale = kNoValue);

// ZeRO: one update per bucket of `buckets` (insertGradientBuckets), of this rank's
// shard of its parameters with its shard of the state (FlatShard values), reading
// the summed gradients whole or, where the bucket has a shard (ZeRO-2), that.
Status insertZeroOptimizer(Graph& g, const std::vector<GradientBucket>& buckets,
                           const proto::Optimizer& opt, ValueId lossScale, Communicator& comm);

// Removes nodes that neither produce one of `roots` (transitively) nor update state.
void eliminateDeadNodes(Graph& g, const std::vector<ValueId>& roots);

}  // namespace netloom
