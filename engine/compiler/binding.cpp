#include "engine/compiler/binding.h"

#include <algorithm>
#include <set>

#include "engine/ops/internal_ops.h"
#include "kernels/core/checked.h"
#include "kernels/core/rng.h"
#include "kernels/core/shard.h"

namespace netloom {

namespace {

// The persistent tensor a node reads as `v`: v itself, or what autocast rounded (or
// cast to bf16) or a
// boxing laid out into v (the node's own weights, which its initialiser fills); else
// kNoValue.
ValueId persistentBehind(const Graph& g, ValueId v) {
  auto persistent = [&](ValueId u) {
    ValueKind k = g.values[u].kind;
    return k == ValueKind::Param || k == ValueKind::Buffer || k == ValueKind::State;
  };
  for (int hops = 0; hops < 3; ++hops) {
    if (persistent(v)) return v;
    NodeId from = g.values[v].producer;
    if (from < 0) return kNoValue;
    const OpDef* op = g.nodes[size_t(from)].op;
    if (op != &internal_ops::roundHalf() && op != &internal_ops::castBf16() &&
        op != &internal_ops::boxing())
      return kNoValue;
    v = g.nodes[size_t(from)].inputs[0];
  }
  return kNoValue;
}

// A node's weights initialised as one rank would: whole, then each split one cut to
// this rank's part.
void initWeights(const Node& n, const std::vector<ParamStore::Entry*>& weights, uint64_t seed) {
  std::vector<std::vector<float>> values;
  std::vector<TensorRef> refs;
  for (ParamStore::Entry* e : weights) {
    const Shape& whole = e->shard.split() ? e->shard.full : e->desc.shape;
    values.push_back(e->shard.split() ? std::vector<float>(size_t(numel(whole)))
                                      : ParamStore::read(*e));
    refs.push_back(TensorRef{values.back().data(), whole, DType::F32, DeviceId{}});
  }
  Rng rng(hashCombine(seed, nameHash(n.name)));
  n.op->init(n.attrs, refs, rng);
  for (size_t k = 0; k < weights.size(); ++k) {
    const ValueShard& sh = weights[k]->shard;
    if (sh.split()) {
      std::vector<float> part(size_t(weights[k]->numel()));
      takePart(values[k].data(), sh.full, sh.sbp.axis, sh.index, sh.parts, part.data(),
               sizeof(float));
      values[k] = std::move(part);
    }
    ParamStore::write(*weights[k], values[k].data());
  }
}

std::string described(const Value& v, int64_t bytes) {
  return "'" + v.name + "' " + shapeToString(v.desc.shape) + ", " + formatBytes(bytes);
}

}  // namespace

Status bindParams(Program& p, ParamStore& store, uint64_t seed) {
  std::set<std::string> fresh;  // created here and not initialised yet
  for (const Node& n : p.graph.nodes) {
    // A boxing of a weight: its reader binds it, so the store keeps one rank's order.
    if (n.op == &internal_ops::boxing()) continue;
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
      e->shard = val.shard;
      e->flat = val.flat;
      p.refs[v] = e->ref();
      if (weight) {
        weights.push_back(e);
        anyNew = anyNew || fresh.count(val.name) > 0;
      }
    }
    if (!anyNew || !n.op->init) continue;
    initWeights(n, weights, seed);
    for (ParamStore::Entry* e : weights) fresh.erase(e->name);
  }
  return {};
}

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

}  // namespace netloom
