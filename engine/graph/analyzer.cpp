// ModelAnalyzer: the incremental form of the model analysis (see analyze.h). Each
// node keeps what was learnt of it in three layers, each redone only when what it
// depends on changed:
//   own:    from its definition alone (op, resolved attributes, name check);
//   links:  from the names it refers to (sources, wiring problems);
//   shapes: from its sources' shapes (inference, costs).
#include <algorithm>
#include <optional>
#include <unordered_set>

#include "engine/graph/analyze.h"
#include "engine/graph/data_labels.h"
#include "engine/graph/graph.h"

namespace netloom {

struct ModelAnalyzer::Entry {
  int key = 0;
  const proto::NodeDef* def = nullptr;
  int pos = 0;
  bool seen = false;
  // Own: what the links depend on, as last seen, and what the definition alone says.
  std::string name, op;
  std::vector<std::string> inputs;
  const OpDef* rawOp = nullptr;  // the registry's op of that name, if any
  const OpDef* opDef = nullptr;  // null unless users may write it
  Attrs attrs;
  std::string attrsError;  // why the attributes do not resolve; empty when they do
  std::string nameProblem;
  std::string field;  // an Input's data field
  // Links.
  std::vector<ModelProblem> problems;  // name and wiring, in port order
  std::vector<Entry*> sources;         // per input port; null where it does not resolve
  std::vector<int> ports;
  bool complete = false;  // op, attributes and every input resolved
  bool onCycle = false;
  bool ordered = false;  // in the inference order: not on or below a cycle
  // Shapes.
  bool inferred = false;    // every input known and the op accepted them
  bool fieldTaken = false;  // an Input whose field an earlier Input reads
  std::vector<TensorDesc> outputs;
  NodeCost cost;
  std::vector<ModelProblem> inferProblems;
  // The last inference that ran, by the inputs' shapes it saw: a node whose inputs
  // come back as they were (an edit upstream undone, a typo fixed) takes its result
  // again without inferring. Dropped when the node or its wiring changes.
  struct Memo {
    std::vector<TensorDesc> inputs, outputs;
    NodeCost cost;
    std::vector<ModelProblem> problems;
    bool inferred = false;
  };
  std::optional<Memo> memo;
  NodeAnalysis* published = nullptr;  // its entry in the analysis, while the name is its own
  // This call's marks.
  bool dirty = false, relinked = false, outChanged = false, touched = false;

  bool built() const { return inferred && !fieldTaken; }
};

namespace {

bool sameDesc(const TensorDesc& a, const TensorDesc& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.device == b.device && a.layout == b.layout &&
         a.format == b.format;
}

bool sameDescs(const std::vector<TensorDesc>& a, const std::vector<TensorDesc>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), sameDesc);
}

bool sameProblems(const std::vector<ModelProblem>& a, const std::vector<ModelProblem>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
           return x.node == y.node && x.port == y.port && x.message == y.message;
         });
}

bool sameInputs(const std::vector<std::string>& a, const proto::NodeDef& def) {
  return int(a.size()) == def.inputs_size() && std::equal(a.begin(), a.end(), def.inputs().begin());
}

}  // namespace

ModelAnalyzer::ModelAnalyzer() = default;
ModelAnalyzer::~ModelAnalyzer() = default;

void ModelAnalyzer::reset(const std::vector<NodeRef>& nodes, int64_t batch) {
  m_entries.clear();
  m_order.clear();
  m_topo.clear();
  m_byName.clear();
  m_out = {};
  m_batch = batch;
  run(nodes, {}, true);
}

void ModelAnalyzer::update(const std::vector<NodeRef>& nodes, const std::vector<int>& dirty) {
  run(nodes, dirty, false);
}

void ModelAnalyzer::refreshOwn(Entry& e) {
  const proto::NodeDef& nd = *e.def;
  e.memo.reset();
  e.name = nd.name();
  e.op = nd.op();
  e.inputs.assign(nd.inputs().begin(), nd.inputs().end());
  e.nameProblem = e.name.empty() ? std::string() : nodeNameProblem(e.name);
  const OpRegistry& reg = OpRegistry::instance();
  e.rawOp = reg.find(e.op);
  e.opDef = e.rawOp;
  if (e.opDef && (e.opDef->role == OpRole::Internal || e.opDef->role == OpRole::Optimizer))
    e.opDef = nullptr;
  e.attrs = {};
  e.attrsError.clear();
  e.field.clear();
  if (!e.opDef) return;
  Attrs given;
  for (const auto& [k, v] : nd.attrs()) given.set(k, attrFromProto(v));
  if (auto attrs = resolveAttrs(*e.opDef, given, true))
    e.attrs = std::move(*attrs);
  else
    e.attrsError = attrs.error().message;
  if (e.opDef->external) e.field = e.attrs.s("field");
}

// Resolves input `k` of `e` (whose op is known) into `source` and `port`; false,
// with the problem said, where it cannot.
bool ModelAnalyzer::linkPort(const Entry& e, size_t k, Entry*& source, int& port,
                             std::vector<ModelProblem>& problems) const {
  const OpDef& op = *e.opDef;
  const size_t nports = op.inputs.size();
  auto problem = [&](std::string message) {
    problems.push_back({e.name, int(k), std::move(message)});
    return false;
  };
  auto where = [&] {
    return "node '" + e.name + "', input '" +
           (k < nports ? op.inputs[k].name : op.inputs.back().name) + "'";
  };
  if (k >= e.inputs.size() || e.inputs[k].empty()) {
    if (k >= nports || !op.inputs[k].dataLabels) return problem(where() + " is not connected");
    // The dataset's labels: the model's Input of them where it has one (as the
    // engine wires it), else one int32 class index a sample (see infer).
    for (Entry* other : m_order)
      if (other->opDef && other->opDef->external && other->field == kLabelsField) {
        source = other;
        break;
      }
    return true;
  }
  auto ref = parseInputRef(e.name, k, e.inputs[k]);
  if (!ref) return problem(ref.error().message);
  auto it = m_byName.find(ref->node);
  if (it == m_byName.end())
    return problem(where() + ": no node named '" + ref->node + "' (dangling input)");
  const OpDef* src = it->second->rawOp;
  if (src && ref->port >= int(src->outputs.size()))
    return problem(where() + ": node '" + ref->node + "' has no output port " +
                   std::to_string(ref->port));
  source = it->second;
  port = ref->port;
  return true;
}

// Resolves `e`'s references against the names as they are now; returns whether what
// it found differs from before.
bool ModelAnalyzer::relink(Entry& e, const Entry* self) {
  if (!self) self = &e;
  std::vector<ModelProblem> problems;
  std::vector<Entry*> sources;
  std::vector<int> ports;
  bool complete = false;
  auto problem = [&](std::string message) { problems.push_back({e.name, -1, std::move(message)}); };
  if (e.name.empty()) {
    problem("node #" + std::to_string(e.pos + 1) + " (" + e.op + ") has no name");
  } else if (auto it = m_byName.find(e.name); it != m_byName.end() && it->second != self) {
    problem("node '" + e.name + "': the name is used by another node");
  } else if (!e.nameProblem.empty()) {
    problem(e.nameProblem);
  }
  if (!e.opDef) {
    problem("node '" + e.name + "': unknown op '" + e.op + "'");
  } else {
    const OpDef& op = *e.opDef;
    complete = true;
    if (!e.attrsError.empty()) {
      problem("node '" + e.name + "' (" + op.name + "): " + e.attrsError);
      complete = false;
    }
    size_t nports = op.inputs.size();
    bool variadic = nports && op.inputs.back().variadic;
    size_t given = e.inputs.size();
    while (given > requiredInputs(op) && given <= nports && op.inputs[given - 1].optional &&
           e.inputs[given - 1].empty())
      --given;  // an optional port left unconnected
    size_t count =
        variadic ? std::max(nports, given) : std::clamp(given, requiredInputs(op), nports);
    if (!variadic && given > nports) {
      problem("node '" + e.name + "' (" + op.name + "): expects " + std::to_string(nports) +
              " input(s), has " + std::to_string(given));
      complete = false;
    }
    sources.assign(count, nullptr);
    ports.assign(count, 0);
    for (size_t k = 0; k < count; ++k)
      complete = linkPort(e, k, sources[k], ports[k], problems) && complete;
  }
  bool differs = complete != e.complete || sources != e.sources || ports != e.ports ||
                 !sameProblems(problems, e.problems);
  if (sources != e.sources || ports != e.ports) e.memo.reset();
  e.problems = std::move(problems);
  e.sources = std::move(sources);
  e.ports = std::move(ports);
  e.complete = complete;
  return differs;
}

// Orders the nodes by the references that resolved, file order first among ready
// ones; what is left over sits on a cycle or below one.
void ModelAnalyzer::sortTopologically() {
  int n = int(m_order.size());
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i)
    for (Entry* src : m_order[i]->sources)
      if (src) users[src->pos].push_back(i), ++indegree[i];
  std::vector<int> topo = topologicalOrder(users, indegree);
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
    for (Entry* src : m_order[i]->sources)
      if (src && onCycle[src->pos] && --leftUsers[src->pos] == 0) peel.push_back(src->pos);
  }
  for (int i = 0; i < n; ++i) {
    Entry& e = *m_order[i];
    bool ordered = indegree[i] == 0;
    if (e.onCycle != onCycle[i] || e.ordered != ordered) e.relinked = true;
    e.onCycle = onCycle[i];
    e.ordered = ordered;
  }
  m_topo.clear();
  for (int i : topo) m_topo.push_back(m_order[i]);
}

// Infers `e`'s shapes where every input is known; a node downstream of a problem
// stays unknown without a message of its own, since the message upstream explains it.
void ModelAnalyzer::infer(Entry& e) {
  e.inferred = false;
  e.outputs.clear();
  e.cost = {};
  e.inferProblems.clear();
  if (!e.complete || !e.ordered) return;
  for (Entry* src : e.sources)
    if (src && !src->built()) return;
  // A port left to the dataset's labels (the only kind complete without a source)
  // reads one int32 class index per sample.
  const TensorDesc labels{{m_batch}, DType::I32, {}};
  auto input = [&](size_t k) -> const TensorDesc& {
    return e.sources[k] ? e.sources[k]->outputs[e.ports[k]] : labels;
  };
  bool same = e.memo && e.memo->inputs.size() == e.sources.size();
  for (size_t k = 0; k < e.sources.size() && same; ++k)
    same = sameDesc(e.memo->inputs[k], input(k));
  if (same) {
    e.inferred = e.memo->inferred;
    e.outputs = e.memo->outputs;
    e.cost = e.memo->cost;
    e.inferProblems = e.memo->problems;
    return;
  }
  ++m_inferred;
  struct Remember {  // the result, however the inference ends
    Entry& e;
    const TensorDesc& labels;
    ~Remember() {
      Entry::Memo m{{}, e.outputs, e.cost, e.inferProblems, e.inferred};
      for (size_t k = 0; k < e.sources.size(); ++k)
        m.inputs.push_back(e.sources[k] ? e.sources[k]->outputs[e.ports[k]] : labels);
      e.memo = std::move(m);
    }
  } remember{e, labels};
  Graph g;
  Node node;
  node.name = e.name;
  node.op = e.opDef;
  node.attrs = e.attrs;
  for (size_t k = 0; k < e.sources.size(); ++k) {
    Value v;
    v.name = e.sources[k] ? joinInputRef(e.sources[k]->name, e.ports[k]) : kLabelsField;
    v.desc = input(k);
    node.inputs.push_back(g.addValue(std::move(v)));
  }
  addPersistentInputs(g, node);
  if (node.op->external) node.attrs.set("__batch", m_batch);
  node.attrs.set("__salt", int64_t(nameHash(node.name) >> 1));
  int port = -1;
  auto id = g.addNode(std::move(node), &port);
  if (!id) {
    e.inferProblems.push_back({e.name, port, id.error().message});
    return;
  }
  e.inferred = true;
  const Node& added = g.nodes[*id];
  for (ValueId v : added.outputs) e.outputs.push_back(g.values[v].desc);
  measureNode(g, added, e.cost);
}

std::vector<ModelProblem> ModelAnalyzer::problemsIf(int key, const proto::NodeDef& def) {
  auto it = m_entries.find(key);
  if (it == m_entries.end()) return {};
  Entry e = it->second;  // a copy: the analysis stays as it is
  e.def = &def;
  refreshOwn(e);
  relink(e, &it->second);
  const int inferred = m_inferred;
  infer(e);
  m_inferred = inferred;
  std::vector<ModelProblem> out = e.problems;
  out.insert(out.end(), e.inferProblems.begin(), e.inferProblems.end());
  return out;
}

// Writes `e`'s analysis under its name, if the name is its own.
void ModelAnalyzer::publish(Entry& e) {
  if (!e.published) {
    auto owner = m_byName.find(e.name);
    if (owner == m_byName.end() || owner->second != &e) return;
    e.published = &m_out.nodes[e.name];
  }
  NodeAnalysis& na = *e.published;
  na.known = e.opDef != nullptr;
  na.outputs = e.built() ? e.outputs : std::vector<TensorDesc>{};
  na.params = e.built() ? e.cost.params : 0;
  na.flops = e.built() ? e.cost.flops : 0;
  na.activationBytes = e.built() ? e.cost.activationBytes : 0;
}

// Takes the nodes as they are now, in model order; names that went or changed hands
// go into `names`, to have their analysis written again (or dropped). Whether the
// graph's structure may have changed.
bool ModelAnalyzer::reorder(const std::vector<NodeRef>& nodes, bool all,
                            std::vector<std::string>& names) {
  // The same nodes in the same order (an edit of some of them): only their
  // definitions' addresses are read again.
  bool same = !all && nodes.size() == m_order.size();
  for (size_t i = 0; i < nodes.size() && same; ++i) same = nodes[i].key == m_order[i]->key;
  if (same) {
    for (size_t i = 0; i < nodes.size(); ++i) m_order[i]->def = nodes[i].def;
    return all;
  }
  bool structural = all;
  for (auto& [key, e] : m_entries) e.seen = false;
  std::vector<Entry*> order;
  order.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto [it, added] = m_entries.try_emplace(nodes[i].key);
    Entry& e = it->second;
    e.key = nodes[i].key;
    e.def = nodes[i].def;
    e.seen = true;
    if (added || all) e.dirty = true;
    if (added || i >= m_order.size() || m_order[i] != &e || e.pos != int(i)) structural = true;
    e.pos = int(i);
    order.push_back(&e);
  }
  for (auto it = m_entries.begin(); it != m_entries.end();) {
    if (it->second.seen) {
      ++it;
      continue;
    }
    structural = true;
    names.push_back(it->second.name);
    it = m_entries.erase(it);
  }
  m_order = std::move(order);
  return structural;
}

// Reads the edited nodes' definitions again; whether a name, op or wire changed.
bool ModelAnalyzer::refreshDirty(bool all, std::vector<std::string>& names) {
  bool structural = false;
  for (Entry* e : m_order) {
    if (!e->dirty) continue;
    const proto::NodeDef& nd = *e->def;
    if (all || e->name != nd.name() || e->op != nd.op() || !sameInputs(e->inputs, nd)) {
      structural = true;
      names.push_back(e->name);
    }
    refreshOwn(*e);
    names.push_back(e->name);
  }
  return structural;
}

// Links: every node's when names or wires changed, else the edited nodes'.
void ModelAnalyzer::relinkAll(bool structural) {
  if (!structural) {
    for (Entry* e : m_order)
      if (e->dirty) e->relinked = relink(*e);
    return;
  }
  m_byName.clear();
  m_byName.reserve(m_order.size());
  for (Entry* e : m_order) e->published = nullptr;  // names may have changed hands
  for (Entry* e : m_order) m_byName.emplace(e->name, e);
  for (Entry* e : m_order) e->relinked = relink(*e);
  sortTopologically();
}

// Shapes, in order, stopping where they come out as before; nodes on or below a
// cycle have none.
void ModelAnalyzer::inferInOrder() {
  std::unordered_set<std::string> fields;  // read by the Inputs so far
  for (Entry* e : m_topo) {
    bool reinfer = e->dirty || e->relinked;
    for (size_t k = 0; k < e->sources.size() && !reinfer; ++k)
      reinfer = e->sources[k] && e->sources[k]->outChanged;
    e->outChanged = false;
    bool isInput = e->opDef && e->opDef->external;
    if (!reinfer && !isInput) continue;
    bool wasBuilt = e->built();
    std::vector<TensorDesc> before;
    if (reinfer) {
      before = std::move(e->outputs);
      infer(*e);
    }
    bool taken = isInput && e->inferred && !fields.insert(e->field).second;
    e->touched = reinfer || taken != e->fieldTaken;
    e->fieldTaken = taken;
    e->outChanged =
        wasBuilt != e->built() || (reinfer && e->built() && !sameDescs(before, e->outputs));
  }
  for (Entry* e : m_order) {
    if (e->ordered || (!e->inferred && e->outputs.empty() && e->inferProblems.empty())) continue;
    e->inferred = e->fieldTaken = false;
    e->outputs.clear();
    e->cost = {};
    e->inferProblems.clear();
    e->touched = true;
  }
}

// Publishes what changed, and gathers every node's problems.
void ModelAnalyzer::publishChanges(const std::vector<std::string>& names) {
  for (const std::string& name : names)
    if (!m_byName.count(name)) m_out.nodes.erase(name);
  for (const std::string& name : names)
    if (auto it = m_byName.find(name); it != m_byName.end()) it->second->touched = true;
  for (Entry* e : m_order) {
    if (e->dirty || e->relinked || e->touched) {
      publish(*e);
      m_changed.push_back(e->key);
    }
    e->dirty = e->relinked = e->touched = false;
  }
  m_out.problems.clear();
  for (Entry* e : m_order) {
    for (const ModelProblem& p : e->problems) m_out.problems.push_back(p);
    if (e->onCycle)
      m_out.problems.push_back({e->name, -1, "node '" + e->name + "' is part of a cycle"});
    for (const ModelProblem& p : e->inferProblems) m_out.problems.push_back(p);
    if (e->fieldTaken)
      m_out.problems.push_back(
          {e->name, -1,
           "node '" + e->name + "': another Input already reads field '" + e->field + "'"});
  }
  // A name's problems sit with its first node; unnamed nodes' come first.
  std::stable_sort(m_out.problems.begin(), m_out.problems.end(),
                   [&](const ModelProblem& a, const ModelProblem& b) {
                     auto pos = [&](const std::string& name) {
                       auto it = name.empty() ? m_byName.end() : m_byName.find(name);
                       return it == m_byName.end() ? -1 : it->second->pos;
                     };
                     return pos(a.node) < pos(b.node);
                   });
}

void ModelAnalyzer::run(const std::vector<NodeRef>& nodes, const std::vector<int>& dirty,
                        bool all) {
  m_changed.clear();
  m_inferred = 0;
  for (int key : dirty)
    if (auto it = m_entries.find(key); it != m_entries.end()) it->second.dirty = true;
  std::vector<std::string> names;  // whose analysis is written again, or dropped
  bool structural = reorder(nodes, all, names);
  structural = refreshDirty(all, names) || structural;
  relinkAll(structural);
  inferInOrder();
  publishChanges(names);
}

}  // namespace netloom
