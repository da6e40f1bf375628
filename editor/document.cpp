#include "editor/document.h"

#include <google/protobuf/util/message_differencer.h>

#include <QFile>
#include <algorithm>
#include <set>

#include "editor/commands.h"
#include "editor/library.h"
#include "editor/node_refs.h"
#include "engine/graph/blocks.h"
#include "engine/graph/graph.h"
#include "engine/graph/op.h"
#include "engine/io/output_file.h"
#include "engine/io/project_file.h"

namespace netloom::editor {

namespace {

// Where nodes without a saved position go: a plain grid in file order, so nothing
// lands on top of another until the user lays the graph out.
QPointF gridSlot(int i) {
  return QPointF(240.0 * (i % 6), 140.0 * (i / 6));
}

// Appends a node and its position, as files and clipboard fragments both hold them.
void addNodeTo(proto::Project& p, const DocNode& n) {
  *p.mutable_model()->add_nodes() = n.def;
  auto* pos = p.mutable_layout()->add_positions();
  pos->set_node(n.def.name());
  pos->set_x(n.pos.x());
  pos->set_y(n.pos.y());
}

}  // namespace

GraphDocument::GraphDocument(QObject* parent) : QObject(parent) {}

void GraphDocument::setProject(const proto::Project& project) {
  m_project = project;
  m_project.mutable_model()->clear_nodes();
  m_project.mutable_layout()->clear_positions();
  m_fileText.clear();  // load() sets them again for a file
  m_fileProject.Clear();
  m_madeLayout.reset();
  m_nodes.clear();
  m_byName.clear();
  m_order.clear();
  std::map<std::string, QPointF> saved;
  for (const auto& p : project.layout().positions()) saved[p.node()] = QPointF(p.x(), p.y());
  m_hadLayout = true;
  for (int i = 0; i < project.model().nodes_size(); ++i) {
    DocNode n{project.model().nodes(i), gridSlot(i)};
    if (auto it = saved.find(n.def.name()); it != saved.end())
      n.pos = it->second;
    else
      m_hadLayout = false;
    NodeId id = m_nextId++;
    m_byName.emplace(n.def.name(), id);
    m_nodes.emplace(id, std::move(n));
    m_order.push_back(id);
  }
  m_expansions.clear();
  rebuildBlockOps();
  m_undo.clear();
  emit reset();
  emit changed();
  reanalyze();
}

Status GraphDocument::load(const QString& path) {
  auto project = loadProject(path.toStdString());
  if (!project) return project.error();
  setProject(*project);
  QFile file(path);
  m_fileText = file.open(QIODevice::ReadOnly) ? file.readAll().toStdString() : std::string();
  m_fileProject = *project;
  m_madeLayout.reset();
  m_path = path;
  m_undo.setClean();
  return {};
}

void GraphDocument::laidOut() {
  m_madeLayout = toProject().layout();
}

Status GraphDocument::save(const QString& path) {
  const std::string text = toText();
  if (Status s = writeFileAtomic(path.toStdString(), text); !s) return s;
  m_fileText = text;
  m_fileProject = toProject();
  if (m_madeLayout && !m_fileProject.has_layout()) m_madeLayout.reset();
  m_path = path;
  m_undo.setClean();
  return {};
}

proto::Project GraphDocument::toProject() const {
  proto::Project p = m_project;
  for (NodeId id : m_order) {
    const DocNode& n = m_nodes.at(id);
    addNodeTo(p, n);
  }
  return p;
}

std::string GraphDocument::toText() const {
  proto::Project p = toProject();
  using google::protobuf::util::MessageDifferencer;
  if (m_madeLayout && MessageDifferencer::Equals(p.layout(), *m_madeLayout)) p.clear_layout();
  if (!m_fileText.empty() && MessageDifferencer::Equals(p, m_fileProject)) return m_fileText;
  return projectToText(p, m_fileText);
}

bool isPlaceable(const OpDef& op) {
  return op.role != OpRole::Internal && op.role != OpRole::Optimizer && op.category != "Internal";
}

int64_t GraphDocument::batch() const {
  return m_project.train().batch_size() > 0 ? m_project.train().batch_size() : 1;
}

int GraphDocument::indexOf(NodeId id) const {
  auto it = std::find(m_order.begin(), m_order.end(), id);
  return it == m_order.end() ? int(m_order.size()) : int(it - m_order.begin());
}

NodeState GraphDocument::stateOf(NodeId id) const {
  NodeState s{id, indexOf(id), std::nullopt};
  if (auto it = m_nodes.find(id); it != m_nodes.end()) s.node = it->second;
  return s;
}

void GraphDocument::applyStates(const std::vector<NodeState>& states,
                                const std::vector<BlockState>& blocks,
                                const std::optional<SettingsState>& settings) {
  bool turned = false;
  if (settings) {
    // Only what changed is written, so an edit of the ties alone leaves no empty
    // train or data section behind.
    if (settings->train.SerializeAsString() != m_project.train().SerializeAsString())
      *m_project.mutable_train() = settings->train;
    if (settings->data.SerializeAsString() != m_project.data().SerializeAsString())
      *m_project.mutable_data() = settings->data;
    turned = settings->direction != direction();
    m_project.mutable_layout()->set_direction(settings->direction);
    auto* shared = m_project.mutable_model()->mutable_shared();
    shared->Clear();
    for (const proto::SharedParam& tie : settings->shared) *shared->Add() = tie;
    if (!settings->sweep)
      m_project.clear_sweep();
    else if (settings->sweep->SerializeAsString() != m_project.sweep().SerializeAsString() ||
             !m_project.has_sweep())
      *m_project.mutable_sweep() = *settings->sweep;
  }
  // Block definitions first, so nodes that arrive with them find their ops.
  std::set<std::string> redefined;
  auto* defs = m_project.mutable_model()->mutable_blocks();
  for (const BlockState& b : blocks) {
    for (int i = 0; i < defs->size(); ++i)
      if (defs->Get(i).name() == b.name) {
        defs->DeleteSubrange(i, 1);
        break;
      }
    if (b.def) {
      defs->Add(proto::ModelDef(*b.def));
      for (int i = defs->size() - 1; i > std::clamp(b.index, 0, defs->size() - 1); --i)
        defs->SwapElements(i, i - 1);
    }
    redefined.insert(b.name);
  }
  if (!blocks.empty()) rebuildBlockOps();
  std::vector<const NodeState*> inserts;
  std::vector<NodeId> removed, changedIds, moved;
  for (const NodeState& s : states) {
    auto it = m_nodes.find(s.id);
    if (!s.node) {
      if (it == m_nodes.end()) continue;
      m_byName.erase(it->second.def.name());
      m_nodes.erase(it);
      m_order.erase(std::find(m_order.begin(), m_order.end(), s.id));
      removed.push_back(s.id);
    } else if (it == m_nodes.end()) {
      inserts.push_back(&s);
    }
  }
  // Names first leave, then arrive, so that edits which swap names apply cleanly.
  for (const NodeState& s : states)
    if (s.node && m_nodes.count(s.id)) m_byName.erase(m_nodes.at(s.id).def.name());
  for (const NodeState& s : states) {
    if (!s.node || !m_nodes.count(s.id)) continue;
    DocNode& n = m_nodes.at(s.id);
    if (n.def.SerializeAsString() != s.node->def.SerializeAsString()) changedIds.push_back(s.id);
    if (n.pos != s.node->pos) moved.push_back(s.id);
    n = *s.node;
    m_byName[n.def.name()] = s.id;
  }
  std::sort(inserts.begin(), inserts.end(),
            [](const NodeState* a, const NodeState* b) { return a->index < b->index; });
  for (const NodeState* s : inserts) {
    int at = std::clamp(s->index, 0, int(m_order.size()));
    m_order.insert(m_order.begin() + at, s->id);
    m_nodes.emplace(s->id, *s->node);
    m_byName[s->node->def.name()] = s->id;
  }
  // Instances of a redefined block show its new ports.
  for (NodeId id : m_order)
    if (redefined.count(node(id).def.op()) &&
        std::find(changedIds.begin(), changedIds.end(), id) == changedIds.end() &&
        std::none_of(inserts.begin(), inserts.end(),
                     [id](const NodeState* s) { return s->id == id; }))
      changedIds.push_back(id);
  for (NodeId id : removed) emit nodeRemoved(id);
  for (const NodeState* s : inserts) emit nodeAdded(s->id);
  if (!blocks.empty()) emit blocksChanged();
  for (NodeId id : changedIds) emit nodeChanged(id);
  for (NodeId id : moved) emit nodeMoved(id);
  if (turned) emit directionChanged();
  if (settings) emit settingsChanged();
  emit changed();
  // The batch size is in the settings, and every shape carries it.
  if (!removed.empty() || !inserts.empty() || !changedIds.empty() || !blocks.empty() || settings) {
    std::vector<NodeId> dirty = std::move(changedIds);
    dirty.insert(dirty.end(), removed.begin(), removed.end());
    for (const NodeState* s : inserts) dirty.push_back(s->id);
    reanalyze(&dirty);
  }
}

void GraphDocument::reanalyze(const std::vector<NodeId>* dirty) {
  bool instances = false;
  for (NodeId id : m_order) {
    const std::string& op = node(id).def.op();
    if (op == kBlockInputOp || m_blockOps.count(op)) {
      instances = true;
      break;
    }
  }
  if (instances) {
    m_wholeAnalysis = analyzeModel(toProject().model(), batch());
    m_analysisChangedAll = true;
  } else {
    std::vector<ModelAnalyzer::NodeRef> refs;
    refs.reserve(m_order.size());
    for (NodeId id : m_order) refs.push_back({id, &m_nodes.at(id).def});
    if (!dirty || m_wholeAnalysis || m_analyzedBatch != batch())
      m_analyzer.reset(refs, batch());
    else
      m_analyzer.update(refs, *dirty);
    m_analysisChangedAll = !dirty || m_wholeAnalysis || m_analyzedBatch != batch();
    m_wholeAnalysis.reset();
  }
  m_analyzedBatch = batch();
  // Only where the project spreads over ranks: a one-rank model pays nothing.
  if (m_project.train().distributed().ranks() > 1 ||
      m_parallel.strategy != ParallelLayout::Strategy::None) {
    m_parallel = layoutParallel(toProject());
    m_analysisChangedAll = true;  // every wire's label and node's placement may move
  }
  emit analysisChanged();
}

void GraphDocument::pushEdit(const QString& text, std::vector<NodeState> before,
                             std::vector<NodeState> after, int mergeKind, int mergeId,
                             std::vector<BlockState> blocksBefore,
                             std::vector<BlockState> blocksAfter,
                             std::optional<SettingsState> settingsBefore,
                             std::optional<SettingsState> settingsAfter) {
  m_undo.push(new EditCommand(this, text, std::move(before), std::move(after), mergeKind, mergeId,
                              std::move(blocksBefore), std::move(blocksAfter),
                              std::move(settingsBefore), std::move(settingsAfter)));
}

NodeId GraphDocument::addNode(const std::string& op, QPointF pos, const std::string& name) {
  std::string base = name;
  if (base.empty()) {
    base = op;
    std::transform(base.begin(), base.end(), base.begin(), ::tolower);
  }
  NodeId id = allocateId();
  DocNode n;
  n.def.set_name(uniqueName(base));
  n.def.set_op(op);
  n.pos = pos;
  // A library block the project does not hold yet comes with its definition, and
  // with those of the library blocks it instances (GPT's TransformerBlock).
  std::vector<BlockState> blocksBefore, blocksAfter;
  std::vector<std::string> wanted{op};
  for (size_t k = 0; k < wanted.size(); ++k) {
    const std::string& name = wanted[k];
    const proto::ModelDef* lib = libraryBlock(name);
    if (!lib || blockState(name).def || OpRegistry::instance().find(name)) continue;
    blocksBefore.push_back(blockState(name));
    blocksAfter.push_back({name, m_project.model().blocks_size() + int(blocksAfter.size()), *lib});
    for (const proto::NodeDef& inner : lib->nodes())
      if (std::find(wanted.begin(), wanted.end(), inner.op()) == wanted.end())
        wanted.push_back(inner.op());
  }
  pushEdit(tr("Add %1").arg(QString::fromStdString(op)), {stateOf(id)},
           {NodeState{id, int(m_order.size()), n}}, NoMerge, 0, std::move(blocksBefore),
           std::move(blocksAfter));
  return id;
}

void GraphDocument::removeNodes(const std::vector<NodeId>& ids) {
  std::set<NodeId> gone;
  std::set<std::string> goneNames;
  for (NodeId id : ids)
    if (contains(id)) gone.insert(id), goneNames.insert(node(id).def.name());
  if (gone.empty()) return;
  std::vector<NodeState> before, after;
  for (NodeId id : m_order) {
    NodeState s = stateOf(id);
    if (gone.count(id)) {
      before.push_back(s);
      after.push_back({id, s.index, std::nullopt});
      continue;
    }
    // Users of removed nodes keep their place; only the wire goes.
    DocNode n = *s.node;
    bool touched = false;
    for (int k = 0; k < n.def.inputs_size(); ++k)
      if (goneNames.count(splitRef(n.def.inputs(k)).first)) n.def.set_inputs(k, ""), touched = true;
    if (!touched) continue;
    trimInputs(n.def);
    before.push_back(s);
    after.push_back({id, s.index, n});
  }
  pushEdit(gone.size() == 1 ? tr("Delete node") : tr("Delete %1 nodes").arg(gone.size()),
           std::move(before), std::move(after));
}

bool GraphDocument::connectPorts(NodeId from, int fromPort, NodeId to, int toPort, QString* why) {
  QString refusal = connectRefusal(from, fromPort, to, toPort);
  if (!refusal.isEmpty()) {
    if (why) *why = refusal;
    return false;
  }
  NodeState before = stateOf(to), after = before;
  setInput(after.node->def, toPort, joinRef(node(from).def.name(), fromPort));
  pushEdit(tr("Connect"), {before}, {after});
  return true;
}

void GraphDocument::disconnectInput(NodeId to, int toPort) {
  if (!inputConnection(to, toPort) && !(contains(to) && toPort < node(to).def.inputs_size()))
    return;
  NodeState before = stateOf(to), after = before;
  setInput(after.node->def, toPort, "");
  pushEdit(tr("Disconnect"), {before}, {after});
}

void GraphDocument::positionStates(const std::map<NodeId, QPointF>& positions,
                                   std::vector<NodeState>& before,
                                   std::vector<NodeState>& after) const {
  for (const auto& [id, pos] : positions) {
    if (!contains(id) || node(id).pos == pos) continue;
    before.push_back(stateOf(id));
    after.push_back(before.back());
    after.back().node->pos = pos;
  }
}

void GraphDocument::moveNodes(const std::map<NodeId, QPointF>& positions, int dragId) {
  std::vector<NodeState> before, after;
  positionStates(positions, before, after);
  if (before.empty()) return;
  pushEdit(before.size() == 1 ? tr("Move node") : tr("Move %1 nodes").arg(before.size()),
           std::move(before), std::move(after), MergeMove, dragId);
}

void GraphDocument::placeNodes(const std::map<NodeId, QPointF>& positions, const QString& text) {
  std::vector<NodeState> before, after;
  positionStates(positions, before, after);
  if (!before.empty()) pushEdit(text, std::move(before), std::move(after));
}

void GraphDocument::setAttr(NodeId id, const std::string& key,
                            const std::optional<proto::AttrValue>& value, int typingId) {
  if (!contains(id)) return;
  NodeState before = stateOf(id), after = before;
  auto* attrs = after.node->def.mutable_attrs();
  if (value)
    (*attrs)[key] = *value;
  else
    attrs->erase(key);
  if (sameNode(*before.node, *after.node)) return;
  pushEdit(tr("Set %1").arg(QString::fromStdString(key)), {before}, {after}, MergeAttr, typingId);
}

bool GraphDocument::renameNode(NodeId id, const std::string& name, QString* why) {
  auto refuse = [&](const QString& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!contains(id)) return refuse(tr("no such node"));
  const std::string old = node(id).def.name();
  if (name == old) return true;
  if (name.empty()) return refuse(tr("a node needs a name"));
  if (name.find_first_of(":\"' \t\n") != std::string::npos)
    return refuse(
        tr("'%1': a name may not hold ':', quotes or spaces").arg(QString::fromStdString(name)));
  if (std::string problem = nodeNameProblem(name); !problem.empty())
    return refuse(QString::fromStdString(problem));
  if (m_byName.count(name))
    return refuse(tr("another node is already named '%1'").arg(QString::fromStdString(name)));
  std::vector<NodeState> before, after;
  for (NodeId other : m_order) {
    const proto::NodeDef& def = node(other).def;
    if (other != id &&
        std::none_of(def.inputs().begin(), def.inputs().end(),
                     [&](const std::string& in) { return splitRef(in).first == old; }))
      continue;
    NodeState s = stateOf(other);
    DocNode n = *s.node;
    if (other == id) n.def.set_name(name);
    for (int k = 0; k < n.def.inputs_size(); ++k) {
      auto [src, port] = splitRef(n.def.inputs(k));
      if (src == old) n.def.set_inputs(k, joinRef(name, port));
    }
    if (sameNode(n, *s.node)) continue;
    before.push_back(s);
    after.push_back({other, s.index, n});
  }
  pushEdit(tr("Rename %1").arg(QString::fromStdString(old)), std::move(before), std::move(after));
  return true;
}

std::string GraphDocument::copyText(const std::vector<NodeId>& ids) const {
  std::set<NodeId> chosen(ids.begin(), ids.end());
  proto::Project fragment;
  for (NodeId id : m_order) {
    if (!chosen.count(id)) continue;
    const DocNode& n = node(id);
    addNodeTo(fragment, n);
  }
  return projectToText(fragment);
}

Result<std::vector<NodeId>> GraphDocument::pasteText(const std::string& text, QPointF offset) {
  auto parsed = parseProject(text, "clipboard");
  if (!parsed)
    return makeError("the clipboard holds no NetLoom nodes (" + parsed.error().message + ")");
  const proto::ModelDef& model = parsed->model();
  if (model.nodes_size() == 0) return makeError("the clipboard holds no NetLoom nodes");
  std::map<std::string, QPointF> saved;
  for (const auto& p : parsed->layout().positions()) saved[p.node()] = QPointF(p.x(), p.y());

  // New names, unique against the document and against each other.
  std::map<std::string, std::string> renamed;
  std::set<std::string> taken;
  for (const auto& nd : model.nodes()) {
    std::string base = nd.name().empty() ? nd.op() : nd.name();
    std::string name = uniqueName(base);
    for (int i = 2; taken.count(name); ++i) name = uniqueName(base + "_" + std::to_string(i));
    taken.insert(name);
    renamed[nd.name()] = name;
  }
  std::vector<NodeState> before, after;
  std::vector<NodeId> ids;
  int index = int(m_order.size());
  for (int i = 0; i < model.nodes_size(); ++i) {
    DocNode n{model.nodes(i), gridSlot(i)};
    if (auto it = saved.find(n.def.name()); it != saved.end()) n.pos = it->second;
    n.pos += offset;
    n.def.set_name(renamed[model.nodes(i).name()]);
    for (int k = 0; k < n.def.inputs_size(); ++k) {
      auto [src, port] = splitRef(n.def.inputs(k));
      auto it = renamed.find(src);
      n.def.set_inputs(k, it == renamed.end() || src.empty() ? "" : joinRef(it->second, port));
    }
    trimInputs(n.def);
    NodeId id = allocateId();
    ids.push_back(id);
    before.push_back({id, index, std::nullopt});
    after.push_back({id, index++, n});
  }
  pushEdit(ids.size() == 1 ? tr("Paste node") : tr("Paste %1 nodes").arg(ids.size()),
           std::move(before), std::move(after));
  return ids;
}

std::vector<NodeId> GraphDocument::duplicate(const std::vector<NodeId>& ids, QPointF offset) {
  if (ids.empty()) return {};
  auto pasted = pasteText(copyText(ids), offset);
  return pasted ? *pasted : std::vector<NodeId>{};
}

void GraphDocument::setSettings(const proto::TrainDef& train, const proto::DataDef& data,
                                const QString& text, int typingId) {
  SettingsState before = settingsState(), after = before;
  after.train = train;
  after.data = data;
  if (before.train.SerializeAsString() == after.train.SerializeAsString() &&
      before.data.SerializeAsString() == after.data.SerializeAsString())
    return;
  pushEdit(text, {}, {}, MergeSettings, typingId, {}, {}, before, after);
}

void GraphDocument::setSweep(const std::optional<proto::Sweep>& sweep, const QString& text) {
  SettingsState before = settingsState(), after = before;
  after.sweep = sweep;
  const auto bytes = [](const std::optional<proto::Sweep>& s) {
    return s ? "+" + s->SerializeAsString() : std::string();
  };
  if (bytes(before.sweep) == bytes(after.sweep)) return;
  pushEdit(text, {}, {}, 0, 0, {}, {}, before, after);
}

void GraphDocument::setDirection(proto::Layout::Direction to,
                                 const std::map<NodeId, QPointF>& positions) {
  if (to == direction()) return;
  std::vector<NodeState> before, after;
  positionStates(positions, before, after);
  SettingsState was = settingsState(), now = was;
  now.direction = to;
  pushEdit(to == proto::Layout::TOP_TO_BOTTOM ? tr("Lay Out Top to Bottom")
                                              : tr("Lay Out Left to Right"),
           std::move(before), std::move(after), 0, 0, {}, {}, was, now);
}

SettingsState GraphDocument::settingsState() const {
  const auto& shared = m_project.model().shared();
  return {m_project.train(),
          m_project.data(),
          direction(),
          {shared.begin(), shared.end()},
          m_project.has_sweep() ? std::optional<proto::Sweep>(m_project.sweep()) : std::nullopt};
}

void GraphDocument::directionForLayout(proto::Layout::Direction to) {
  if (to == direction()) return;
  m_project.mutable_layout()->set_direction(to);
  emit directionChanged();
}

}  // namespace netloom::editor
