// Element-wise chains: element-wise ops (OpDef::elementwise) of one shape, each
// reading the one before it, become one Pointwise node whose kernel runs every step
// for an element before the next element (a CPU tile in cache, a GPU thread's
// registers). A value only the chain reads is never written to memory, and each input
// is read once instead of once per op. A member's value that something else reads (a
// forward activation its gradient reads, a kept value) is one more output of the node.
#include <algorithm>
#include <map>

#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"
#include "kernels/core/pointwise.h"

namespace netloom {
namespace {

// An element-wise node over float tensors of its output's shape, reading no parameter.
bool joinable(const Graph& g, const Node& n) {
  if (!n.op->elementwise || n.op->external || !n.op->mutates.empty() || n.numParams != 0 ||
      n.outputs.size() != 1 || n.inputs.empty())
    return false;
  const TensorDesc& y = g.values[n.outputs[0]].desc;
  if (y.dtype != DType::F32) return false;
  return std::all_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) {
    const TensorDesc& d = g.values[v].desc;
    return d.dtype == DType::F32 && d.shape == y.shape;
  });
}

// The Pointwise node that does `members` (node indices, in order), its outputs each
// member's value that a node outside the chain reads or that is pinned, and the last.
Node chainNode(const Graph& g, const std::vector<size_t>& members,
               const std::vector<std::vector<NodeId>>& users, const std::set<ValueId>& pinned,
               const OpDef* pointwise) {
  Node f;
  f.op = pointwise;
  const Node& first = g.nodes[members.front()];
  f.backward = first.backward;
  f.origin = first.origin;
  std::map<ValueId, int> stepOf;
  std::string steps;
  std::vector<int64_t> outputs;
  for (size_t k = 0; k < members.size(); ++k) {
    const Node& n = g.nodes[members[k]];
    const std::string prefix = std::to_string(k) + ".";
    f.name += (k ? " + " : "") + n.name;
    steps += (k ? "," : "") + n.op->name;
    for (const auto& [key, value] : n.attrs.values()) f.attrs.set(prefix + key, value);
    std::vector<int64_t> args;
    for (ValueId v : n.inputs) {
      if (auto s = stepOf.find(v); s != stepOf.end()) {
        args.push_back(-s->second - 1);
        continue;
      }
      auto at = std::find(f.inputs.begin(), f.inputs.end(), v);
      args.push_back(at - f.inputs.begin());
      if (at == f.inputs.end()) f.inputs.push_back(v);
    }
    f.attrs.set(prefix + "args", args);
    const ValueId y = n.outputs[0];
    stepOf[y] = int(k);
    bool outside = k + 1 == members.size() || pinned.count(y);
    for (NodeId u : users[y])
      outside = outside || std::find(members.begin(), members.end(), size_t(u)) == members.end();
    if (!outside) continue;
    outputs.push_back(int64_t(k));
    f.outputs.push_back(y);
  }
  f.attrs.set("steps", steps);
  f.attrs.set("outputs", outputs);
  return f;
}

}  // namespace

std::vector<std::string> fuseElementwiseChains(Graph& g, const std::set<ValueId>& pinned,
                                               const KernelRegistry& kernels,
                                               const KernelSig& context,
                                               const std::vector<std::vector<NodeId>>* readers) {
  std::vector<std::string> fused;
  const OpDef* pointwise = &internal_ops::pointwise();
  std::vector<std::vector<NodeId>> own;
  if (!readers) own = consumers(g);
  const std::vector<std::vector<NodeId>>& users = readers ? *readers : own;
  std::vector<bool> taken(g.nodes.size(), false), dead(g.nodes.size(), false);
  std::vector<std::pair<size_t, Node>> chains;  // each at its last member's place
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (taken[i] || !joinable(g, g.nodes[i])) continue;
    std::vector<size_t> members = {i};
    Node chain;
    while (members.size() < size_t(kMaxPointSteps)) {
      const Node& tail = g.nodes[members.back()];
      const ValueId y = tail.outputs[0];
      // The next member: the first reader of the tail's value that can join. Every
      // other reader of a member's value comes after it, where the chain then runs.
      size_t next = 0;
      for (NodeId u : users[y]) {
        const Node& n = g.nodes[size_t(u)];
        if (!taken[size_t(u)] && size_t(u) > members.back() && n.backward == tail.backward &&
            joinable(g, n) && g.values[n.outputs[0]].desc.shape == g.values[y].desc.shape) {
          next = size_t(u);
          break;
        }
      }
      if (!next) break;
      bool ordered = true;
      for (size_t m : members)
        for (NodeId u : users[g.nodes[m].outputs[0]])
          ordered = ordered && (size_t(u) >= next || std::find(members.begin(), members.end(),
                                                               size_t(u)) != members.end());
      // Nor may a node in between write in place what a member reads (an update,
      // a collective): the chain would then read it after the write.
      for (size_t j = members.front() + 1; ordered && j < next; ++j) {
        const Node& between = g.nodes[j];
        if (std::find(members.begin(), members.end(), j) != members.end()) continue;
        for (int port : between.op->mutates) {
          const ValueId written = between.inputs[size_t(port)];
          for (size_t m : members)
            ordered =
                ordered && !std::count(g.nodes[m].inputs.begin(), g.nodes[m].inputs.end(), written);
        }
      }
      if (!ordered) break;
      std::vector<size_t> longer = members;
      longer.push_back(next);
      Node candidate = chainNode(g, longer, users, pinned, pointwise);
      if (candidate.inputs.size() > size_t(kMaxPointInputs) ||
          candidate.outputs.size() > size_t(kMaxPointOutputs) ||
          !hasKernel(g, candidate, kernels, context))
        break;
      members = std::move(longer);
      chain = std::move(candidate);
    }
    if (members.size() < 2) continue;
    std::string what;
    for (size_t m : members) {
      taken[m] = true;
      dead[m] = m != members.back();
      what += (what.empty() ? "" : " + ") + g.nodes[m].op->name;
    }
    fused.push_back(chain.name + " -> Pointwise (" + what + ", " +
                    std::to_string(chain.outputs.size()) + " written)");
    chains.emplace_back(members.back(), std::move(chain));
  }
  for (auto& [at, chain] : chains) g.nodes[at] = std::move(chain);
  // Each member's value: written by its chain's node, or by nothing when only the
  // chain reads it.
  for (Value& v : g.values)
    if (v.producer >= 0 && taken[size_t(v.producer)]) v.producer = -1;
  for (const auto& [at, chain] : chains)
    for (ValueId v : g.nodes[at].outputs) g.values[v].producer = NodeId(at);
  removeNodes(g, dead);
  return fused;
}

}  // namespace netloom
