// The canvas: a QGraphicsScene that draws a GraphDocument and turns mouse gestures
// into document commands. Nodes are boxes with a caption, a one-line attribute
// summary and typed ports; wires are curves labelled with the tensor shape that the
// document's live analysis gives them. The scene never edits its items directly: it
// asks the document, and redraws from the document's signals, so undo and redo move
// the picture exactly as they move the model.
#pragma once

#include <QGraphicsEllipseItem>
#include <QGraphicsPathItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "editor/document.h"

namespace netloom::editor {

class GraphScene;

// Geometry shared by the items and the tests that aim at them.
struct NodeGeometry {
  static constexpr qreal kWidth = 176, kHeader = 22, kSummary = 18, kRow = 18, kPad = 6;
  static constexpr qreal kPortRadius = 5;
  static qreal height(int rows) { return kHeader + kSummary + rows * kRow + kPad; }
  static qreal portY(int index) { return kHeader + kSummary + index * kRow + kRow / 2; }
  // Drawn top to bottom (Layout.direction): inputs spread along the top edge,
  // outputs along the bottom, with a row of names for a side with more than one.
  static qreal verticalHeight(int inputs, int outputs) {
    return kHeader + kSummary + ((inputs > 1) + (outputs > 1)) * kRow + kPad;
  }
  static qreal portX(int index, int count) { return kWidth * (index + 1) / (count + 1); }
  // A node's height either way.
  static qreal heightFor(bool vertical, int inputs, int outputs) {
    return vertical ? verticalHeight(inputs, outputs)
                    : height(std::max(1, std::max(inputs, outputs)));
  }
};

class NodeItem : public QGraphicsItem {
 public:
  NodeItem(GraphScene* scene, NodeId id);
  NodeId id() const { return m_id; }
  QRectF boundingRect() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem* opt, QWidget* w) override;
  // Port centres in scene coordinates.
  QPointF inputPos(int port) const;
  QPointF outputPos(int port) const;
  // The port under `scenePos`: {true for an output, index}, or index -1.
  std::pair<bool, int> portAt(QPointF scenePos) const;
  void refresh();  // re-read name, attributes, ports and problems from the document
  QString summary() const { return m_summary; }
  bool hasProblem() const { return !m_problems.isEmpty(); }
  QString problemText() const { return m_problems.join("\n"); }

 protected:
  QVariant itemChange(GraphicsItemChange change, const QVariant& value) override;

 private:
  GraphScene* m_scene;
  NodeId m_id;
  QString m_name, m_op, m_summary;
  QStringList m_inputs, m_outputs, m_problems;
  std::vector<int> m_badPorts;
  bool m_known = true;
  bool m_instance = false;  // a block instance: drawn with a block's header
  bool m_vertical = false;  // drawn top to bottom
  qreal m_height = 60;
  QColor m_placement;  // its pipeline stage's or tensor group's tint; invalid: none
};

class WireItem : public QGraphicsPathItem {
 public:
  WireItem(GraphScene* scene, const Connection& c);
  // Zoomed far out, a straight line without its label: the level of detail that
  // keeps a 10,000-node graph fluid when it is framed whole.
  void paint(QPainter* p, const QStyleOptionGraphicsItem* o, QWidget* w) override;
  const Connection& connection() const { return m_c; }
  QString label() const { return m_label->text(); }
  // The boxing (or pipeline message) the wire carries under the project's parallel
  // strategy, drawn as a small glyph with its bytes in the tooltip; empty: none.
  QString boxing() const { return m_box->isVisible() ? m_box->toolTip() : QString(); }
  void refresh();  // re-route and re-label
  void relabel();  // the shape label and the fault highlight only

 private:
  void relabelParallel(QString& label);
  GraphScene* m_scene;
  Connection m_c;
  QGraphicsSimpleTextItem* m_label;
  QGraphicsEllipseItem* m_box;
};

class GraphScene : public QGraphicsScene {
  Q_OBJECT

 public:
  static constexpr qreal kGrid = 16;

  explicit GraphScene(GraphDocument* doc, QObject* parent = nullptr);
  GraphDocument* document() const { return m_doc; }
  NodeItem* itemFor(NodeId id) const;
  std::vector<WireItem*> wires() const;
  WireItem* wireInto(NodeId to, int port) const;
  std::vector<NodeId> selectedNodes() const;
  void selectNodes(const std::vector<NodeId>& ids);
  QRectF nodesRect(const std::vector<NodeId>& ids) const;  // all nodes when empty

  bool snapToGrid() const { return m_snap; }
  void setSnapToGrid(bool on) { m_snap = on; }
  QPointF snapped(QPointF p) const;

  // Adds a node of `op` at `scenePos` (snapped) and, when `from` is set, wires its
  // first input to that output; one undo step. Returns the new node.
  NodeId addNodeAt(const std::string& op, QPointF scenePos, NodeId from = -1, int fromPort = 0);

  // Whether some nodes out of view still show an analysis since changed (see
  // refreshAll); finishRefresh redraws them now.
  bool refreshPending() const { return !m_stale.empty(); }
  void finishRefresh();

 signals:
  void refreshFinished();               // the last nodes out of view were redrawn
  void refused(const QString& reason);  // a connection refused at the drop
  // A wire from `from`:`fromPort` was dropped on empty canvas at `scenePos`.
  void quickAddRequested(QPointF scenePos, netloom::editor::NodeId from, int fromPort);

 protected:
  void drawBackground(QPainter* p, const QRectF& rect) override;
  void mousePressEvent(QGraphicsSceneMouseEvent* e) override;
  void mouseMoveEvent(QGraphicsSceneMouseEvent* e) override;
  void mouseReleaseEvent(QGraphicsSceneMouseEvent* e) override;

 private:
  friend class NodeItem;
  void rebuild();
  void addItemFor(NodeId id);
  void removeItemFor(NodeId id);
  void syncWires();
  // After an edit: every wire when nodes arrived (they may complete dangling
  // references), else the wires into the nodes that changed.
  void syncEditedWires();
  void syncWiresInto(NodeId id);
  // After the analysis changed: the nodes it changed and their wires. When they are
  // many, those in view (and those the edit touched) now, the rest while idle.
  void refreshAll();
  void refreshNode(NodeId id);
  void refreshStale();
  void nodeDragged(NodeId id);
  NodeItem* nodeAt(QPointF scenePos) const;

  GraphDocument* m_doc;
  std::unordered_map<NodeId, NodeItem*> m_items;
  std::map<std::tuple<NodeId, int>, WireItem*> m_wires;          // by (to, toPort)
  std::unordered_map<NodeId, std::vector<WireItem*>> m_wiresOf;  // both ends, from m_wires
  void indexWires();
  bool m_snap = true;
  bool m_syncing = false;  // positions being set from the document
  // What the edit under way touched, until the document's changed().
  std::vector<NodeId> m_edited, m_editedLast;
  bool m_added = false;
  std::unordered_set<NodeId> m_stale;  // analysis changed, not yet redrawn
  bool m_staleQueued = false;
  // A wire being dragged out of a port.
  QGraphicsPathItem* m_pending = nullptr;
  NodeId m_dragFrom = -1;
  int m_dragPort = 0;
  bool m_dragFromOutput = true;
  // Where the left button went down, and whether the pointer has since gone far
  // enough to be a drag (a click moves nothing).
  QPoint m_pressScreen;
  bool m_dragging = false;
  // A node drag: positions at its start, committed as one move on release.
  std::map<NodeId, QPointF> m_dragStart;
  int m_dragId = 0;
};

}  // namespace netloom::editor
