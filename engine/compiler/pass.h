// The pass manager. A pass is a class in a file of its own (engine/compiler/passes/):
// it names itself, says whether a user may turn it off (--disable-pass NAME), which
// analyses it reads and which of them it leaves valid, and when it applies. Two
// pipelines run in order: rewrite (the graph to the graph: folding, fusion, autodiff,
// the optimizer, chains, layouts...) and lower (the graph to the plan: buffers, in
// place, kernels, the memory plan, allocation). The analyses (shapes, producers,
// lifetimes) are computed when a pass first asks for one and dropped by the manager
// after each pass that does not preserve it; no pass invalidates anything by hand.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/compiler/compile.h"
#include "engine/compiler/inplace.h"
#include "engine/compiler/kernel_choice.h"
#include "engine/compiler/lifetimes.h"
#include "engine/compiler/memory_planner.h"
#include "engine/compiler/passes.h"

namespace netloom {

// Analyses, as a set of bits.
enum Analysis : uint8_t {
  kShapes = 1,     // every value's shape and type as its producer's inference gives them
  kProducers = 2,  // the nodes that read each value
  kLifetimes = 4,  // each arena value's first and last step
  kAllAnalyses = 7,
};

class PassContext;

// The analyses of one compilation, computed on demand.
class AnalysisCache {
 public:
  explicit AnalysisCache(PassContext& c) : m_c(c) {}
  // Fails naming the node whose recorded shape its inference no longer gives.
  Status shapes();
  const std::vector<std::vector<NodeId>>& readers();
  const Lifetimes& lifetimes();
  // For a pass that refines the lifetimes and says it keeps them valid: "in place"
  // extends a chain's first value to the chain's end.
  Lifetimes& refineLifetimes();
  void keepOnly(uint8_t preserved);
  uint8_t valid() const { return m_valid; }

 private:
  PassContext& m_c;
  uint8_t m_valid = 0;
  std::vector<std::vector<NodeId>> m_readers;
  Lifetimes m_lifetimes;
};

// What the lower pipeline builds up, pass by pass: the arena's buffer requests, the
// chosen kernels and the memory plan.
struct Lowering {
  InPlacePlan inPlace;
  std::vector<BufferRequest> requests;
  std::vector<ValueId> requested;  // the values of the first requests; workspaces follow
  int64_t inPlaceBytes = 0;        // what the overwriting outputs would take on their own
  std::vector<ChosenKernel> chosen;
  std::vector<int64_t> workspaceRequest;  // per chosen kernel, its index in `requests`
  MemoryPlan mem;
  std::shared_ptr<MemoryBudget> budget;
  int64_t planned = 0;  // what the passes reserved of the budget, given back on failure
};

// What the passes of one compilation share: the options, the program and its graph,
// the analyses, and the facts one pass settles for those after it.
class PassContext {
 public:
  PassContext(const CompileOptions& o, ParamStore& s, Program& p);

  const CompileOptions& opts;
  ParamStore& store;
  Program& prog;
  Graph& g;
  KernelSig context;  // what every kernel is asked with besides its tensors and attributes
  AnalysisCache analyses;

  // Settled by "outputs": what every pass keeps.
  ValueId loss = kNoValue;
  std::vector<std::string> metricNames;
  std::set<ValueId> pinned;    // values no pass may fuse away or overwrite
  std::vector<ValueId> roots;  // what dead-code elimination keeps
  // Settled by "autodiff": each parameter's gradient and the loss gradient's seed.
  std::map<ValueId, ValueId> grads;
  NodeId seed = -1;
  ValueId lossScale = kNoValue;  // fp16's loss-scaling state
  // Settled by "pipeline": the values received from other stages whose gradients go
  // back (to `peer` with `tag`), each node's micro-batch (by name), and the values
  // autodiff differentiates besides the parameters; by "autodiff", those gradients.
  struct Received {
    ValueId value = kNoValue;
    int peer = 0;
    int64_t tag = 0;
    int micro = 0;
  };
  std::vector<Received> received;
  std::map<std::string, int> microOf;
  std::vector<ValueId> alsoWrt;
  std::map<ValueId, ValueId> receivedGrads;
  std::map<std::string, int64_t> tieTags;  // the tied weights this stage holds
  // Settled by "gradient buckets" under ZeRO: the buckets the updates shard.
  std::vector<GradientBucket> zeroBuckets;

  Lowering lower;

  bool updates() const { return opts.training && opts.updateParams; }
  bool scaled() const { return opts.precision == Precision::F16; }
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual const char* name() const = 0;
  // Whether --disable-pass may turn it off: the program computes the same without it.
  virtual bool optional() const { return false; }
  virtual uint8_t needs() const { return 0; }
  virtual uint8_t preserves() const { return 0; }
  // Whether it has work in this compilation (autodiff only when training...).
  virtual bool applies(const PassContext&) const { return true; }
  // Whether it runs for a plan that allocates nothing (--explain).
  virtual bool planOnly() const { return true; }
  // Whether --explain lists what it changed (bookkeeping passes are in the pipeline only).
  virtual bool listed() const { return true; }
  // Does the work; says in a line what it changed, for --explain.
  virtual Result<std::string> run(PassContext& c) = 0;
};

enum class Pipeline { Rewrite, Lower };

class PassManager {
 public:
  void add(Pipeline p, std::unique_ptr<Pass> pass);
  // The two pipelines, as compile() runs them.
  static PassManager standard();
  // Checks `disabled` names only optional passes; the error lists them.
  Status checkDisabled(const std::set<std::string>& disabled) const;
  // Runs every pass that applies and is not disabled, rewrite then lower, recording
  // each in prog.passes and the pipeline in prog.pipeline.
  Status run(PassContext& c) const;
  std::vector<std::string> optionalNames() const;

 private:
  struct Entry {
    Pipeline pipeline;
    std::unique_ptr<Pass> pass;
  };
  std::vector<Entry> m_passes;
};

// The passes `o` turns off: disabledPasses, and the older switches (fuse: folding,
// fusion and chains; inPlace; blockedLayouts), by passKey.
std::set<std::string> disabledPasses(const CompileOptions& o);

// A pass's name as --disable-pass takes it: "in place" and "in-place" alike.
std::string passKey(const std::string& name);

// Each pass of the standard pipelines (engine/compiler/passes/*.cpp).
std::unique_ptr<Pass> kvCachePass();
std::unique_ptr<Pass> outputsPass();
std::unique_ptr<Pass> sbpPass();
std::unique_ptr<Pass> pipelinePass();
std::unique_ptr<Pass> pipelineGradientsPass();
std::unique_ptr<Pass> pipelineSchedulePass();
std::unique_ptr<Pass> foldingPass();
std::unique_ptr<Pass> fusionPass();
std::unique_ptr<Pass> autocastPass();
std::unique_ptr<Pass> bf16StoragePass();
std::unique_ptr<Pass> autodiffPass();
std::unique_ptr<Pass> gradientBucketsPass();
std::unique_ptr<Pass> optimizerPass();
std::unique_ptr<Pass> deadCodePass();
std::unique_ptr<Pass> chainsPass();
std::unique_ptr<Pass> layoutsPass();
std::unique_ptr<Pass> valuesPass();
std::unique_ptr<Pass> inPlacePass();
std::unique_ptr<Pass> buffersPass();
std::unique_ptr<Pass> kernelsPass();
std::unique_ptr<Pass> memoryPass();
std::unique_ptr<Pass> allocatePass();
std::unique_ptr<Pass> multiTensorPass();
std::unique_ptr<Pass> overlapPass();
std::unique_ptr<Pass> hoistBoxingsPass();

// For pass files: "1 gradient", "3 gradients"; items joined by "; ", or `none`.
std::string counted(size_t n, const std::string& what);
std::string joined(const std::vector<std::string>& items, const std::string& none);

}  // namespace netloom
