// The editor's document model: the nodes, ports, connections and positions of a
// project's graph, free of QtWidgets so it runs and is tested without a scene. Nodes
// have integer ids that stay fixed across undo and redo; every user gesture is one
// command on the document's undo stack, and every change is announced by a signal.
#pragma once

#include <QObject>
#include <QPointF>
#include <QString>
#include <QUndoStack>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/graph/analyze.h"
#include "engine/graph/op.h"
#include "engine/proto/project.pb.h"
#include "engine/train/parallel_layout.h"
#include "engine/util/status.h"

namespace netloom::editor {

using NodeId = int;

// Whether users may place `op` (the palette's ops), not one of the engine's own.
bool isPlaceable(const OpDef& op);

// A wire: output port `fromPort` of `from` feeds input port `toPort` of `to`.
struct Connection {
  NodeId from = -1;
  int fromPort = 0;
  NodeId to = -1;
  int toPort = 0;
  bool operator==(const Connection&) const = default;
};

// One node as the document holds it: its definition as saved, and where it is drawn.
struct DocNode {
  proto::NodeDef def;
  QPointF pos;
};

// The state of some nodes before or after an edit; a missing entry means "absent".
// `index` is the node's place in document (and file) order.
struct NodeState {
  NodeId id = -1;
  int index = 0;
  std::optional<DocNode> node;
};

// A block definition before or after an edit; a missing `def` means "absent".
// `index` is its place among the project's blocks.
struct BlockState {
  std::string name;
  int index = 0;
  std::optional<proto::ModelDef> def;
};

// The project's training and data settings, the model's tied parameters and the
// canvas's direction, before or after an edit.
struct SettingsState {
  proto::TrainDef train;
  proto::DataDef data;
  proto::Layout::Direction direction = proto::Layout::LEFT_TO_RIGHT;
  std::vector<proto::SharedParam> shared;
  std::optional<proto::Sweep> sweep;  // none: the project has no sweep section
};

class GraphDocument : public QObject {
  Q_OBJECT

 public:
  explicit GraphDocument(QObject* parent = nullptr);

  // Replaces the whole document (new ids, empty undo history).
  void setProject(const proto::Project& project);
  Status load(const QString& path);
  Status save(const QString& path);  // atomic; marks the undo stack clean
  proto::Project toProject() const;
  // What save() writes: the file's own bytes when nothing in it changed, else
  // projectToText with the file's comments and untouched lines kept; positions
  // laid out after loading a file that had none (laidOut()) are not written unless
  // nodes moved since.
  std::string toText() const;
  // The positions as they are now were laid out for a file that had none: not an edit.
  void laidOut();
  QString filePath() const { return m_path; }
  void setFilePath(const QString& path) { m_path = path; }
  // Whether the file gave a position to every node (else they sit on a grid).
  bool hasLayout() const { return m_hadLayout; }

  // Queries.
  const std::vector<NodeId>& nodes() const { return m_order; }  // document order
  bool contains(NodeId id) const { return m_nodes.count(id) != 0; }
  const DocNode& node(NodeId id) const { return m_nodes.at(id); }
  NodeId findNode(const std::string& name) const;
  int inputPortCount(NodeId id) const;
  int outputPortCount(NodeId id) const;
  std::optional<Connection> inputConnection(NodeId id, int port) const;
  std::vector<Connection> connections() const;
  std::vector<Connection> connectionsOf(NodeId id) const;  // both directions
  // A fresh node name from `base`: "conv" -> "conv", "conv_2", "conv_3", ...
  std::string uniqueName(const std::string& base) const;
  // Why `from:fromPort -> to:toPort` may not be drawn, or empty when it may.
  QString connectRefusal(NodeId from, int fromPort, NodeId to, int toPort);
  // For the features' Input (field "x", float32) with no shape yet, the sentence that
  // says how to give it one; empty for any other node.
  QString shapeHint(NodeId id) const;
  bool reaches(NodeId from, NodeId to) const;  // a path of wires from -> to exists
  // The placeable ops whose first input takes the tensor `from`:`fromPort` produces
  // (every op with an input while that shape is unknown), by name.
  std::vector<std::string> opsAccepting(NodeId from, int fromPort) const;
  // The blocks a user may place: the project's (but one named like an op), then the
  // library's it lacks.
  std::vector<proto::ModelDef> placeableBlocks() const;
  // Whether `op` (given the project's blocks, for an instance) takes `source` on its
  // first input.
  static bool accepts(const TensorDesc& source, const OpDef& op,
                      const std::vector<proto::ModelDef>& blocks);

  // The op a node shows: a registered op, or for an instance its block as an op
  // (see blockOp); null for an op this version does not know.
  const OpDef* opOf(const proto::NodeDef& def) const;
  const OpDef* opOf(NodeId id) const { return opOf(node(id).def); }
  bool isInstance(NodeId id) const;
  // The project's block definitions.
  std::vector<std::string> blockNames() const;
  const proto::ModelDef* block(const std::string& name) const;
  // Whether `ids` are the nodes an instance was expanded into (see collapse).
  bool canCollapse(const std::vector<NodeId>& ids) const;

  // Live validation: refreshed after every change (see analysisChanged), inferring
  // again only what the change reached (see ModelAnalyzer); a model with block
  // instances is analysed whole.
  // The project's parallel strategy as the canvas draws it (train.distributed),
  // planned again with the analysis; Strategy::None for one rank.
  const ParallelLayout& parallel() const { return m_parallel; }
  const ModelAnalysis& analysis() const {
    return m_wholeAnalysis ? *m_wholeAnalysis : m_analyzer.analysis();
  }
  // The nodes whose analysis the last analysisChanged may have changed (a superset);
  // null when it may have changed for every node.
  const std::vector<NodeId>* analysisChangedNodes() const {
    return m_analysisChangedAll ? nullptr : &m_analyzer.changed();
  }
  int64_t batch() const;

  // Gestures: each is one undoable command. They return false (with a reason in
  // `why` when given) when the gesture is refused; the document is then unchanged.
  NodeId addNode(const std::string& op, QPointF pos, const std::string& name = {});
  void removeNodes(const std::vector<NodeId>& ids);
  bool connectPorts(NodeId from, int fromPort, NodeId to, int toPort, QString* why = nullptr);
  void disconnectInput(NodeId to, int toPort);
  // A drag: the same `dragId` merges every call of one drag into a single step.
  void moveNodes(const std::map<NodeId, QPointF>& positions, int dragId = 0);
  // New positions as one named step that never merges (auto-layout).
  void placeNodes(const std::map<NodeId, QPointF>& positions, const QString& text);
  // Sets an attribute (or clears it back to the default when `value` is empty).
  // Edits with the same non-zero `typingId` (one burst of typing) merge into one step.
  void setAttr(NodeId id, const std::string& key, const std::optional<proto::AttrValue>& value,
               int typingId = 0);
  bool renameNode(NodeId id, const std::string& name, QString* why = nullptr);
  // Text-format fragments (a Project with model nodes and their positions), as the
  // clipboard carries them.
  std::string copyText(const std::vector<NodeId>& ids) const;
  // Pastes at `offset` from the fragment's own positions; names are made unique and
  // wires into nodes outside the fragment are dropped. Returns the new ids, or the
  // reason the text is not a fragment.
  Result<std::vector<NodeId>> pasteText(const std::string& text, QPointF offset);
  std::vector<NodeId> duplicate(const std::vector<NodeId>& ids, QPointF offset);

  // Blocks. Each is one undoable step.
  // Turns `ids` into a new block named `name` and one instance of it in their place:
  // wires from outside become the block's inputs, wires to outside its outputs.
  Result<NodeId> makeBlock(const std::vector<NodeId>& ids, const std::string& name);
  // Replaces an instance by its block's nodes, named "instance/node", with its
  // params written in; the definition stays for other instances.
  Result<std::vector<NodeId>> expandInstance(NodeId id);
  // Turns the nodes of an expanded instance, as edited since, back into the
  // instance, and makes them the block's definition: every instance follows. Params
  // an edit left at the instance's value are params again.
  Result<NodeId> collapse(const std::vector<NodeId>& ids);
  // Replaces (or adds) a block definition; every instance follows.
  void setBlock(const proto::ModelDef& def);
  // The training and data settings (the Training and Data docks). Edits with the
  // same non-zero `typingId` merge into one step.
  const proto::TrainDef& train() const { return m_project.train(); }
  const proto::DataDef& data() const { return m_project.data(); }
  void setSettings(const proto::TrainDef& train, const proto::DataDef& data, const QString& text,
                   int typingId = 0);
  // The project's sweep section (the Experiments dock), one undoable step; none removes it.
  void setSweep(const std::optional<proto::Sweep>& sweep, const QString& text);
  // Which way the graph is drawn (Layout.direction). setDirection turns the drawing
  // and moves the nodes to `positions` as one undoable step; directionForLayout sets
  // it with no step, for a file laid out as it opens.
  proto::Layout::Direction direction() const { return m_project.layout().direction(); }
  bool vertical() const { return direction() == proto::Layout::TOP_TO_BOTTOM; }
  void setDirection(proto::Layout::Direction direction, const std::map<NodeId, QPointF>& positions);
  void directionForLayout(proto::Layout::Direction direction);

  QUndoStack* undoStack() { return &m_undo; }

  // The primitive every command is made of: applies node and block states and
  // announces them.
  void applyStates(const std::vector<NodeState>& states, const std::vector<BlockState>& blocks = {},
                   const std::optional<SettingsState>& settings = std::nullopt);
  NodeState stateOf(NodeId id) const;
  NodeId allocateId() { return m_nextId++; }

 signals:
  void nodeAdded(netloom::editor::NodeId id);
  void nodeRemoved(netloom::editor::NodeId id);
  void nodeChanged(netloom::editor::NodeId id);  // name, attributes or inputs
  void nodeMoved(netloom::editor::NodeId id);
  void reset();             // setProject: everything is new
  void blocksChanged();     // a block definition was added, changed or removed
  void settingsChanged();   // the training or data settings
  void directionChanged();  // the graph is drawn the other way
  void changed();           // after any edit, once
  void analysisChanged();   // shapes and problems were recomputed

 private:
  void pushEdit(const QString& text, std::vector<NodeState> before, std::vector<NodeState> after,
                int mergeKind = 0, int mergeId = 0, std::vector<BlockState> blocksBefore = {},
                std::vector<BlockState> blocksAfter = {},
                std::optional<SettingsState> settingsBefore = std::nullopt,
                std::optional<SettingsState> settingsAfter = std::nullopt);
  BlockState blockState(const std::string& name) const;
  SettingsState settingsState() const;
  void rebuildBlockOps();
  // The definition `ids` make: see makeBlock. `seed` gives ports (and their order)
  // the definition must keep; `innerName` names each node inside it.
  struct Extraction;
  Extraction extract(const std::vector<NodeId>& ids, const proto::ModelDef* seed,
                     const std::vector<std::string>& seedInputs,
                     const std::function<std::string(const std::string&)>& innerName) const;
  Result<NodeId> replaceByInstance(const std::vector<NodeId>& ids, Extraction ex,
                                   const std::string& instanceName,
                                   const std::map<std::string, proto::AttrValue>& attrs,
                                   QPointF pos, const QString& text);
  // `dirty`: the nodes that changed, appeared or went; null: analyse from scratch.
  void reanalyze(const std::vector<NodeId>* dirty = nullptr);
  // The states before and after giving `positions` to the nodes that move.
  void positionStates(const std::map<NodeId, QPointF>& positions, std::vector<NodeState>& before,
                      std::vector<NodeState>& after) const;
  int indexOf(NodeId id) const;

  proto::Project m_project;  // everything but the nodes and their positions
  ParallelLayout m_parallel;
  std::unordered_map<NodeId, DocNode> m_nodes;
  std::unordered_map<std::string, NodeId> m_byName;
  std::vector<NodeId> m_order;
  NodeId m_nextId = 1;
  ModelAnalyzer m_analyzer;
  std::optional<ModelAnalysis> m_wholeAnalysis;  // for a model with block instances
  int64_t m_analyzedBatch = 0;
  bool m_analysisChangedAll = true;
  std::map<std::string, OpDef> m_blockOps;  // the project's blocks as ops
  // What collapse needs of an instance that was expanded, by instance name.
  struct Expansion {
    std::string block;
    std::map<std::string, proto::AttrValue> attrs;  // the instance's params
    std::vector<std::string> inputs;                // its input references
    QPointF pos;
  };
  std::map<std::string, Expansion> m_expansions;
  QUndoStack m_undo;
  QString m_path;
  bool m_hadLayout = true;
  // The file as it was read (or last saved), and what it says; the layout made for it.
  std::string m_fileText;
  proto::Project m_fileProject;
  std::optional<proto::Layout> m_madeLayout;
};

}  // namespace netloom::editor
