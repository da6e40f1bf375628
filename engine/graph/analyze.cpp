#include "engine/graph/analyze.h"

#include <algorithm>
#include <set>

#include "engine/graph/blocks.h"
#include "engine/graph/graph.h"
#include "kernels/core/checked.h"

namespace netloom {

namespace {

// What the first pass learns of each node before shapes are inferred.
struct Resolved {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<int> sources;      // per input port: the producing node's index, or -1
  std::vector<InputRef> inputs;  // per input port
  bool complete = false;         // op, attributes and every input resolved
};

}  // namespace

void measureNode(const Graph& g, const Node& n, NodeCost& cost) {
  InferCtx ctx{n.attrs, {}, {}, {}, {}, -1};
  for (int i = 0; i < n.numDataInputs(); ++i) ctx.in.push_back(g.values[n.inputs[i]].desc);
  for (int i = n.numDataInputs(); i < int(n.inputs.size()); ++i) {
    const Value& v = g.values[n.inputs[i]];
    ctx.params.push_back(v.desc);
    // Each size fits (shape inference checked it); sums of many saturate.
    if (v.kind == ValueKind::Param) cost.params = saturatingAdd(cost.params, numel(v.desc.shape));
    if (v.kind == ValueKind::Buffer)
      cost.buffers = saturatingAdd(cost.buffers, numel(v.desc.shape));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const TensorDesc& d = g.values[n.outputs[i]].desc;
    ctx.out.push_back(d);
    if (!n.op->outputs[i].hidden)
      cost.activationBytes =
          saturatingAdd(cost.activationBytes, numel(d.shape) * int64_t(dtypeSize(d.dtype)));
  }
  if (n.op->flops) cost.flops = n.op->flops(ctx);
}

namespace {

// Problems in model order, so a list reads top to bottom like the file.
void sortByModelOrder(std::vector<ModelProblem>& problems,
                      const std::map<std::string, int>& index) {
  std::stable_sort(problems.begin(), problems.end(),
                   [&](const ModelProblem& a, const ModelProblem& b) {
                     auto pos = [&](const std::string& name) {
                       auto it = index.find(name);
                       return it == index.end() ? -1 : it->second;
                     };
                     return pos(a.node) < pos(b.node);
                   });
}

ModelAnalysis analyzeFlat(const proto::ModelDef& model, int64_t batch) {
  ModelAnalysis out;
  const OpRegistry& reg = OpRegistry::instance();
  int n = model.nodes_size();
  auto problem = [&](const std::string& node, int port, std::string message) {
    out.problems.push_back({node, port, std::move(message)});
  };

  std::map<std::string, int> index;
  for (int i = 0; i < n; ++i) {
    const auto& nd = model.nodes(i);
    if (nd.name().empty())
      problem("", -1, "node #" + std::to_string(i + 1) + " (" + nd.op() + ") has no name");
    else if (!index.emplace(nd.name(), i).second)
      problem(nd.name(), -1, "node '" + nd.name() + "': the name is used by another node");
    else if (std::string why = nodeNameProblem(nd.name()); !why.empty())
      problem(nd.name(), -1, why);
  }

  std::vector<Resolved> res(n);
  for (int i = 0; i < n; ++i) {
    const auto& nd = model.nodes(i);
    Resolved& r = res[i];
    NodeAnalysis& na = out.nodes[nd.name()];
    r.op = reg.find(nd.op());
    if (!r.op || r.op->role == OpRole::Internal || r.op->role == OpRole::Optimizer) {
      r.op = nullptr;
      problem(nd.name(), -1, "node '" + nd.name() + "': unknown op '" + nd.op() + "'");
      continue;
    }
    na.known = true;
    r.complete = true;
    Attrs given;
    for (const auto& [k, v] : nd.attrs()) given.set(k, attrFromProto(v));
    auto attrs = resolveAttrs(*r.op, given);
    if (attrs) {
      r.attrs = std::move(*attrs);
    } else {
      problem(nd.name(), -1,
              "node '" + nd.name() + "' (" + r.op->name + "): " + attrs.error().message);
      r.complete = false;
    }
    size_t nports = r.op->inputs.size();
    bool variadic = nports && r.op->inputs.back().variadic;
    size_t count = variadic ? std::max<size_t>(nports, nd.inputs_size()) : nports;
    if (!variadic && size_t(nd.inputs_size()) > nports) {
      problem(nd.name(), -1,
              "node '" + nd.name() + "' (" + r.op->name + "): expects " + std::to_string(nports) +
                  " input(s), has " + std::to_string(nd.inputs_size()));
      r.complete = false;
    }
    r.sources.assign(count, -1);
    r.inputs.resize(count);
    for (size_t k = 0; k < count; ++k) {
      std::string port = k < nports ? r.op->inputs[k].name : r.op->inputs.back().name;
      std::string where = "node '" + nd.name() + "', input '" + port + "'";
      if (int(k) >= nd.inputs_size() || nd.inputs(k).empty()) {
        problem(nd.name(), int(k), where + " is not connected");
        r.complete = false;
        continue;
      }
      auto ref = parseInputRef(nd.name(), k, nd.inputs(k));
      if (!ref) {
        problem(nd.name(), int(k), ref.error().message);
        r.complete = false;
        continue;
      }
      auto it = index.find(ref->node);
      if (it == index.end()) {
        problem(nd.name(), int(k), where + ": no node named '" + ref->node + "' (dangling input)");
        r.complete = false;
        continue;
      }
      const OpDef* src = reg.find(model.nodes(it->second).op());
      if (src && ref->port >= int(src->outputs.size())) {
        problem(
            nd.name(), int(k),
            where + ": node '" + ref->node + "' has no output port " + std::to_string(ref->port));
        r.complete = false;
        continue;
      }
      r.inputs[k] = *ref;
      r.sources[k] = it->second;
    }
  }

  // Order by the references that resolved; whatever is left over sits on a cycle.
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i)
    for (int src : res[i].sources)
      if (src >= 0) users[src].push_back(i), ++indegree[i];
  std::vector<int> order = topologicalOrder(users, indegree);
  // Peel off, from the far end, the nodes that merely hang below a cycle.
  std::vector<int> leftUsers(n, 0);
  std::vector<int> peel;
  for (int i = 0; i < n; ++i) {
    if (indegree[i] == 0) continue;
    for (int u : users[i]) leftUsers[i] += indegree[u] > 0;
    if (leftUsers[i] == 0) peel.push_back(i);
  }
  std::vector<bool> onCycle(n);
  for (int i = 0; i < n; ++i) onCycle[i] = indegree[i] > 0;
  while (!peel.empty()) {
    int i = peel.back();
    peel.pop_back();
    onCycle[i] = false;
    for (int src : res[i].sources)
      if (src >= 0 && onCycle[src] && --leftUsers[src] == 0) peel.push_back(src);
  }
  for (int i = 0; i < n; ++i)
    if (onCycle[i])
      problem(model.nodes(i).name(), -1, "node '" + model.nodes(i).name() + "' is part of a cycle");

  // Infer shapes wherever every input is known; a node downstream of a problem stays
  // unknown without a message of its own, since the message upstream explains it.
  Graph g;
  std::vector<NodeId> built(n, -1);
  std::set<std::string> fields;
  for (int i : order) {
    const auto& nd = model.nodes(i);
    const Resolved& r = res[i];
    if (!r.complete) continue;
    Node node;
    node.name = nd.name();
    node.op = r.op;
    node.attrs = r.attrs;
    bool ready = true;
    for (size_t k = 0; k < r.sources.size() && ready; ++k) {
      NodeId src = built[r.sources[k]];
      if (src < 0)
        ready = false;
      else
        node.inputs.push_back(g.nodes[src].outputs[r.inputs[k].port]);
    }
    if (!ready) continue;
    addPersistentInputs(g, node);
    if (node.op->name == "Input") node.attrs.set("__batch", batch);
    node.attrs.set("__salt", int64_t(nameHash(node.name) >> 1));
    int port = -1;
    auto id = g.addNode(std::move(node), &port);
    if (!id) {
      problem(nd.name(), port, id.error().message);
      continue;
    }
    const Node& added = g.nodes[*id];
    if (added.op->name == "Input" && !fields.insert(added.attrs.s("field")).second) {
      problem(nd.name(), -1,
              "node '" + nd.name() + "': another Input already reads field '" +
                  added.attrs.s("field") + "'");
      continue;
    }
    built[i] = *id;
    NodeAnalysis& na = out.nodes[nd.name()];
    for (ValueId v : added.outputs) na.outputs.push_back(g.values[v].desc);
    NodeCost cost;
    measureNode(g, added, cost);
    na.params = cost.params;
    na.flops = cost.flops;
    na.activationBytes = cost.activationBytes;
  }
  sortByModelOrder(out.problems, index);
  return out;
}

}  // namespace

ModelAnalysis analyzeModel(const proto::ModelDef& model, int64_t batch) {
  if (!hasInstances(model)) return analyzeFlat(model, batch);
  // Analyse the inlined model, then fold what each instance became back into it:
  // its output shapes, its costs, and its inner nodes' problems.
  std::vector<ModelProblem> problems;
  InlinedModel flat = inlineBlocks(model, problems);
  ModelAnalysis inner = analyzeFlat(flat.model, batch);
  ModelAnalysis out;
  out.problems = std::move(problems);
  for (ModelProblem& p : inner.problems) {
    auto it = flat.instanceOf.find(p.node);
    if (it != flat.instanceOf.end()) {
      p.message = "in block instance '" + it->second + "': " + p.message;
      p.node = it->second;
      p.port = -1;
    }
    out.problems.push_back(std::move(p));
  }
  for (auto& [name, na] : inner.nodes) {
    auto it = flat.instanceOf.find(name);
    if (it == flat.instanceOf.end()) {
      out.nodes[name] = na;
      continue;
    }
    NodeAnalysis& inst = out.nodes[it->second];
    inst.params = saturatingAdd(inst.params, na.params);
    inst.flops = saturatingAdd(inst.flops, na.flops);
    inst.activationBytes = saturatingAdd(inst.activationBytes, na.activationBytes);
  }
  for (const proto::NodeDef& nd : model.nodes()) {
    if (!findBlock(model, nd.op())) continue;
    NodeAnalysis& inst = out.nodes[nd.name()];
    auto outs = flat.outputsOf.find(nd.name());
    inst.known = outs != flat.outputsOf.end();
    if (!inst.known) continue;
    for (const std::string& ref : outs->second) {
      auto [node, port] = splitInputRef(ref);
      auto src = inner.nodes.find(node);
      if (src == inner.nodes.end() || port >= int(src->second.outputs.size())) {
        inst.outputs.clear();
        break;
      }
      inst.outputs.push_back(src->second.outputs[port]);
    }
  }
  std::map<std::string, int> index;
  for (int i = 0; i < model.nodes_size(); ++i) index.emplace(model.nodes(i).name(), i);
  sortByModelOrder(out.problems, index);
  return out;
}

}  // namespace netloom
