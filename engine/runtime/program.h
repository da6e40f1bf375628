// A compiled Program: a flat, ordered list of kernel launches over buffers bound at
// compile time, one planned arena for everything that lives inside a step, and the
// persistent parameters bound from a ParamStore. Running it allocates nothing.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/runtime/param_store.h"

namespace netloom {

// train.precision: float throughout, or autocast to bfloat16 or IEEE half (with
// loss scaling) around the matrix ops.
enum class Precision { F32, BF16, F16 };
const char* precisionName(Precision p);  // "fp32", "bf16", "fp16"
// From train.precision's spelling; empty is fp32. The error names the field.
Result<Precision> parsePrecision(const std::string& s);

struct PlanStep {
  NodeId node = -1;
  std::string kernel;                   // the chosen implementation
  std::string declined;                 // why faster implementations declined, for --explain
  std::function<std::string()> detail;  // the kernel's own account, asked by --explain
  KernelFn fn;
  std::vector<TensorRef> in, out;
  void* workspace = nullptr;  // in the arena, live for this launch only
  int64_t workspaceBytes = 0;
  // A multi-tensor launch (KernelImpl::group) does steps [this one, groupEnd); the
  // others in it have no fn of their own.
  size_t groupEnd = 0;
  bool alone = false;  // run by the calling thread alone (Device::runsAlone)
  // A boxing run on the program's collective lane (the "overlap" pass): the steps
  // before joinAt go on meanwhile, and step joinAt waits for it. 0: in order.
  size_t joinAt = 0;
  int64_t flops = 0;  // floating-point operations per launch (OpDef::flops; 0 if none)
};

// The device memory everything inside a step lives in; owned by the program.
class Arena {
 public:
  // False when the memory cannot be had (the arena is then empty).
  bool resize(Device& device, int64_t bytes);
  char* data() const { return static_cast<char*>(m_buffer.data()); }
  int64_t size() const { return m_size; }

 private:
  DeviceBuffer m_buffer;
  int64_t m_size = 0;
};

// A thread that runs a program's boxings in the order given, while the step's own
// thread computes on (PlanStep::joinAt). A boxing's failure is rethrown by the wait
// that joins it.
class CollectiveLane {
 public:
  CollectiveLane();
  ~CollectiveLane();
  // Its ticket: wait(ticket) returns once it and every one before it have run.
  uint64_t submit(std::function<void()> fn);
  void wait(uint64_t ticket);
  void waitAll() { wait(m_submitted); }
  // Waits for everything, keeping no error (the step is failing already).
  void drain() noexcept;

 private:
  void work();
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::function<void()>> m_jobs;
  uint64_t m_submitted = 0, m_done = 0;
  std::exception_ptr m_error;
  bool m_stop = false;
  std::thread m_thread;
};

struct Program {
  Device* device = nullptr;  // where the arena and the parameters live and kernels run
  Graph graph;
  std::vector<PlanStep> steps;
  std::vector<TensorRef> refs;  // per value; data null when a value is never used
  Arena arena;
  int64_t arenaBytes = 0;
  int64_t naiveBytes = 0;
  int64_t persistentBytes = 0;  // the parameters, buffers and optimizer state it binds
  int64_t batch = 0;
  bool training = false;
  ValueId loss = kNoValue;
  std::vector<std::pair<std::string, ValueId>> metrics;  // reported scalars, by node name
  std::vector<std::string> fusions;                      // what the fusion pass merged
  std::vector<std::string> chains;  // element-wise chains each run as one Pointwise loop
  int blockedTensors = 0;           // activations the layout pass put in nChw16c
  int reorders = 0;                 // layout conversions it inserted
  int packedWeights = 0;            // parameters it stores in a kernel's preferred layout
  // Outputs the in-place pass wrote over a dead input -> the input each overwrote.
  std::map<ValueId, ValueId> overwrote;
  // The compiler's passes in the order they ran: the graph's nodes before and after
  // each, and what it changed (--explain lists them).
  struct PassRecord {
    std::string name;
    size_t nodesBefore = 0, nodesAfter = 0;
    std::string change;
  };
  std::vector<PassRecord> passes;
  // The pass manager's pipelines (engine/compiler/pass.h) as they ran: each pass, in
  // order, with what it reads and keeps valid, and whether it ran, was disabled
  // (--disable-pass), had nothing to do or was left for a plan that allocates.
  struct PipelineEntry {
    std::string pipeline;  // "rewrite" or "lower"
    std::string name;
    bool optional = false;
    std::string needs, preserves;  // analyses, e.g. "shapes, producers"
    std::string status;            // "ran", "disabled", "not needed", "left for the real plan"
  };
  std::vector<PipelineEntry> pipeline;
  // Gradients kept readable when the optimizer does not consume them: tensor name ->
  // its gradient (parameters, and CompileOptions::gradientsOf).
  std::map<std::string, ValueId> gradients;
  // With CompileOptions::gradientNorms: per parameter, the scalar Σ grad² of the step,
  // and the gradient's histogram (fn::Histogram).
  std::map<std::string, ValueId> gradientSquares;
  std::map<std::string, ValueId> gradientHistograms;
  double compileMs = 0;
  // train.precision, and the matrix ops autocast rounds around (insertAutocast).
  Precision precision = Precision::F32;
  std::vector<std::string> autocast;
  // fp16's loss scaling state (fn::LossScale), else kNoValue. The scaler checks the
  // gradients itself: updateGradients() is then empty, and a finite check covers
  // the loss alone.
  ValueId lossScale = kNoValue;
  // Data parallelism's gradient buckets, in the order they are summed (for --explain).
  struct Bucket {
    std::string name;
    size_t tensors = 0;
    int64_t bytes = 0;
  };
  std::vector<Bucket> buckets;
  // A pipeline stage's weights that other stages read too (tied): the stages holding
  // one, in order, and the one whose initial values they all start from.
  struct Tie {
    std::string name;
    std::vector<int> stages;
    int source = 0;
    int64_t tag = 0;  // the same on every stage holding it
  };
  std::vector<Tie> ties;

  // The first optimizer update in `steps` (steps.size() without one): before it the
  // loss and every gradient are complete and no parameter has changed yet.
  size_t updatesBegin = 0;

  // On a device the host cannot address, a step (or each half of one checked between
  // its halves) runs launch by launch the first time, is recorded the second (a CUDA
  // Graph) and replayed from then on, with the step's values in `stepValues`;
  // `graphs` false issues every launch each time instead (for comparison).
  bool graphs = true;
  DeviceBuffer stepValues;  // a DeviceStepValues on such a device
  struct Recorded {
    int runs = 0;
    std::unique_ptr<Replay> replay;  // once recorded
    std::string why;                 // why it could not be, if so
    bool reported = false;
  };
  // By [begin, end), ctx.training (a decision each launch makes on the host) and
  // whether the step is guarded.
  mutable std::map<std::tuple<size_t, size_t, bool, bool>, Recorded> recorded;
  // Where boxings with a joinAt run, made on first use.
  mutable std::unique_ptr<CollectiveLane> lane;
  // On such a device, the flag Device::checkFinite lowers (KernelIO::guard): 1 while
  // every guarded step was finite.
  DeviceBuffer guard;
  // Why a range could not be recorded, each reason once (the trainer logs them).
  std::vector<std::string> takeRecordingProblems() const;

  void run(const StepContext& ctx) const { runRecorded(ctx, 0, steps.size()); }
  // Steps [begin, end), each launched (a replay of single launches, a partial run).
  void run(const StepContext& ctx, size_t begin, size_t end) const;
  // Steps [begin, end), recorded on first use where the device can replay them.
  void runRecorded(const StepContext& ctx, size_t begin, size_t end, bool guarded = false) const;
  // The whole step checked on its device, with no wait: the loss and the gradients
  // the updates read are checked before the updates, which do nothing once `guard`
  // is down (a device the host cannot address only).
  void runGuarded(const StepContext& ctx) const { runRecorded(ctx, 0, steps.size(), true); }
  // The gradients the optimizer updates read, as their launches see them.
  std::vector<TensorRef> updateGradients() const;
  // As run(), adding each launch's wall time to `seconds` (one slot per step).
  void runProfiled(const StepContext& ctx, std::vector<double>& seconds) const;
  // A value as the host reads it: read where the host addresses the device's memory,
  // else copied out (which waits for the step's work to finish).
  float scalar(ValueId v) const;
  // Launches steps [begin, end) with the step's values already written.
  void issue(const StepContext& ctx, size_t begin, size_t end, bool guarded) const;
  std::vector<float> read(ValueId v) const;
  const TensorRef* input(const std::string& field) const;
  // The compiled plan, the kernels chosen (and why others declined), the fusions
  // and the memory plan, as `netloom-train --explain` prints it.
  std::string explain() const;
};

}  // namespace netloom
