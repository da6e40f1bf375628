// What the document answers about its graph without changing it: nodes by name, their
// ports and connections, names still free, whether a wire would be refused and why, and
// the hint for a features Input without a shape.
#include <algorithm>
#include <set>

#include "editor/document.h"
#include "editor/node_refs.h"
#include "engine/graph/op.h"

namespace netloom::editor {

NodeId GraphDocument::findNode(const std::string& name) const {
  auto it = m_byName.find(name);
  return it == m_byName.end() ? -1 : it->second;
}

int GraphDocument::inputPortCount(NodeId id) const {
  const proto::NodeDef& def = node(id).def;
  const OpDef* op = opOf(def);
  if (!op) return def.inputs_size();
  int ports = int(op->inputs.size());
  if (ports && op->inputs.back().variadic) return std::max(ports, def.inputs_size() + 1);
  return ports;
}

int GraphDocument::outputPortCount(NodeId id) const {
  const proto::NodeDef& def = node(id).def;
  if (const OpDef* op = opOf(def)) {
    int visible = 0;
    for (const PortDef& p : op->outputs) visible += !p.hidden;
    return visible;
  }
  // An op this version does not know: as many outputs as its users read.
  int ports = 1;
  for (const Connection& c : connectionsOf(id))
    if (c.from == id) ports = std::max(ports, c.fromPort + 1);
  return ports;
}

std::optional<Connection> GraphDocument::inputConnection(NodeId id, int port) const {
  const proto::NodeDef& def = node(id).def;
  if (port >= def.inputs_size() || def.inputs(port).empty()) return std::nullopt;
  auto [name, fromPort] = splitRef(def.inputs(port));
  NodeId from = findNode(name);
  if (from < 0) return std::nullopt;
  return Connection{from, fromPort, id, port};
}

std::vector<Connection> GraphDocument::connections() const {
  std::vector<Connection> out;
  for (NodeId id : m_order)
    for (int k = 0; k < node(id).def.inputs_size(); ++k)
      if (auto c = inputConnection(id, k)) out.push_back(*c);
  return out;
}

std::vector<Connection> GraphDocument::connectionsOf(NodeId id) const {
  std::vector<Connection> out;
  const std::string& name = node(id).def.name();
  for (NodeId other : m_order) {
    const proto::NodeDef& def = node(other).def;
    for (int k = 0; k < def.inputs_size(); ++k) {
      if (other != id && splitRef(def.inputs(k)).first != name) continue;
      if (auto c = inputConnection(other, k); c && (c->from == id || c->to == id))
        out.push_back(*c);
    }
  }
  return out;
}

std::string GraphDocument::uniqueName(const std::string& base) const {
  std::string stem = base.empty() ? "node" : base;
  if (!m_byName.count(stem)) return stem;
  for (int i = 2;; ++i)
    if (std::string n = stem + "_" + std::to_string(i); !m_byName.count(n)) return n;
}

bool GraphDocument::reaches(NodeId from, NodeId to) const {
  // Walk upstream from `to` through its inputs: cheaper than building user lists.
  std::vector<NodeId> stack{to};
  std::set<NodeId> seen;
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (n == from) return true;
    if (!seen.insert(n).second) continue;
    for (int k = 0; k < node(n).def.inputs_size(); ++k)
      if (auto c = inputConnection(n, k)) stack.push_back(c->from);
  }
  return false;
}

QString GraphDocument::connectRefusal(NodeId from, int fromPort, NodeId to, int toPort) {
  if (!contains(from) || !contains(to)) return tr("no such node");
  const QString toName = QString::fromStdString(node(to).def.name());
  const QString fromName = QString::fromStdString(node(from).def.name());
  if (from == to) return tr("'%1' cannot feed itself").arg(toName);
  if (fromPort < 0 || fromPort >= outputPortCount(from))
    return tr("'%1' has no output port %2").arg(fromName).arg(fromPort);
  if (toPort < 0 || toPort >= inputPortCount(to))
    return tr("'%1' has no input port %2").arg(toName).arg(toPort);
  if (reaches(to, from))
    return tr("this would make a cycle: '%1' already feeds '%2'").arg(toName, fromName);

  // Would the engine accept the wire? Only a problem that this wire creates on the
  // target counts; the graph may have others already. The target alone is analysed
  // with the wire, unless blocks make the whole model the unit.
  std::vector<ModelProblem> problems;
  if (!m_wholeAnalysis) {
    proto::NodeDef def = node(to).def;
    setInput(def, toPort, joinRef(node(from).def.name(), fromPort));
    problems = m_analyzer.problemsIf(to, def);
  } else {
    proto::ModelDef model = toProject().model();
    setInput(*model.mutable_nodes(indexOf(to)), toPort, joinRef(node(from).def.name(), fromPort));
    problems = analyzeModel(model, batch()).problems;
  }
  for (const ModelProblem& p : problems) {
    if (p.node != node(to).def.name()) continue;
    bool old = std::any_of(analysis().problems.begin(), analysis().problems.end(),
                           [&](const ModelProblem& q) { return q.message == p.message; });
    bool unconnected = p.message.find("is not connected") != std::string::npos;
    if (!old && !unconnected) {
      // From an Input with no shape yet, the way to give it one comes first.
      const QString hint = shapeHint(from), why = QString::fromStdString(p.message);
      return hint.isEmpty() ? why : hint + " (" + why + ")";
    }
  }
  return {};
}

QString GraphDocument::shapeHint(NodeId id) const {
  const proto::NodeDef& def = node(id).def;
  const OpDef* op = opOf(def);
  if (!op || !op->external) return {};
  // Only the features' Input (field "x", float): labels and targets are one value a
  // sample, and an int32 input holds indices.
  auto field = def.attrs().find("field"), dtype = def.attrs().find("dtype");
  if (field != def.attrs().end() && field->second.s() != "x") return {};
  if (dtype != def.attrs().end() && dtype->second.s() != "float32") return {};
  auto shape = def.attrs().find("shape");
  if (shape != def.attrs().end() && shape->second.ints().values_size() > 0) return {};
  return tr("Input '%1' has no shape: pick a dataset (Data > Choose Dataset…) or set its shape")
      .arg(QString::fromStdString(def.name()));
}

}  // namespace netloom::editor
