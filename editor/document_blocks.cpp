// The document's block gestures: make block, expand and collapse an instance,
// edit a definition; and instances' ops.
#include <set>

#include "editor/commands.h"
#include "editor/document.h"
#include "editor/library.h"
#include "editor/node_refs.h"
#include "engine/graph/blocks.h"

namespace netloom::editor {

const OpDef* GraphDocument::opOf(const proto::NodeDef& def) const {
  if (auto it = m_blockOps.find(def.op()); it != m_blockOps.end()) return &it->second;
  return OpRegistry::instance().find(def.op());
}

bool GraphDocument::isInstance(NodeId id) const {
  return contains(id) && m_blockOps.count(node(id).def.op());
}

std::vector<std::string> GraphDocument::blockNames() const {
  std::vector<std::string> names;
  for (const proto::ModelDef& b : m_project.model().blocks()) names.push_back(b.name());
  return names;
}

const proto::ModelDef* GraphDocument::block(const std::string& name) const {
  return findBlock(m_project.model(), name);
}

BlockState GraphDocument::blockState(const std::string& name) const {
  const auto& blocks = m_project.model().blocks();
  for (int i = 0; i < blocks.size(); ++i)
    if (blocks.Get(i).name() == name) return {name, i, blocks.Get(i)};
  return {name, int(blocks.size()), std::nullopt};
}

void GraphDocument::rebuildBlockOps() {
  m_blockOps.clear();
  for (const proto::ModelDef& b : m_project.model().blocks())
    if (!OpRegistry::instance().find(b.name())) m_blockOps.emplace(b.name(), blockOp(b));
}

void GraphDocument::setBlock(const proto::ModelDef& def) {
  BlockState before = blockState(def.name()), after = before;
  after.def = def;
  pushEdit(tr("Edit block %1").arg(QString::fromStdString(def.name())), {}, {}, NoMerge, 0,
           {before}, {after});
}

struct GraphDocument::Extraction {
  proto::ModelDef def;
  std::vector<std::string> inputs;              // what feeds each input port, from outside
  std::map<std::string, int> outputOf;          // an inside reference -> the output port it is
  std::map<std::string, int> readerPort;        // a reference outside nodes read -> that port
  std::vector<proto::SharedParam> outsideTies;  // the model's ties that stay outside
};

GraphDocument::Extraction GraphDocument::extract(
    const std::vector<NodeId>& ids, const proto::ModelDef* seed,
    const std::vector<std::string>& seedInputs,
    const std::function<std::string(const std::string&)>& innerName) const {
  Extraction ex;
  std::set<std::string> inside;
  for (NodeId id : ids) inside.insert(node(id).def.name());
  std::map<std::string, std::string> portFor;  // outside reference -> BlockInput node
  std::set<std::string> portNames;
  // The seed's ports come first and keep their names and order.
  if (seed) {
    BlockInterface io = blockInterface(*seed);
    for (size_t k = 0; k < io.inputs.size(); ++k) {
      proto::NodeDef* in = ex.def.add_nodes();
      in->set_name(io.inputs[k]);
      in->set_op(kBlockInputOp);
      std::string ref = k < seedInputs.size() ? seedInputs[k] : std::string();
      ex.inputs.push_back(ref);
      if (!ref.empty()) portFor.emplace(ref, io.inputs[k]);
      portNames.insert(io.inputs[k]);
    }
  }
  auto portNamed = [&](const std::string& ref) {
    auto it = portFor.find(ref);
    if (it != portFor.end()) return it->second;
    std::string name = "in";
    for (int i = 2; portNames.count(name) || inside.count(name); ++i)
      name = "in" + std::to_string(i);
    portNames.insert(name);
    proto::NodeDef* in = ex.def.add_nodes();
    in->set_name(name);
    in->set_op(kBlockInputOp);
    ex.inputs.push_back(ref);
    portFor.emplace(ref, name);
    return name;
  };
  // Inside nodes in document order, their references rewritten.
  std::vector<proto::NodeDef> body;
  for (NodeId id : m_order) {
    if (!inside.count(node(id).def.name())) continue;
    proto::NodeDef def = node(id).def;
    def.set_name(innerName(def.name()));
    for (int k = 0; k < def.inputs_size(); ++k) {
      auto [src, port] = splitRef(def.inputs(k));
      if (src.empty()) continue;
      def.set_inputs(k,
                     inside.count(src) ? joinRef(innerName(src), port) : portNamed(def.inputs(k)));
    }
    body.push_back(std::move(def));
  }
  for (proto::NodeDef& d : body) *ex.def.add_nodes() = std::move(d);
  // Tied parameters of two inside nodes are tied inside the block; the model's other
  // ties stay as they are.
  auto nodeOf = [](const std::string& param) { return param.substr(0, param.rfind('.')); };
  auto innerParam = [&](const std::string& param) {
    return innerName(nodeOf(param)) + param.substr(nodeOf(param).size());
  };
  for (const proto::SharedParam& tie : m_project.model().shared()) {
    if (inside.count(nodeOf(tie.param())) && inside.count(nodeOf(tie.with()))) {
      proto::SharedParam* t = ex.def.add_shared();
      t->set_param(innerParam(tie.param()));
      t->set_with(innerParam(tie.with()));
    } else {
      ex.outsideTies.push_back(tie);
    }
  }
  // Outputs: the seed's first, then whatever outside nodes read from inside.
  if (seed)
    for (const std::string& o : seed->outputs()) {
      ex.outputOf.emplace(o, ex.def.outputs_size());
      ex.def.add_outputs(o);
    }
  for (NodeId id : m_order) {
    const proto::NodeDef& def = node(id).def;
    if (inside.count(def.name())) continue;
    for (const std::string& ref : def.inputs()) {
      auto [src, port] = splitRef(ref);
      if (!inside.count(src)) continue;
      std::string innerRef = joinRef(innerName(src), port);
      if (ex.outputOf.emplace(innerRef, ex.def.outputs_size()).second) ex.def.add_outputs(innerRef);
      ex.readerPort[ref] = ex.outputOf.at(innerRef);
    }
  }
  return ex;
}

Result<NodeId> GraphDocument::replaceByInstance(
    const std::vector<NodeId>& ids, Extraction ex, const std::string& instanceName,
    const std::map<std::string, proto::AttrValue>& attrs, QPointF pos, const QString& text) {
  std::set<NodeId> gone(ids.begin(), ids.end());
  std::vector<NodeState> before, after;
  int firstIndex = int(m_order.size());
  for (NodeId id : ids) firstIndex = std::min(firstIndex, indexOf(id));
  for (NodeId id : ids) {
    before.push_back(stateOf(id));
    after.push_back({id, before.back().index, std::nullopt});
  }
  DocNode inst;
  inst.def.set_name(instanceName);
  inst.def.set_op(ex.def.name());
  for (const std::string& ref : ex.inputs) inst.def.add_inputs(ref);
  trimInputs(inst.def);
  for (const auto& [k, v] : attrs) (*inst.def.mutable_attrs())[k] = v;
  inst.pos = pos;
  NodeId instId = allocateId();
  before.push_back({instId, firstIndex, std::nullopt});
  after.push_back({instId, firstIndex, inst});
  // Outside readers of inside outputs now read the instance's ports.
  for (NodeId id : m_order) {
    if (gone.count(id)) continue;
    NodeState s = stateOf(id);
    DocNode n = *s.node;
    for (int k = 0; k < n.def.inputs_size(); ++k) {
      auto it = ex.readerPort.find(n.def.inputs(k));
      if (it != ex.readerPort.end()) n.def.set_inputs(k, joinRef(instanceName, it->second));
    }
    if (sameNode(n, *s.node)) continue;
    before.push_back(s);
    after.push_back({id, s.index, n});
  }
  BlockState blockBefore = blockState(ex.def.name()), blockAfter = blockBefore;
  blockAfter.def = ex.def;
  std::optional<SettingsState> settingsBefore, settingsAfter;
  if (ex.def.shared_size() > 0) {
    settingsBefore = settingsAfter = settingsState();
    settingsAfter->shared = ex.outsideTies;
  }
  pushEdit(text, std::move(before), std::move(after), NoMerge, 0, {blockBefore}, {blockAfter},
           std::move(settingsBefore), std::move(settingsAfter));
  return instId;
}

namespace {

bool validBlockName(const std::string& name) {
  return !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
         });
}

QPointF centroid(const std::vector<QPointF>& points) {
  QPointF c;
  for (const QPointF& p : points) c += p;
  return points.empty() ? c : c / double(points.size());
}

}  // namespace

Result<NodeId> GraphDocument::makeBlock(const std::vector<NodeId>& ids, const std::string& name) {
  std::vector<NodeId> chosen;
  for (NodeId id : ids)
    if (contains(id) && std::find(chosen.begin(), chosen.end(), id) == chosen.end())
      chosen.push_back(id);
  if (chosen.empty()) return makeError("select the nodes to make a block of");
  if (!validBlockName(name))
    return makeError("'" + name + "': a block name is a letter, then letters, digits, '_' or '-'");
  if (OpRegistry::instance().find(name)) return makeError("'" + name + "' is the name of an op");
  if (block(name) || libraryBlock(name))
    return makeError("there is already a block named '" + name + "'");
  for (const std::string& o : m_project.model().outputs())
    for (NodeId id : chosen)
      if (splitRef(o).first == node(id).def.name())
        return makeError("'" + node(id).def.name() + "' is one of the model's outputs");
  Extraction ex = extract(chosen, nullptr, {}, [](const std::string& n) { return n; });
  ex.def.set_name(name);
  std::vector<QPointF> points;
  for (NodeId id : chosen) points.push_back(node(id).pos);
  std::string base = name;
  std::transform(base.begin(), base.end(), base.begin(), ::tolower);
  return replaceByInstance(chosen, std::move(ex), uniqueName(base), {}, centroid(points),
                           tr("Make block %1").arg(QString::fromStdString(name)));
}

Result<std::vector<NodeId>> GraphDocument::expandInstance(NodeId id) {
  if (!isInstance(id)) return makeError("not a block instance");
  const proto::NodeDef inst = node(id).def;
  const QPointF at = node(id).pos;
  const proto::ModelDef& def = *block(inst.op());
  // The instance's params, over the block's defaults.
  std::map<std::string, proto::AttrValue> params(def.params().begin(), def.params().end());
  for (const auto& [k, v] : inst.attrs()) params[k] = v;
  BlockInterface io = blockInterface(def);
  std::map<std::string, std::string> names;  // inside name -> new document name
  std::map<std::string, std::string> feeds;  // BlockInput -> the instance's input
  for (size_t k = 0; k < io.inputs.size(); ++k)
    feeds[io.inputs[k]] = int(k) < inst.inputs_size() ? inst.inputs(int(k)) : std::string();
  // A node whose "when" param is false is left out, its first input passing through.
  std::map<std::string, std::string> through;
  for (const proto::NodeDef& d : def.nodes()) {
    auto when = d.attrs().find(kWhenAttr);
    if (when == d.attrs().end()) continue;
    const bool negate = when->second.s().rfind('!', 0) == 0;
    auto p = params.find(when->second.s().substr(negate ? 2 : 1));
    if (p != params.end() && p->second.value_case() == proto::AttrValue::kB &&
        p->second.b() == negate)
      through[d.name()] = d.inputs_size() ? d.inputs(0) : std::string();
  }
  std::set<std::string> taken;
  for (const proto::NodeDef& d : def.nodes()) {
    if (d.op() == kBlockInputOp || through.count(d.name())) continue;
    std::string n = uniqueName(inst.name() + "/" + d.name());
    for (int i = 2; taken.count(n); ++i)
      n = uniqueName(inst.name() + "/" + d.name() + "_" + std::to_string(i));
    taken.insert(n);
    names[d.name()] = n;
  }
  auto outside = [&](std::string ref) {
    for (int hops = 0; hops < def.nodes_size(); ++hops) {
      auto t = through.find(splitRef(ref).first);
      if (t == through.end()) break;
      ref = t->second;
    }
    auto [src, port] = splitRef(ref);
    if (auto f = feeds.find(src); f != feeds.end()) return f->second;
    auto it = names.find(src);
    return it == names.end() ? std::string() : joinRef(it->second, port);
  };
  // Layers by longest path from the block's inputs, for a first placement.
  std::map<std::string, int> depth;
  std::function<int(const std::string&)> depthOf = [&](const std::string& n) -> int {
    if (auto it = depth.find(n); it != depth.end()) return it->second;
    depth[n] = 0;  // guards against cycles
    int d = 0;
    for (const proto::NodeDef& nd : def.nodes())
      if (nd.name() == n)
        for (const std::string& in : nd.inputs()) {
          std::string src = splitRef(in).first;
          if (names.count(src)) d = std::max(d, depthOf(src) + 1);
        }
    return depth[n] = d;
  };
  std::map<int, int> rows;
  std::vector<NodeState> before, after;
  std::vector<NodeId> ids;
  int index = indexOf(id);
  before.push_back(stateOf(id));
  after.push_back({id, index, std::nullopt});
  for (const proto::NodeDef& d : def.nodes()) {
    if (d.op() == kBlockInputOp || through.count(d.name())) continue;
    DocNode n;
    n.def = d;
    n.def.set_name(names[d.name()]);
    n.def.mutable_attrs()->erase(kWhenAttr);
    for (int k = 0; k < n.def.inputs_size(); ++k) n.def.set_inputs(k, outside(d.inputs(k)));
    trimInputs(n.def);
    for (auto& [key, value] : *n.def.mutable_attrs())
      if (value.value_case() == proto::AttrValue::kS && value.s().rfind('$', 0) == 0)
        if (auto p = params.find(value.s().substr(1)); p != params.end()) value = p->second;
    int layer = depthOf(d.name());
    n.pos = at + QPointF(240.0 * layer, 140.0 * rows[layer]++);
    NodeId nid = allocateId();
    ids.push_back(nid);
    before.push_back({nid, index, std::nullopt});
    after.push_back({nid, index++, n});
  }
  // Readers of the instance read what its outputs named.
  for (NodeId other : m_order) {
    if (other == id) continue;
    NodeState s = stateOf(other);
    DocNode n = *s.node;
    for (int k = 0; k < n.def.inputs_size(); ++k) {
      auto [src, port] = splitRef(n.def.inputs(k));
      if (src != inst.name()) continue;
      n.def.set_inputs(k, port < def.outputs_size() ? outside(def.outputs(port)) : std::string());
    }
    trimInputs(n.def);
    if (sameNode(n, *s.node)) continue;
    before.push_back(s);
    after.push_back({other, s.index, n});
  }
  Expansion e;
  e.block = inst.op();
  e.attrs = {inst.attrs().begin(), inst.attrs().end()};
  e.inputs = {inst.inputs().begin(), inst.inputs().end()};
  e.pos = at;
  m_expansions[inst.name()] = e;
  // The block's tied parameters stay tied, between the nodes they became.
  std::optional<SettingsState> settingsBefore, settingsAfter;
  if (def.shared_size() > 0) {
    settingsBefore = settingsAfter = settingsState();
    auto renamed = [&](const std::string& param) {
      const size_t dot = param.rfind('.');
      auto it = names.find(param.substr(0, dot));
      return it == names.end() || dot == std::string::npos ? param : it->second + param.substr(dot);
    };
    for (const proto::SharedParam& tie : def.shared()) {
      proto::SharedParam& t = settingsAfter->shared.emplace_back();
      t.set_param(renamed(tie.param()));
      t.set_with(renamed(tie.with()));
    }
  }
  pushEdit(tr("Expand %1").arg(QString::fromStdString(inst.name())), std::move(before),
           std::move(after), NoMerge, 0, {}, {}, std::move(settingsBefore),
           std::move(settingsAfter));
  return ids;
}

bool GraphDocument::canCollapse(const std::vector<NodeId>& ids) const {
  if (ids.empty()) return false;
  for (const auto& [inst, e] : m_expansions) {
    if (findNode(inst) >= 0 || !block(e.block)) continue;
    std::string prefix = inst + "/";
    bool all = std::all_of(ids.begin(), ids.end(), [&](NodeId id) {
      return contains(id) && node(id).def.name().rfind(prefix, 0) == 0;
    });
    if (all) return true;
  }
  return false;
}

Result<NodeId> GraphDocument::collapse(const std::vector<NodeId>& ids) {
  for (const auto& [inst, e] : m_expansions) {
    if (findNode(inst) >= 0 || !block(e.block)) continue;
    std::string prefix = inst + "/";
    bool all = !ids.empty() && std::all_of(ids.begin(), ids.end(), [&](NodeId id) {
      return contains(id) && node(id).def.name().rfind(prefix, 0) == 0;
    });
    if (!all) continue;
    const proto::ModelDef old = *block(e.block);
    auto inner = [&](const std::string& n) {
      return n.rfind(prefix, 0) == 0 ? n.substr(prefix.size()) : n;
    };
    Extraction ex = extract(ids, &old, e.inputs, inner);
    ex.def.set_name(old.name());
    ex.def.set_doc(old.doc());
    *ex.def.mutable_params() = old.params();
    // An attribute still at the value the instance's param gave it is the param again.
    std::map<std::string, proto::AttrValue> params(old.params().begin(), old.params().end());
    for (const auto& [k, v] : e.attrs) params[k] = v;
    std::map<std::string, const proto::NodeDef*> was;
    for (const proto::NodeDef& d : old.nodes()) was[d.name()] = &d;
    for (proto::NodeDef& d : *ex.def.mutable_nodes()) {
      auto it = was.find(d.name());
      if (it == was.end()) continue;
      for (const auto& [key, value] : it->second->attrs()) {
        if (value.value_case() != proto::AttrValue::kS || value.s().rfind('$', 0) != 0) continue;
        auto p = params.find(value.s().substr(1));
        auto cur = d.mutable_attrs()->find(key);
        if (p != params.end() && cur != d.mutable_attrs()->end() &&
            cur->second.SerializeAsString() == p->second.SerializeAsString())
          cur->second = value;
      }
    }
    std::string instName = inst;
    Expansion keep = e;
    auto made = replaceByInstance(ids, std::move(ex), instName, keep.attrs, keep.pos,
                                  tr("Collapse %1").arg(QString::fromStdString(instName)));
    if (made) m_expansions.erase(instName);
    return made;
  }
  return makeError("these nodes are not an expanded block instance");
}

}  // namespace netloom::editor
