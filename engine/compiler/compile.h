// The compiler driver: ModelDef -> validated, shape-inferred IR -> the pass manager's
// rewrite pipeline (folding, fusion, autodiff, the optimizer, dead code, chains,
// layouts...) -> its lower pipeline (buffers, in place, kernels, the memory plan,
// allocation) -> a Program bound to a ParamStore (engine/compiler/pass.h).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/compiler/sbp_plan.h"
#include "engine/runtime/program.h"
#include "engine/util/memory_budget.h"
#include "kernels/core/communicator.h"

namespace netloom {

struct CompileOptions {
  int64_t batch = 32;
  bool training = true;        // add the backward pass
  bool updateParams = true;    // with training: add the optimizer update
  bool gradientNorms = false;  // with the update: Σ grad² and a histogram per parameter, each step
  std::vector<std::string> gradientsOf;  // further tensors (e.g. inputs) to differentiate
  proto::Optimizer optimizer;            // used when training
  std::string loss;                      // loss node; empty: the model's only loss node
  std::vector<std::string> metrics;      // reported nodes; empty: every loss and metric node
  std::vector<std::string> keep;         // further values to keep readable after a run
  uint64_t seed = 0;                     // initialises parameters the store does not hold yet
  // Optional passes to leave out, by name (--disable-pass; "in-place" and "in place"
  // alike). fuse false leaves out folding, fusion and chains (--no-fuse).
  std::set<std::string> disabledPasses;
  bool fuse = true;
  // Without training: the program runs in evaluation mode only (StepContext::training
  // false), so fusion may fold BatchNorm's running statistics into the layer before.
  bool evaluation = false;
  // Element-wise ops write over an input they read last (the in-place pass); off,
  // every value has a buffer of its own (for comparison and tests).
  bool inPlace = true;
  // Run convolution regions in oneDNN's blocked layout (the layout pass); off, every
  // activation is plain NCHW.
  bool blockedLayouts = true;
  // Take the last kernel of every list (the plain reference) instead of the first
  // that accepts: tests compare the two on the same inputs.
  bool referenceKernels = false;
  // Plans the new parameters, their optimizer state and the arena before they are
  // allocated; null: a budget of what this process can have now.
  std::shared_ptr<MemoryBudget> budget;
  // How a refusal names the setting the batch comes from ("train.batch_size 64").
  std::string batchField;
  // Plan the memory only: no parameter is created, nothing allocated or prepared, and
  // the program cannot run (its arenaBytes and persistentBytes say what it would take).
  bool planOnly = false;
  // On a device the host cannot address: record the step once and replay it (a CUDA
  // Graph); false issues every launch each step (Program::graphs).
  bool graphs = true;
  // Generation (no training): attention keeps keys and values of up to this many
  // positions between steps, each step one token at the "position" input (the
  // kv-cache pass); 0: none.
  int64_t kvCache = 0;
  Precision precision = Precision::F32;
  // fp16's loss scaling: the first step's scale and the finite steps before it doubles.
  double initLossScale = 65536;
  int64_t lossScaleInterval = 2000;
  // Data parallelism (with training and the update): the gradients are summed across
  // `comm`'s ranks in buckets of about these sizes (insertGradientBuckets), and the
  // loss gradient's seed is StepContext::lossWeight. Null or one rank: none of it.
  Communicator* comm = nullptr;
  // Tensor parallelism (the "sbp" pass): the model is planned over `tensorComm`'s
  // ranks at `batch` × its size (engine/compiler/sbp_plan.h), the hints first, the
  // others splitting their weights where they can; each rank compiles its parts, the
  // boxings between them, and sums its split parameters' gradients over `dataComm`
  // (the ranks holding the same parts). Null or one rank: none of it.
  Communicator* tensorComm = nullptr;
  Communicator* dataComm = nullptr;
  std::vector<SbpHint> sbpHints;
  // Boxings move while the step computes on (the "hoist boxings" and "overlap"
  // passes), on a thread of their own: worth it where a rank has cores to spare or
  // waits on a network; on one core per rank the handoffs cost more than they hide.
  bool overlap = false;
  // Pipeline parallelism (the "pipeline" passes): this rank runs stage
  // stageComm->rank() of stageComm->size() (engine/compiler/pipeline.h), its training
  // step over `microBatches` micro-batches of `batch` (the same samples every stage
  // reads) in 1F1B order; `dataComm` sums its parameters' gradients. Null or one
  // rank: none of it.
  Communicator* stageComm = nullptr;
  int microBatches = 1;
  std::map<std::string, int> stagePlacements;  // nodes pinned to stages (train.distributed.stages)
  // Every rank of the tensor group reads the same `batch` samples (an evaluation,
  // which then counts every sample once on any number of ranks), not its share.
  bool wholeBatchPerRank = false;
  // ZeRO over `comm`'s ranks (with training and the update; not with tensorComm):
  // 1 shards the optimizer state, each rank updating its shard of every bucket of
  // summed gradients and all gathering the parameters; 2 sums each bucket into the
  // shards alone (reduce-scatter), so no rank keeps the whole summed gradients.
  int zero = 0;
  int64_t firstBucketBytes = int64_t(1) << 20;
  int64_t bucketBytes = int64_t(25) << 20;
};

// The program runs on the store's device: its arena is allocated there and its
// kernels are that device's.
Result<std::unique_ptr<Program>> compile(const proto::ModelDef& model, const CompileOptions& opts,
                                         ParamStore& store);

// Validation and shape inference only, as the editor runs on every edit.
Status validateModel(const proto::ModelDef& model, int64_t batch = 1);

}  // namespace netloom
