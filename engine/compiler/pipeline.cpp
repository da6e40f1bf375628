#include "engine/compiler/pipeline.h"

#include <algorithm>
#include <map>
#include <set>

namespace netloom {
namespace {

// A node's share of the work: its forward FLOPs and its weights, at least 1.
int64_t costOf(const Graph& g, const Node& n) {
  int64_t cost = 1;
  InferCtx c{n.attrs, {}, {}, {}, {}, -1};
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const TensorDesc& d = g.values[n.inputs[k]].desc;
    (int(k) < n.numDataInputs() ? c.in : c.params).push_back(d);
    if (int(k) >= n.numDataInputs()) cost += numel(d.shape);
  }
  for (ValueId v : n.outputs) c.out.push_back(g.values[v].desc);
  if (n.op->flops) cost += std::max<int64_t>(0, n.op->flops(c));
  return cost;
}

bool reports(const Node& n) {
  return n.op->role == OpRole::Loss || n.op->role == OpRole::Metric;
}

}  // namespace

// The stage `placed` pins node `name` to: its own, or its enclosing block instance's.
int placedStage(const std::map<std::string, int>& placed, std::string name) {
  for (;;) {
    if (auto it = placed.find(name); it != placed.end()) return it->second;
    const size_t slash = name.rfind('/');
    if (slash == std::string::npos) return -1;
    name.resize(slash);
  }
}

// The automatic stages bent to the placements: each node between the placed ones
// before and after it, and never before the node ahead of it.
Status applyPlacements(const Graph& g, const std::vector<size_t>& work, int stages,
                       const std::map<std::string, int>& placed, std::vector<int>& stage) {
  std::vector<int> pin(work.size(), -1), hi(work.size(), stages - 1);
  for (size_t k = 0; k < work.size(); ++k) {
    pin[k] = placedStage(placed, g.nodes[work[k]].name);
    if (pin[k] >= stages)
      return makeError("node '" + g.nodes[work[k]].name + "' is placed in pipeline stage " +
                       std::to_string(pin[k]) + ", past the last (" + std::to_string(stages - 1) +
                       ")");
  }
  for (size_t k = work.size(); k-- > 0;)
    hi[k] =
        std::min(k + 1 < work.size() ? hi[k + 1] : stages - 1, pin[k] >= 0 ? pin[k] : stages - 1);
  int lo = 0;
  size_t pinnedBefore = work.size();
  for (size_t k = 0; k < work.size(); ++k) {
    const std::string& name = g.nodes[work[k]].name;
    if (pin[k] >= 0 && pin[k] < lo)
      return makeError("node '" + name + "' is placed in pipeline stage " + std::to_string(pin[k]) +
                       ", before '" + g.nodes[work[pinnedBefore]].name + "' ahead of it (stage " +
                       std::to_string(lo) + ")");
    int s = pin[k] >= 0 ? pin[k] : std::clamp(stage[work[k]], lo, hi[k]);
    stage[work[k]] = s;
    if (pin[k] >= 0) pinnedBefore = k;
    lo = s;
  }
  std::vector<bool> used(size_t(stages), false);
  for (size_t i : work) used[size_t(stage[i])] = true;
  for (int s = 0; s < stages; ++s)
    if (!used[size_t(s)])
      return makeError("pipeline stage " + std::to_string(s) +
                       " has no node: place fewer stages, or move nodes into it");
  return {};
}

Result<std::vector<int>> pipelineStages(const Graph& g, int stages,
                                        const std::map<std::string, int>& placed) {
  std::vector<int> stage(g.nodes.size(), -1);
  std::vector<size_t> work;  // the nodes that compute, in order
  int64_t total = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].op->external && !reports(g.nodes[i])) {
      work.push_back(i);
      total += costOf(g, g.nodes[i]);
    }
  if (int64_t(work.size()) < stages)
    return makeError("the model has " + std::to_string(work.size()) + " layers to share out, " +
                     "fewer than the " + std::to_string(stages) + " pipeline stages");
  // Each node goes where the middle of its work falls; every stage keeps at least one.
  int64_t before = 0;
  int last = 0;
  for (size_t k = 0; k < work.size(); ++k) {
    const int64_t cost = costOf(g, g.nodes[work[k]]);
    int s = int((2 * before + cost) * stages / std::max<int64_t>(1, 2 * total));
    s = std::clamp(s, last, stages - 1);
    s = std::max(s, stages - int(work.size() - k));    // the later stages still get one each
    s = std::min({s, int(k), k == 0 ? 0 : last + 1});  // and none is skipped
    stage[work[k]] = s;
    last = s;
    before += cost;
  }
  if (!placed.empty())
    if (Status s = applyPlacements(g, work, stages, placed, stage); !s) return s.error();
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (reports(g.nodes[i])) stage[i] = stages - 1;
  return stage;
}

std::vector<StageTie> stageTies(const Graph& g, const std::vector<int>& stage) {
  std::map<ValueId, StageTie> ties;
  std::set<ValueId> made;  // weights created so far, as binding goes through the nodes
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool fresh = false;
    for (size_t k = size_t(n.numDataInputs()); k < n.inputs.size(); ++k)
      fresh = made.insert(n.inputs[k]).second || fresh;
    for (size_t k = size_t(n.numDataInputs()); k < n.inputs.size(); ++k) {
      const ValueId v = n.inputs[k];
      if (g.values[size_t(v)].kind != ValueKind::Param) continue;
      StageTie& t = ties[v];
      t.param = v;
      if (std::find(t.stages.begin(), t.stages.end(), stage[i]) == t.stages.end())
        t.stages.push_back(stage[i]);
      if (fresh && n.op->init) t.source = stage[i];
    }
  }
  std::vector<StageTie> out;
  for (auto& [v, t] : ties)
    if (t.stages.size() > 1) {
      std::sort(t.stages.begin(), t.stages.end());
      out.push_back(std::move(t));
    }
  return out;
}

std::string explainStages(const Graph& g, const std::vector<int>& stage, int microBatches) {
  int stages = 0;
  for (int s : stage) stages = std::max(stages, s + 1);
  std::string out = "pipeline of " + std::to_string(stages) + " stages, " +
                    std::to_string(microBatches) + " micro-batches per step, 1F1B:\n";
  for (int s = 0; s < stages; ++s) {
    std::string nodes, crossing;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (stage[i] != s) continue;
      nodes += (nodes.empty() ? "" : ", ") + g.nodes[i].name;
      for (ValueId v : g.nodes[i].inputs) {
        const NodeId p = g.values[v].producer;
        if (p >= 0 && stage[size_t(p)] >= 0 && stage[size_t(p)] < s &&
            crossing.find("'" + g.values[v].name + "'") == std::string::npos)
          crossing += (crossing.empty() ? "" : ", ") + std::string("'") + g.values[v].name + "' " +
                      shapeToString(g.values[v].desc.shape) + " from stage " +
                      std::to_string(stage[size_t(p)]);
      }
    }
    out += "  stage " + std::to_string(s) + " (rank " + std::to_string(s) + "): " + nodes + "\n";
    for (const StageTie& t : stageTies(g, stage))
      if (t.stages.front() == s)
        out += "    '" + g.values[size_t(t.param)].name + "' is tied with stage " +
               std::to_string(t.stages.back()) + ": their gradients are summed each step\n";
    if (!crossing.empty()) out += "    receives " + crossing + "\n";
  }
  return out;
}

}  // namespace netloom
