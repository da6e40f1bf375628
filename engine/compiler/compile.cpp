#include "engine/compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "engine/compiler/autodiff.h"
#include "engine/compiler/binding.h"
#include "engine/compiler/inplace.h"
#include "engine/compiler/kernel_choice.h"
#include "engine/compiler/layout.h"
#include "engine/compiler/lifetimes.h"
#include "engine/compiler/memory_planner.h"
#include "engine/compiler/passes.h"
#include "kernels/core/checked.h"
#include "kernels/core/functors.h"

namespace netloom {

namespace {

Result<ValueId> resolveLoss(const Graph& g, const std::string& name) {
  if (!name.empty()) {
    const Node* n = g.findNode(name);
    if (!n) return makeError("train.loss names '" + name + "', but there is no such node");
    if (n->op->role != OpRole::Loss && g.values[n->outputs[0]].desc.shape.size() != 0)
      return makeError("train.loss names '" + name + "' (" + n->op->name +
                       "), which does not produce a scalar loss");
    return n->outputs[0];
  }
  std::vector<const Node*> losses;
  for (const Node& n : g.nodes)
    if (n.op->role == OpRole::Loss) losses.push_back(&n);
  if (losses.empty())
    return makeError("the model has no loss node: add one (SoftmaxCrossEntropy, MSELoss, BCELoss)");
  if (losses.size() > 1)
    return makeError("the model has several loss nodes ('" + losses[0]->name + "', '" +
                     losses[1]->name + "'): set train.loss to the one to minimise");
  return losses[0]->outputs[0];
}

bool persistent(ValueKind k) {
  return k == ValueKind::Param || k == ValueKind::Buffer || k == ValueKind::State;
}

// What each pass changed, for --explain: the nodes before and after it, and in a line
// what it did.
class PassLog {
 public:
  explicit PassLog(Program& p) : m_prog(p) {}
  void begin(std::string name) {
    m_name = std::move(name);
    m_before = m_prog.graph.nodes.size();
  }
  void end(std::string change) {
    m_prog.passes.push_back({m_name, m_before, m_prog.graph.nodes.size(), std::move(change)});
  }

 private:
  Program& m_prog;
  std::string m_name;
  size_t m_before = 0;
};

std::string joined(const std::vector<std::string>& items, const std::string& none) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : "; ") + i;
  return s.empty() ? none : s;
}

std::string counted(size_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// Gives back what a compile planned, unless it succeeds.
struct PlannedBytes {
  MemoryBudget& budget;
  int64_t bytes = 0;
  ~PlannedBytes() { budget.release(bytes); }
};

}  // namespace

Status validateModel(const proto::ModelDef& model, int64_t batch) {
  auto g = buildGraph(model, batch);
  return g ? Status{} : Status{g.error()};
}

namespace {

// What the passes share while one model compiles: the program they build, and what
// one pass leaves for the next.
struct Compilation {
  const CompileOptions& opts;
  ParamStore& store;
  std::unique_ptr<Program> prog;
  Graph& g;
  ValueId loss = kNoValue;
  std::vector<std::string> metricNames;
  std::set<ValueId> pinned;          // values no pass may fuse away or overwrite
  std::vector<ValueId> roots;        // what dead-code elimination keeps
  std::map<ValueId, ValueId> grads;  // parameter -> its gradient
  ValueId lossScale = kNoValue;
  KernelSig context;  // what every kernel is asked with besides its tensors and attributes
  Lifetimes life;
  InPlacePlan inPlace;
  std::vector<BufferRequest> requests;
  std::vector<ValueId> requested;  // the values of the first requests; workspaces follow
  int64_t inPlaceBytes = 0;        // what the overwriting outputs would take on their own
  std::vector<ChosenKernel> chosen;
  std::vector<int64_t> workspaceRequest;  // per chosen kernel, its index in `requests`
  MemoryPlan mem;
  std::shared_ptr<MemoryBudget> budget;
  int64_t* planned = nullptr;  // what the passes reserved of it, given back on failure
  bool finished = false;       // a plan only (--explain): nothing is allocated

  Compilation(const CompileOptions& o, ParamStore& s, std::unique_ptr<Program> p)
      : opts(o), store(s), prog(std::move(p)), g(prog->graph) {}
  bool updates() const { return opts.training && opts.updateParams; }
  bool scaled() const { return opts.precision == Precision::F16; }
};

using PassResult = Result<std::string>;  // what the pass changed, for --explain

// The loss and metrics, which every pass keeps.
Status resolveOutputs(Compilation& c) {
  Graph& g = c.g;
  auto loss = resolveLoss(g, c.opts.loss);
  if (!loss) return loss.error();
  c.loss = *loss;
  c.metricNames = c.opts.metrics;
  if (c.metricNames.empty())
    for (const Node& n : g.nodes)
      if (n.op->role == OpRole::Metric || n.op->role == OpRole::Loss)
        c.metricNames.push_back(n.name);
  c.pinned = {c.loss};
  for (const std::string& m : c.metricNames) {
    const Node* n = g.findNode(m);
    if (!n) return makeError("train.metrics names '" + m + "', but there is no such node");
    if (g.values[n->outputs[0]].desc.shape.size() != 0)
      return makeError("metric '" + m +
                       "' is not a scalar: " + shapeToString(g.values[n->outputs[0]].desc.shape));
    c.pinned.insert(n->outputs[0]);
  }
  for (const std::string& k : c.opts.keep) {
    ValueId v = g.findValue(k);
    if (v == kNoValue) return makeError("no tensor named '" + k + "' to keep");
    c.pinned.insert(v);
  }
  c.roots.assign(c.pinned.begin(), c.pinned.end());
  return {};
}

// Fusion may move a value to another producer but never renames values.
PassResult fusion(Compilation& c) {
  if (!c.opts.fuse) return std::string("off");
  auto fused = fuseActivations(c.g, c.pinned, KernelRegistry::instance(), c.context);
  c.prog->fusions.insert(c.prog->fusions.end(), fused.begin(), fused.end());
  return joined(fused, "nothing to fuse");
}

PassResult chains(Compilation& c) {
  if (!c.opts.fuse) return std::string("off");
  auto fused = fuseElementwiseChains(c.g, c.pinned, KernelRegistry::instance(), c.context);
  c.prog->chains = fused;
  return joined(fused, "no chain");
}

PassResult foldNormalization(Compilation& c) {
  auto folded = foldBatchNorms(c.g, c.pinned, KernelRegistry::instance(), c.context);
  if (!folded) return folded.error();
  c.prog->fusions.insert(c.prog->fusions.end(), folded->begin(), folded->end());
  return joined(*folded, "nothing to fold");
}

PassResult autocast(Compilation& c) {
  c.prog->autocast = insertAutocast(c.g, c.scaled() ? "fp16" : "bf16");
  return "16-bit rounding around " + counted(c.prog->autocast.size(), "matrix op");
}

// The gradients of the loss; without updates, each is kept for whoever asked.
// fp16 scales the loss: the seed is the scale, and the updates read whether the
// scaled gradients were finite (from their squares) and divide by it.
PassResult differentiate(Compilation& c) {
  Graph& g = c.g;
  std::vector<ValueId> wrt;
  for (const std::string& name : c.opts.gradientsOf) {
    ValueId v = g.findValue(name);
    if (v == kNoValue) return makeError("no tensor named '" + name + "' to differentiate");
    wrt.push_back(v);
  }
  auto grads = autodiff(g, c.loss, wrt);
  if (!grads) return grads.error();
  c.grads = std::move(*grads);
  if (!c.updates()) {
    for (const auto& [v, grad] : c.grads) {
      c.prog->gradients[g.values[v].name] = grad;
      c.pinned.insert(grad);
      c.roots.push_back(grad);
    }
  } else if (c.scaled()) {
    Value state;
    state.name = kLossScaleState;
    state.kind = ValueKind::State;
    state.desc = TensorDesc{{fn::LossScale::kSize}, DType::F32, {}};
    c.lossScale = g.addValue(std::move(state));
    c.prog->lossScale = c.lossScale;
  }
  return counted(c.grads.size(), "gradient") + " of the loss";
}

// Each rank's loss gradient is weighted by its share of the global batch, and the
// gradients are summed across the ranks before anything reads them.
PassResult gradientBuckets(Compilation& c) {
  if (!c.scaled())
    for (Node& n : c.g.nodes)
      if (n.name == "loss/grad/seed") {
        n.op = OpRegistry::instance().find("LossSeed");
        n.attrs = Attrs{};
      }
  for (const GradientBucket& b :
       insertGradientBuckets(c.g, c.grads, c.opts.firstBucketBytes, c.opts.bucketBytes))
    c.prog->buckets.push_back({b.name, b.params.size(), b.bytes});
  return counted(c.prog->buckets.size(), "bucket") + " summed across " +
         std::to_string(c.opts.comm->size()) + " ranks";
}

// The updates, after what reads the gradients first: their norms and histograms
// (--gradient-norms), and fp16's check that they are finite.
PassResult optimizer(Compilation& c) {
  Graph& g = c.g;
  const CompileOptions& opts = c.opts;
  const bool scaled = c.scaled();
  Attrs scaling;
  scaling.set("init_scale", opts.initLossScale);
  scaling.set("growth_interval", opts.lossScaleInterval);
  if (scaled)
    for (Node& n : g.nodes)
      if (n.name == "loss/grad/seed") {
        n.op = OpRegistry::instance().find("LossScaleSeed");
        n.attrs = scaling;
        n.inputs = {c.lossScale};
      }
  if (opts.gradientNorms || scaled) {
    const OpDef* squares = OpRegistry::instance().find("SumSquares");
    const OpDef* histogram = OpRegistry::instance().find("Histogram");
    Node check;
    check.name = "loss_scale/check";
    check.op = OpRegistry::instance().find("LossScaleCheck");
    check.attrs = scaling;
    check.backward = true;
    check.inputs = {c.lossScale};
    // A backward node reading `grad` (its squares, its histogram); its output.
    auto readGradient = [&](ValueId param, ValueId grad, const OpDef* op,
                            const char* suffix) -> Result<ValueId> {
      Node n;
      n.name = g.values[param].name + suffix;
      n.op = op;
      n.backward = true;
      n.origin = g.values[param].name;
      n.inputs = {grad};
      auto id = g.addNode(std::move(n));
      if (!id) return id.error();
      return g.nodes[*id].outputs[0];
    };
    for (const auto& [param, grad] : c.grads) {
      auto out = readGradient(param, grad, squares, "/grad_sq");
      if (!out) return out.error();
      check.inputs.push_back(*out);
      if (!opts.gradientNorms) continue;
      auto counts = readGradient(param, grad, histogram, "/grad_histogram");
      if (!counts) return counts.error();
      c.prog->gradientSquares[g.values[param].name] = *out;
      c.prog->gradientHistograms[g.values[param].name] = *counts;
      for (ValueId v : {*out, *counts}) {
        c.pinned.insert(v);
        c.roots.push_back(v);
      }
    }
    if (scaled)
      if (auto id = g.addNode(std::move(check)); !id) return id.error();
  }
  if (Status s = insertOptimizer(g, c.grads, opts.optimizer, c.lossScale); !s) return s.error();
  return "an update for each of " + counted(c.grads.size(), "parameter") +
         (opts.gradientNorms ? ", each gradient's norm and histogram" : "") +
         (scaled ? ", fp16 loss scaling" : "");
}

PassResult deadCode(Compilation& c) {
  eliminateDeadNodes(c.g, c.roots);
  return std::string("removed what no loss, metric or kept value reads");
}

PassResult layouts(Compilation& c) {
  ParamStore& store = c.store;
  auto held = [&store](const std::string& name) -> const TensorDesc* {
    ParamStore::Entry* e = store.find(name);
    return e ? &e->desc : nullptr;
  };
  auto lr = assignLayouts(c.g, c.pinned, KernelRegistry::instance(), c.context, held);
  if (!lr) return lr.error();
  c.prog->blockedTensors = lr->blocked;
  c.prog->reorders = lr->reorders;
  c.prog->packedWeights = lr->packed;
  return counted(size_t(lr->blocked), "activation") + " in nChw16c, " +
         counted(size_t(lr->reorders), "reorder") + ", " + counted(size_t(lr->packed), "weight") +
         " packed";
}

// The graph is final: every value on the device, and when each is first and last
// used inside a step.
PassResult settleValues(Compilation& c) {
  Graph& g = c.g;
  Program& prog = *c.prog;
  const DeviceId device = c.store.device().id();
  prog.loss = c.loss;
  for (const std::string& m : c.metricNames) prog.metrics.push_back({m, g.findNode(m)->outputs[0]});
  for (Value& v : g.values) v.desc.device = device;
  prog.refs.assign(g.values.size(), TensorRef{});
  for (size_t v = 0; v < g.values.size(); ++v) {
    prog.refs[v].shape = g.values[v].desc.shape;
    prog.refs[v].dtype = g.values[v].desc.dtype;
    prog.refs[v].device = device;
  }
  c.life = bufferLifetimes(g, c.pinned);
  return std::string();
}

// Element-wise ops write over inputs they are the last to read: one buffer for both.
PassResult inPlace(Compilation& c) {
  Graph& g = c.g;
  c.inPlace = c.opts.inPlace ? planInPlace(g, c.life.first, c.life.last, c.pinned) : noInPlace(g);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (c.life.first[v] < 0 || !livesInArena(g.values[v])) continue;
    int64_t bytes = bytesOf(g.values[v].desc);
    if (c.inPlace.storage[v] != ValueId(v)) {
      c.inPlaceBytes = saturatingAdd(c.inPlaceBytes, bytes);
      continue;
    }
    c.requests.push_back({bytes, c.life.first[v], c.life.last[v]});
    c.requested.push_back(ValueId(v));
  }
  for (size_t v = 0; v < g.values.size(); ++v)
    if (c.inPlace.overwrote[v] != kNoValue) c.prog->overwrote[ValueId(v)] = c.inPlace.overwrote[v];
  if (!c.opts.inPlace) return std::string("off");
  return counted(c.prog->overwrote.size(), "output") + " written over a dead input (" +
         formatBytes(c.inPlaceBytes) + ")";
}

// Kernels, chosen before the memory plan, which holds the workspaces they ask for,
// each live for its launch.
PassResult kernels(Compilation& c) {
  auto chosen = chooseKernels(c.g, KernelRegistry::instance(), c.context, c.opts.referenceKernels);
  if (!chosen) return chosen.error();
  c.chosen = std::move(*chosen);
  c.workspaceRequest.assign(c.chosen.size(), -1);
  size_t declined = 0;
  for (size_t k = 0; k < c.chosen.size(); ++k) {
    declined += !c.chosen[k].step.declined.empty();
    if (c.chosen[k].workspaceBytes <= 0) continue;
    c.workspaceRequest[k] = int64_t(c.requests.size());
    const int node = c.chosen[k].step.node;
    c.requests.push_back({c.chosen[k].workspaceBytes, node, node});
  }
  return counted(c.chosen.size(), "kernel") + " chosen; " + std::to_string(declined) +
         " where a faster one declined";
}

PassResult memory(Compilation& c) {
  // cuBLASLt and cuDNN read fastest from 256-byte boundaries; the CPU's vectors need 64.
  const int64_t alignment = c.store.device().hostAddressable() ? 64 : 256;
  MemoryPlan& mem = c.mem;
  mem = planMemory(c.requests, alignment);
  // Naive: every tensor its own buffer, those written in place too.
  mem.naiveBytes =
      saturatingAdd(mem.naiveBytes, (c.inPlaceBytes + alignment - 1) / alignment * alignment);
  std::set<ValueId> bound;  // what bindParams binds: every persistent tensor a node reads
  for (const Node& n : c.g.nodes)
    for (ValueId v : n.inputs)
      if (persistent(c.g.values[v].kind) && bound.insert(v).second)
        c.prog->persistentBytes += numel(c.g.values[v].desc.shape) * int64_t(sizeof(float));
  c.prog->arenaBytes = mem.arenaBytes;
  c.prog->naiveBytes = mem.naiveBytes;
  return "arena " + formatBytes(mem.arenaBytes) + " for " + counted(c.requests.size(), "buffer") +
         " (naive " + formatBytes(mem.naiveBytes) + ")";
}

// The plan made real: the budget reserved, the parameters bound, the arena
// allocated, each kernel prepared with its tensors and workspace.
PassResult allocate(Compilation& c) {
  Program& prog = *c.prog;
  ParamStore& store = c.store;
  const Graph& g = c.g;
  const MemoryPlan& mem = c.mem;
  if (Status s =
          planBudget(prog, store, mem, c.requests, c.requested, c.opts, *c.budget, *c.planned);
      !s)
    return s.error();
  if (Status s = bindParams(prog, store, c.opts.seed); !s) return s.error();
  if (!prog.arena.resize(store.device(), mem.arenaBytes))
    return makeRefusal("the activations (arena) need " + formatBytes(mem.arenaBytes) +
                       ", which this process could not allocate");
  if (!store.device().hostAddressable()) {
    prog.stepValues = DeviceBuffer(store.device(), sizeof(DeviceStepValues));
    prog.guard = DeviceBuffer(store.device(), sizeof(float));
    if (prog.guard.ok()) {
      const float up = 1.f;
      writeFloats(store.device(), prog.guard.data(), &up, 1);
    }
    if (!prog.stepValues.ok() || !prog.guard.ok())
      return makeRefusal("the step's values need " + std::to_string(sizeof(DeviceStepValues)) +
                         " bytes on " + store.device().id().toString() +
                         ", which it could not allocate");
  }
  for (size_t k = 0; k < c.requested.size(); ++k)
    prog.refs[c.requested[k]].data = prog.arena.data() + mem.offsets[k];
  for (size_t v = 0; v < g.values.size(); ++v)
    if (c.inPlace.storage[v] != ValueId(v))
      prog.refs[v].data = prog.refs[c.inPlace.storage[v]].data;

  // Each kernel prepared, its workspace in the arena it asked for.
  for (size_t k = 0; k < c.chosen.size(); ++k) {
    ChosenKernel& ck = c.chosen[k];
    const Node& n = g.nodes[ck.step.node];
    // A library may refuse a configuration only when asked to build it (oneDNN
    // throws): the error names the node instead of ending the process.
    try {
      ck.step.fn = ck.impl->prepare(ck.sig);
    } catch (const std::exception& e) {
      return makeError("node '" + (n.backward ? n.origin : n.name) + "' (" + n.op->name +
                       "): kernel " + ck.step.kernel + " failed to prepare: " + e.what());
    }
    // A small kernel runs on the calling thread alone (the CPU's choice).
    int64_t bytes = 0;
    for (const auto* descs : {&ck.sig.in, &ck.sig.out})
      for (const TensorDesc& d : *descs) bytes = saturatingAdd(bytes, bytesOf(d));
    if (store.device().runsAlone(double(ck.step.flops), bytes)) {
      ck.step.fn = store.device().alone(std::move(ck.step.fn));
      ck.step.alone = true;
    }
    if (auto detail = ck.impl->detail)
      ck.step.detail = [detail, sig = ck.sig] { return detail(sig); };
    if (c.workspaceRequest[k] >= 0) {
      ck.step.workspace = prog.arena.data() + mem.offsets[size_t(c.workspaceRequest[k])];
      ck.step.workspaceBytes = c.requests[size_t(c.workspaceRequest[k])].bytes;
    }
    for (ValueId v : n.inputs) ck.step.in.push_back(prog.refs[v]);
    for (ValueId v : n.outputs) ck.step.out.push_back(prog.refs[v]);
    prog.steps.push_back(std::move(ck.step));
  }
  prog.updatesBegin = updatesBegin(prog);
  return std::string();
}

// Multi-tensor launches: each run of consecutive updates by one kernel with equal
// attributes is done by its first step's launch.
PassResult multiTensor(Compilation& c) {
  Program& prog = *c.prog;
  const std::vector<ChosenKernel>& chosen = c.chosen;
  size_t groups = 0, grouped = 0;
  for (size_t i = prog.updatesBegin; i < chosen.size();) {
    const KernelImpl* impl = chosen[i].impl;
    size_t end = i + 1;
    while (end < chosen.size() && impl->group && chosen[end].impl == impl &&
           chosen[end].sig.attrs->values() == chosen[i].sig.attrs->values())
      ++end;
    if (end - i > 1) {
      std::vector<KernelSig> sigs;
      std::vector<std::vector<TensorRef>> tensors;
      for (size_t k = i; k < end; ++k) {
        sigs.push_back(chosen[k].sig);
        tensors.push_back(prog.steps[k].in);
      }
      try {
        prog.steps[i].fn = impl->group(sigs, tensors);
      } catch (const std::exception& e) {
        return makeError("the " + std::to_string(end - i) + " updates from node '" +
                         c.g.nodes[prog.steps[i].node].origin + "' (kernel " + impl->name +
                         ") failed to prepare as one launch: " + e.what());
      }
      prog.steps[i].groupEnd = end;
      prog.steps[i].alone = false;  // the group's launch is as its kernel made it
      ++groups;
      grouped += end - i;
      for (size_t k = i + 1; k < end; ++k) prog.steps[k].fn = nullptr;
    }
    i = end;
  }
  return groups ? counted(grouped, "update") + " in " + counted(groups, "launch")
                : std::string("none");
}

// One step of compilation: a rewriting pass over the graph or one that plans or
// builds the program. Those named are listed by --explain, in this order, with the
// nodes before and after and what they changed.
struct Pass {
  const char* name;  // null: not listed
  bool (*runs)(const Compilation&);
  PassResult (*run)(Compilation&);
  bool planOnly = true;  // runs for a plan that allocates nothing (--explain)
};

bool always(const Compilation&) {
  return true;
}

const Pass kPasses[] = {
    {"folding",
     [](const Compilation& c) { return c.opts.evaluation && !c.opts.training && c.opts.fuse; },
     foldNormalization},
    {"fusion", always, fusion},
    {"autocast", [](const Compilation& c) { return c.opts.precision != Precision::F32; }, autocast},
    {"autodiff", [](const Compilation& c) { return c.opts.training; }, differentiate},
    {"gradient buckets",
     [](const Compilation& c) { return c.updates() && c.opts.comm && c.opts.comm->size() > 1; },
     gradientBuckets},
    {"optimizer", [](const Compilation& c) { return c.updates(); }, optimizer},
    {"dead code", always, deadCode},
    {"chains", always, chains},
    {"layouts",
     [](const Compilation& c) { return c.opts.blockedLayouts && !c.opts.referenceKernels; },
     layouts},
    {nullptr, always, settleValues},
    {"in place", always, inPlace},
    {"kernels", always, kernels},
    {"memory", always, memory},
    {nullptr, always, allocate, false},
    {"multi-tensor", always, multiTensor, false},
};

Result<std::unique_ptr<Program>> compileUnguarded(const proto::ModelDef& model,
                                                  const CompileOptions& opts, ParamStore& store) {
  auto t0 = std::chrono::steady_clock::now();
  auto built = buildGraph(model, opts.batch);
  if (!built) return built.error();
  auto prog = std::make_unique<Program>();
  prog->graph = std::move(*built);
  prog->batch = opts.batch;
  prog->training = opts.training;
  prog->device = &store.device();
  prog->graphs = opts.graphs;
  prog->precision = opts.precision;
  Compilation c(opts, store, std::move(prog));
  if (Status s = resolveOutputs(c); !s) return s.error();
  c.context.device = &store.device();
  c.context.autocast = opts.precision != Precision::F32;
  c.context.comm = opts.comm;
  c.budget = budgetOrThisProcess(opts.budget);
  PlannedBytes planned{*c.budget};
  c.planned = &planned.bytes;
  PassLog log(*c.prog);
  for (const Pass& pass : kPasses) {
    if (!pass.runs(c) || (opts.planOnly && !pass.planOnly)) continue;
    if (pass.name) log.begin(pass.name);
    PassResult changed = pass.run(c);
    if (!changed) return changed.error();
    if (pass.name) log.end(std::move(*changed));
  }
  c.prog->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  planned.bytes = 0;  // kept for the program's life
  return std::move(c.prog);
}

}  // namespace

// What the budget did not foresee (a library's own allocations) still ends as an
// error, not as an exception through the engine's API.
Result<std::unique_ptr<Program>> compile(const proto::ModelDef& model, const CompileOptions& opts,
                                         ParamStore& store) {
  try {
    return compileUnguarded(model, opts, store);
  } catch (const std::bad_alloc&) {
    return makeRefusal("compiling the model at batch " + std::to_string(opts.batch) +
                       " ran out of memory");
  } catch (const std::exception& e) {
    return makeError("compiling the model at batch " + std::to_string(opts.batch) +
                     " failed: " + e.what());
  }
}

}  // namespace netloom
