#include "engine/compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "engine/compiler/autodiff.h"
#include "engine/compiler/inplace.h"
#include "engine/compiler/kernel_choice.h"
#include "engine/compiler/layout.h"
#include "engine/compiler/lifetimes.h"
#include "engine/compiler/memory_planner.h"
#include "engine/compiler/passes.h"
#include "kernels/core/checked.h"
#include "kernels/core/functors.h"
#include "kernels/core/rng.h"

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

// Binds every persistent tensor to its store entry, creating and initialising the
// parameters of a node that the store did not hold yet. Initialisers write
// PyTorch's layout; the store converts where it keeps a tensor packed.
// The persistent tensor a node reads as `v`: v itself, or what autocast rounded into
// v (the node's own weights, which its initialiser fills); else kNoValue.
ValueId persistentBehind(const Graph& g, ValueId v) {
  auto persistent = [&](ValueId u) {
    ValueKind k = g.values[u].kind;
    return k == ValueKind::Param || k == ValueKind::Buffer || k == ValueKind::State;
  };
  if (persistent(v)) return v;
  NodeId from = g.values[v].producer;
  static const OpDef* round = OpRegistry::instance().find("RoundHalf");
  if (from >= 0 && g.nodes[from].op == round && persistent(g.nodes[from].inputs[0]))
    return g.nodes[from].inputs[0];
  return kNoValue;
}

Status bindParams(Program& p, ParamStore& store, uint64_t seed) {
  std::set<std::string> fresh;  // created here and not initialised yet
  for (const Node& n : p.graph.nodes) {
    std::vector<ParamStore::Entry*> weights;
    bool anyNew = false;
    for (ValueId read : n.inputs) {
      ValueId v = persistentBehind(p.graph, read);
      if (v == kNoValue) continue;
      const Value& val = p.graph.values[v];
      bool weight = val.kind == ValueKind::Param || val.kind == ValueKind::Buffer;
      if (!weight && val.kind != ValueKind::State) continue;
      bool existed = store.find(val.name) != nullptr;
      ParamStore::Entry* e = store.create(val.name, val.desc, val.kind);
      if (!e) {
        const TensorDesc& held = store.find(val.name)->desc;
        return makeError("tensor '" + val.name + "' is held as " + shapeToString(held.shape) +
                         " in " + layoutName(held) + ", the plan needs " +
                         shapeToString(val.desc.shape) + " in " + layoutName(val.desc));
      }
      if (!existed) fresh.insert(val.name);
      p.refs[v] = e->ref();
      if (weight) {
        weights.push_back(e);
        anyNew = anyNew || fresh.count(val.name) > 0;
      }
    }
    if (!anyNew || !n.op->init) continue;
    std::vector<std::vector<float>> values;
    std::vector<TensorRef> refs;
    for (ParamStore::Entry* e : weights) values.push_back(ParamStore::read(*e));
    for (size_t k = 0; k < weights.size(); ++k)
      refs.push_back(TensorRef{values[k].data(), weights[k]->desc.shape, DType::F32, DeviceId{}});
    Rng rng(hashCombine(seed, nameHash(n.name)));
    n.op->init(n.attrs, refs, rng);
    for (size_t k = 0; k < weights.size(); ++k) {
      ParamStore::write(*weights[k], values[k].data());
      fresh.erase(weights[k]->name);
    }
  }
  return {};
}

// Where the optimizer updates start: the autodiff and optimizer passes append them
// after the whole backward pass, so the loss and gradients can be checked before any
// parameter changes. Should a gradient be written after the first update, the check
// has to wait for the end of the step (steps.size()).
size_t updatesBegin(const Program& p) {
  const Graph& g = p.graph;
  size_t first = p.steps.size();
  for (size_t i = 0; i < p.steps.size() && first == p.steps.size(); ++i)
    if (g.nodes[p.steps[i].node].op->role == OpRole::Optimizer) first = i;
  std::set<ValueId> late;
  for (size_t i = first; i < p.steps.size(); ++i) {
    const Node& n = g.nodes[p.steps[i].node];
    if (n.op->role != OpRole::Optimizer) {
      late.insert(n.outputs.begin(), n.outputs.end());
    } else if (n.inputs.size() >= 2 && late.count(n.inputs[1])) {
      return p.steps.size();
    }
  }
  return first;
}

bool persistent(ValueKind k) {
  return k == ValueKind::Param || k == ValueKind::Buffer || k == ValueKind::State;
}

std::string described(const Value& v, int64_t bytes) {
  return "'" + v.name + "' " + shapeToString(v.desc.shape) + ", " + formatBytes(bytes);
}

// Plans what a program adds to the run's memory before any of it is allocated: the
// persistent tensors the store does not hold yet (and the copies their initialisers
// fill), then the arena; adds what it planned to `planned`. Each refusal names the
// largest tensor, which is what to shrink.
Status planBudget(const Program& p, ParamStore& store, const MemoryPlan& mem,
                  const std::vector<BufferRequest>& requests, const std::vector<ValueId>& requested,
                  const CompileOptions& opts, MemoryBudget& budget, int64_t& planned) {
  const Graph& g = p.graph;
  int64_t total = 0, initCopies = 0, largestBytes = -1;
  const Value* largest = nullptr;
  std::set<ValueId> seen;
  for (const Node& n : g.nodes) {
    int64_t weights = 0;
    for (ValueId read : n.inputs) {
      ValueId v = persistentBehind(g, read);
      if (v == kNoValue) continue;
      const Value& val = g.values[v];
      if (store.find(val.name)) continue;
      // Sizes were checked by shape inference; the store keeps floats.
      int64_t bytes = numel(val.desc.shape) * int64_t(sizeof(float));
      if (val.kind != ValueKind::State) weights = saturatingAdd(weights, bytes);
      if (!seen.insert(v).second) continue;
      total = saturatingAdd(total, bytes);
      if (bytes > largestBytes) largestBytes = bytes, largest = &val;
    }
    initCopies = std::max(initCopies, weights);
  }
  if (largest) {
    std::string what =
        "the parameters and optimizer state (largest: " + described(*largest, largestBytes) + ")";
    if (Status s = budget.reserve(what, total); !s) return s;
    planned += total;
    if (Status s = budget.check("initialising them", initCopies); !s) return s;
  }
  // The three largest tensors (the requests after `requested`'s are workspaces).
  std::vector<size_t> order(requested.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  size_t shown = std::min<size_t>(3, order.size());
  std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                    [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  std::string what = (opts.batchField.empty() ? "" : opts.batchField + ", ") + "batches of " +
                     std::to_string(opts.batch) + ": the activations (arena";
  for (size_t k = 0; k < shown; ++k)
    what += std::string(k == 0 ? "; largest: " : ", ") +
            described(g.values[requested[order[k]]], requests[order[k]].bytes);
  if (Status s = budget.reserve(what + ")", mem.arenaBytes); !s) return s;
  planned += mem.arenaBytes;
  return {};
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
  const DeviceId device = store.device().id();
  Graph& g = prog->graph;

  auto loss = resolveLoss(g, opts.loss);
  if (!loss) return loss.error();
  std::vector<std::string> metricNames = opts.metrics;
  if (metricNames.empty())
    for (const Node& n : g.nodes)
      if (n.op->role == OpRole::Metric || n.op->role == OpRole::Loss) metricNames.push_back(n.name);
  std::set<ValueId> pinned{*loss};
  for (const std::string& m : metricNames) {
    const Node* n = g.findNode(m);
    if (!n) return makeError("train.metrics names '" + m + "', but there is no such node");
    if (g.values[n->outputs[0]].desc.shape.size() != 0)
      return makeError("metric '" + m +
                       "' is not a scalar: " + shapeToString(g.values[n->outputs[0]].desc.shape));
    pinned.insert(n->outputs[0]);
  }
  for (const std::string& k : opts.keep) {
    ValueId v = g.findValue(k);
    if (v == kNoValue) return makeError("no tensor named '" + k + "' to keep");
    pinned.insert(v);
  }
  PassLog log(*prog);
  // Fusion may move a value to another producer but never renames values.
  log.begin("fusion");
  if (opts.fuse) prog->fusions = fuseLinearActivation(g, pinned);
  log.end(opts.fuse ? joined(prog->fusions, "nothing to fuse") : "off");
  prog->precision = opts.precision;
  if (opts.precision != Precision::F32) {
    log.begin("autocast");
    prog->autocast = insertAutocast(g, opts.precision == Precision::F16 ? "fp16" : "bf16");
    log.end("16-bit rounding around " + counted(prog->autocast.size(), "matrix op"));
  }

  std::vector<ValueId> roots(pinned.begin(), pinned.end());
  if (opts.training) {
    std::vector<ValueId> wrt;
    for (const std::string& name : opts.gradientsOf) {
      ValueId v = g.findValue(name);
      if (v == kNoValue) return makeError("no tensor named '" + name + "' to differentiate");
      wrt.push_back(v);
    }
    log.begin("autodiff");
    auto grads = autodiff(g, *loss, wrt);
    if (!grads) return grads.error();
    log.end(counted(grads->size(), "gradient") + " of the loss");
    if (opts.updateParams) {
      // fp16 scales the loss: the seed is the scale, and the updates read whether
      // the scaled gradients were finite (from their squares) and divide by it.
      bool scaled = opts.precision == Precision::F16;
      ValueId lossScale = kNoValue;
      if (scaled) {
        Value state;
        state.name = kLossScaleState;
        state.kind = ValueKind::State;
        state.desc = TensorDesc{{fn::LossScale::kSize}, DType::F32, {}};
        lossScale = g.addValue(std::move(state));
        prog->lossScale = lossScale;
      }
      if (opts.comm && opts.comm->size() > 1) {
        // Each rank's loss gradient is weighted by its share of the global batch,
        // and the gradients are summed across the ranks before anything reads them.
        if (!scaled)
          for (Node& n : g.nodes)
            if (n.name == "loss/grad/seed") {
              n.op = OpRegistry::instance().find("LossSeed");
              n.attrs = Attrs{};
            }
        log.begin("gradient buckets");
        for (const GradientBucket& b :
             insertGradientBuckets(g, *grads, opts.firstBucketBytes, opts.bucketBytes))
          prog->buckets.push_back({b.name, b.params.size(), b.bytes});
        log.end(counted(prog->buckets.size(), "bucket") + " summed across " +
                std::to_string(opts.comm->size()) + " ranks");
      }
      Attrs scaling;
      scaling.set("init_scale", opts.initLossScale);
      scaling.set("growth_interval", opts.lossScaleInterval);
      if (scaled)
        for (Node& n : g.nodes)
          if (n.name == "loss/grad/seed") {
            n.op = OpRegistry::instance().find("LossScaleSeed");
            n.attrs = scaling;
            n.inputs = {lossScale};
          }
      if (opts.gradientNorms || scaled) {
        const OpDef* squares = OpRegistry::instance().find("SumSquares");
        const OpDef* histogram = OpRegistry::instance().find("Histogram");
        Node check;
        check.name = "loss_scale/check";
        check.op = OpRegistry::instance().find("LossScaleCheck");
        check.attrs = scaling;
        check.backward = true;
        check.inputs = {lossScale};
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
        for (const auto& [param, grad] : *grads) {
          auto out = readGradient(param, grad, squares, "/grad_sq");
          if (!out) return out.error();
          check.inputs.push_back(*out);
          if (!opts.gradientNorms) continue;
          auto counts = readGradient(param, grad, histogram, "/grad_histogram");
          if (!counts) return counts.error();
          prog->gradientSquares[g.values[param].name] = *out;
          prog->gradientHistograms[g.values[param].name] = *counts;
          for (ValueId v : {*out, *counts}) {
            pinned.insert(v);
            roots.push_back(v);
          }
        }
        if (scaled)
          if (auto id = g.addNode(std::move(check)); !id) return id.error();
      }
      log.begin("optimizer");
      if (Status s = insertOptimizer(g, *grads, opts.optimizer, lossScale); !s) return s.error();
      log.end("an update for each of " + counted(grads->size(), "parameter") +
              (opts.gradientNorms ? ", each gradient's norm and histogram" : "") +
              (scaled ? ", fp16 loss scaling" : ""));
    } else {
      for (const auto& [v, grad] : *grads) {
        prog->gradients[g.values[v].name] = grad;
        pinned.insert(grad);
        roots.push_back(grad);
      }
    }
  }
  log.begin("dead code");
  eliminateDeadNodes(g, roots);
  log.end("removed what no loss, metric or kept value reads");
  const KernelRegistry& kernels = KernelRegistry::instance();
  // What every kernel is asked with besides its tensors and attributes.
  KernelSig context;
  context.device = &store.device();
  context.autocast = opts.precision != Precision::F32;
  context.comm = opts.comm;
  if (opts.blockedLayouts && !opts.referenceKernels) {
    auto held = [&store](const std::string& name) -> const TensorDesc* {
      ParamStore::Entry* e = store.find(name);
      return e ? &e->desc : nullptr;
    };
    log.begin("layouts");
    auto lr = assignLayouts(g, pinned, kernels, context, held);
    if (!lr) return lr.error();
    prog->blockedTensors = lr->blocked;
    prog->reorders = lr->reorders;
    prog->packedWeights = lr->packed;
    log.end(counted(size_t(lr->blocked), "activation") + " in nChw16c, " +
            counted(size_t(lr->reorders), "reorder") + ", " +
            counted(size_t(lr->packed), "weight") + " packed");
  }
  prog->loss = *loss;
  for (const std::string& m : metricNames) prog->metrics.push_back({m, g.findNode(m)->outputs[0]});

  for (Value& v : g.values) v.desc.device = device;
  prog->refs.assign(g.values.size(), TensorRef{});
  for (size_t v = 0; v < g.values.size(); ++v) {
    prog->refs[v].shape = g.values[v].desc.shape;
    prog->refs[v].dtype = g.values[v].desc.dtype;
    prog->refs[v].device = device;
  }
  // Lifetimes of everything that lives inside a step.
  const int nsteps = int(g.nodes.size());
  Lifetimes life = bufferLifetimes(g, pinned);
  std::vector<int>&first = life.first, &last = life.last;
  log.begin("in place");
  // Element-wise ops write over inputs they are the last to read: one buffer for both.
  InPlacePlan inPlace = opts.inPlace ? planInPlace(g, first, last, pinned) : noInPlace(g);
  std::vector<BufferRequest> requests;
  std::vector<ValueId> requested;
  int64_t inPlaceBytes = 0;  // what the overwriting outputs would take on their own
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (first[v] < 0 || !livesInArena(g.values[v])) continue;
    int64_t bytes = bytesOf(g.values[v].desc);
    if (inPlace.storage[v] != ValueId(v)) {
      inPlaceBytes = saturatingAdd(inPlaceBytes, bytes);
      continue;
    }
    requests.push_back({bytes, first[v], last[v]});
    requested.push_back(ValueId(v));
  }
  for (size_t v = 0; v < g.values.size(); ++v)
    if (inPlace.overwrote[v] != kNoValue) prog->overwrote[ValueId(v)] = inPlace.overwrote[v];
  log.end(opts.inPlace ? counted(prog->overwrote.size(), "output") +
                             " written over a dead input (" + formatBytes(inPlaceBytes) + ")"
                       : "off");
  // Kernels, chosen before the memory plan, which holds the workspaces they ask for,
  // each live for its launch.
  log.begin("kernels");
  auto chosenOr = chooseKernels(g, kernels, context, opts.referenceKernels);
  if (!chosenOr) return chosenOr.error();
  std::vector<ChosenKernel>& chosen = *chosenOr;
  std::vector<int64_t> workspaceRequest(chosen.size(), -1);  // index in `requests`
  for (size_t k = 0; k < chosen.size(); ++k)
    if (chosen[k].workspaceBytes > 0) {
      workspaceRequest[k] = int64_t(requests.size());
      const int node = chosen[k].step.node;
      requests.push_back({chosen[k].workspaceBytes, node, node});
    }
  // cuBLASLt and cuDNN read fastest from 256-byte boundaries; the CPU's vectors need 64.
  {
    size_t declined = 0;
    for (const ChosenKernel& c : chosen) declined += !c.step.declined.empty();
    log.end(counted(chosen.size(), "kernel") + " chosen; " + std::to_string(declined) +
            " where a faster one declined");
  }
  log.begin("memory");
  const int64_t alignment = store.device().hostAddressable() ? 64 : 256;
  MemoryPlan mem = planMemory(requests, alignment);
  // Naive: every tensor its own buffer, those written in place too.
  mem.naiveBytes =
      saturatingAdd(mem.naiveBytes, (inPlaceBytes + alignment - 1) / alignment * alignment);
  std::set<ValueId> bound;  // what bindParams binds: every persistent tensor a node reads
  for (const Node& n : g.nodes)
    for (ValueId v : n.inputs)
      if (persistent(g.values[v].kind) && bound.insert(v).second)
        prog->persistentBytes += numel(g.values[v].desc.shape) * int64_t(sizeof(float));
  log.end("arena " + formatBytes(mem.arenaBytes) + " for " + counted(requests.size(), "buffer") +
          " (naive " + formatBytes(mem.naiveBytes) + ")");
  if (opts.planOnly) {
    prog->arenaBytes = mem.arenaBytes;
    prog->naiveBytes = mem.naiveBytes;
    return prog;
  }
  std::shared_ptr<MemoryBudget> budget = budgetOrThisProcess(opts.budget);
  PlannedBytes planned{*budget};
  if (Status s = planBudget(*prog, store, mem, requests, requested, opts, *budget, planned.bytes);
      !s)
    return s.error();
  if (Status s = bindParams(*prog, store, opts.seed); !s) return s.error();
  if (!prog->arena.resize(store.device(), mem.arenaBytes))
    return makeRefusal("the activations (arena) need " + formatBytes(mem.arenaBytes) +
                       ", which this process could not allocate");
  prog->arenaBytes = mem.arenaBytes;
  prog->naiveBytes = mem.naiveBytes;
  if (!store.device().hostAddressable()) {
    prog->stepValues = DeviceBuffer(store.device(), sizeof(DeviceStepValues));
    prog->guard = DeviceBuffer(store.device(), sizeof(float));
    if (prog->guard.ok()) {
      const float up = 1.f;
      writeFloats(store.device(), prog->guard.data(), &up, 1);
    }
    if (!prog->stepValues.ok() || !prog->guard.ok())
      return makeRefusal("the step's values need " + std::to_string(sizeof(DeviceStepValues)) +
                         " bytes on " + device.toString() + ", which it could not allocate");
  }
  for (size_t k = 0; k < requested.size(); ++k)
    prog->refs[requested[k]].data = prog->arena.data() + mem.offsets[k];
  for (size_t v = 0; v < g.values.size(); ++v)
    if (inPlace.storage[v] != ValueId(v)) prog->refs[v].data = prog->refs[inPlace.storage[v]].data;

  // Each kernel prepared, its workspace in the arena it asked for.
  for (size_t k = 0; k < chosen.size(); ++k) {
    ChosenKernel& c = chosen[k];
    const Node& n = g.nodes[c.step.node];
    // A library may refuse a configuration only when asked to build it (oneDNN
    // throws): the error names the node instead of ending the process.
    try {
      c.step.fn = c.impl->prepare(c.sig);
    } catch (const std::exception& e) {
      return makeError("node '" + (n.backward ? n.origin : n.name) + "' (" + n.op->name +
                       "): kernel " + c.step.kernel + " failed to prepare: " + e.what());
    }
    // A small kernel runs on the calling thread alone (the CPU's choice).
    int64_t bytes = 0;
    for (const auto* descs : {&c.sig.in, &c.sig.out})
      for (const TensorDesc& d : *descs) bytes = saturatingAdd(bytes, bytesOf(d));
    if (store.device().runsAlone(double(c.step.flops), bytes)) {
      c.step.fn = store.device().alone(std::move(c.step.fn));
      c.step.alone = true;
    }
    if (auto detail = c.impl->detail) c.step.detail = [detail, sig = c.sig] { return detail(sig); };
    if (workspaceRequest[k] >= 0) {
      c.step.workspace = prog->arena.data() + mem.offsets[size_t(workspaceRequest[k])];
      c.step.workspaceBytes = requests[size_t(workspaceRequest[k])].bytes;
    }
    for (ValueId v : n.inputs) c.step.in.push_back(prog->refs[v]);
    for (ValueId v : n.outputs) c.step.out.push_back(prog->refs[v]);
    prog->steps.push_back(std::move(c.step));
  }
  prog->updatesBegin = updatesBegin(*prog);
  log.begin("multi-tensor");
  size_t groups = 0, grouped = 0;
  // Multi-tensor launches: each run of consecutive updates by one kernel with equal
  // attributes is done by its first step's launch.
  for (size_t i = prog->updatesBegin; i < chosen.size();) {
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
        tensors.push_back(prog->steps[k].in);
      }
      try {
        prog->steps[i].fn = impl->group(sigs, tensors);
      } catch (const std::exception& e) {
        return makeError("the " + std::to_string(end - i) + " updates from node '" +
                         g.nodes[prog->steps[i].node].origin + "' (kernel " + impl->name +
                         ") failed to prepare as one launch: " + e.what());
      }
      prog->steps[i].groupEnd = end;
      prog->steps[i].alone = false;  // the group's launch is as its kernel made it
      ++groups;
      grouped += end - i;
      for (size_t k = i + 1; k < end; ++k) prog->steps[k].fn = nullptr;
    }
    i = end;
  }
  log.end(groups ? counted(grouped, "update") + " in " + counted(groups, "launch") : "none");
  prog->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  planned.bytes = 0;  // kept for the program's life
  return prog;
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
