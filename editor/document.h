// The editor's document model: the nodes, ports, connections and positions of a
// project's graph, free of QtWidgets so it runs and is tested without a scene. Nodes
// have integer ids that stay fixed across undo and redo; every user gesture is one
// command on the document's undo stack, and every change is announced by a signal.
#pragma once

#include <QObject>
#include <QPointF>
#include <QString>
#include <QUndoStack>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/graph/analyze.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {
struct OpDef;
}

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

class GraphDocument : public QObject {
  Q_OBJECT

 public:
  explicit GraphDocument(QObject* parent = nullptr);

  // Replaces the whole document (new ids, empty undo history).
  void setProject(const proto::Project& project);
  Status load(const QString& path);
  Status save(const QString& path);  // atomic; marks the undo stack clean
  proto::Project toProject() const;
  std::string toText() const;
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
  QString connectRefusal(NodeId from, int fromPort, NodeId to, int toPort) const;
  bool reaches(NodeId from, NodeId to) const;  // a path of wires from -> to exists
  // The placeable ops whose first input takes the tensor `from`:`fromPort` produces
  // (every op with an input while that shape is unknown), by name.
  std::vector<std::string> opsAccepting(NodeId from, int fromPort) const;

  // Live validation: refreshed after every change (see analysisChanged).
  const ModelAnalysis& analysis() const { return m_analysis; }
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

  QUndoStack* undoStack() { return &m_undo; }

  // The primitive every command is made of: applies node states and announces them.
  void applyStates(const std::vector<NodeState>& states);
  NodeState stateOf(NodeId id) const;
  NodeId allocateId() { return m_nextId++; }

 signals:
  void nodeAdded(netloom::editor::NodeId id);
  void nodeRemoved(netloom::editor::NodeId id);
  void nodeChanged(netloom::editor::NodeId id);  // name, attributes or inputs
  void nodeMoved(netloom::editor::NodeId id);
  void reset();            // setProject: everything is new
  void changed();          // after any edit, once
  void analysisChanged();  // shapes and problems were recomputed

 private:
  void pushEdit(const QString& text, std::vector<NodeState> before, std::vector<NodeState> after,
                int mergeKind = 0, int mergeId = 0);
  void reanalyze();
  // The states before and after giving `positions` to the nodes that move.
  void positionStates(const std::map<NodeId, QPointF>& positions, std::vector<NodeState>& before,
                      std::vector<NodeState>& after) const;
  int indexOf(NodeId id) const;

  proto::Project m_project;  // everything but the nodes and their positions
  std::unordered_map<NodeId, DocNode> m_nodes;
  std::unordered_map<std::string, NodeId> m_byName;
  std::vector<NodeId> m_order;
  NodeId m_nextId = 1;
  ModelAnalysis m_analysis;
  QUndoStack m_undo;
  QString m_path;
  bool m_hadLayout = true;
};

}  // namespace netloom::editor
