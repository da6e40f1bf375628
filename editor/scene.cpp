#include "editor/scene.h"

#include <QApplication>
#include <QGraphicsSceneMouseEvent>
#include <QGraphicsView>
#include <QPainter>
#include <QStyleOptionGraphicsItem>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <utility>

#include "editor/canvas_style.h"
#include "editor/view.h"
#include "engine/graph/op.h"

namespace netloom::editor {

// GraphScene ------------------------------------------------------------------------

GraphScene::GraphScene(GraphDocument* doc, QObject* parent) : QGraphicsScene(parent), m_doc(doc) {
  setItemIndexMethod(QGraphicsScene::BspTreeIndex);
  connect(doc, &GraphDocument::reset, this, &GraphScene::rebuild);
  connect(doc, &GraphDocument::directionChanged, this, &GraphScene::rebuild);
  connect(doc, &GraphDocument::nodeAdded, this, &GraphScene::addItemFor);
  connect(doc, &GraphDocument::nodeRemoved, this, &GraphScene::removeItemFor);
  connect(doc, &GraphDocument::nodeMoved, this, [this](NodeId id) {
    if (NodeItem* it = itemFor(id)) {
      m_syncing = true;
      it->setPos(m_doc->node(id).pos);
      m_syncing = false;
    }
  });
  connect(doc, &GraphDocument::nodeAdded, this, [this] { m_added = true; });
  connect(doc, &GraphDocument::nodeChanged, this, [this](NodeId id) { m_edited.push_back(id); });
  connect(doc, &GraphDocument::changed, this, &GraphScene::syncEditedWires);
  connect(doc, &GraphDocument::analysisChanged, this, &GraphScene::refreshAll);
  rebuild();
}

NodeItem* GraphScene::itemFor(NodeId id) const {
  auto it = m_items.find(id);
  return it == m_items.end() ? nullptr : it->second;
}

std::vector<WireItem*> GraphScene::wires() const {
  std::vector<WireItem*> out;
  for (const auto& [key, w] : m_wires) out.push_back(w);
  return out;
}

WireItem* GraphScene::wireInto(NodeId to, int port) const {
  auto it = m_wires.find({to, port});
  return it == m_wires.end() ? nullptr : it->second;
}

std::vector<NodeId> GraphScene::selectedNodes() const {
  std::vector<NodeId> ids;
  for (NodeId id : m_doc->nodes())  // document order, so copies keep it
    if (NodeItem* it = itemFor(id); it && it->isSelected()) ids.push_back(id);
  return ids;
}

void GraphScene::selectNodes(const std::vector<NodeId>& ids) {
  clearSelection();
  for (NodeId id : ids)
    if (NodeItem* it = itemFor(id)) it->setSelected(true);
}

QRectF GraphScene::nodesRect(const std::vector<NodeId>& ids) const {
  QRectF r;
  auto add = [&](NodeItem* it) {
    if (it) r = r.united(it->sceneBoundingRect());
  };
  if (ids.empty())
    for (const auto& [id, it] : m_items) add(it);
  for (NodeId id : ids) add(itemFor(id));
  return r;
}

QPointF GraphScene::snapped(QPointF p) const {
  return QPointF(std::round(p.x() / kGrid) * kGrid, std::round(p.y() / kGrid) * kGrid);
}

NodeId GraphScene::addNodeAt(const std::string& op, QPointF scenePos, NodeId from, int fromPort) {
  QPointF pos = m_snap ? snapped(scenePos) : scenePos;
  if (from < 0 || !m_doc->contains(from)) return m_doc->addNode(op, pos);
  QUndoStack* undo = m_doc->undoStack();
  undo->beginMacro(tr("Add %1").arg(QString::fromStdString(op)));
  NodeId id = m_doc->addNode(op, pos);
  QString why;
  if (m_doc->inputPortCount(id) > 0 && !m_doc->connectPorts(from, fromPort, id, 0, &why))
    emit refused(why);
  undo->endMacro();
  selectNodes({id});
  return id;
}

void GraphScene::rebuild() {
  m_stale.clear();
  for (auto& [key, w] : m_wires) delete w;
  m_wires.clear();
  m_wiresOf.clear();
  for (auto& [id, it] : m_items) delete it;
  m_items.clear();
  for (NodeId id : m_doc->nodes()) addItemFor(id);
  syncWires();
}

void GraphScene::addItemFor(NodeId id) {
  if (itemFor(id)) return;
  auto* it = new NodeItem(this, id);
  m_syncing = true;
  it->setPos(m_doc->node(id).pos);
  m_syncing = false;
  addItem(it);
  m_items[id] = it;
}

void GraphScene::removeItemFor(NodeId id) {
  // Through the index, so deleting many nodes at once stays linear.
  if (auto found = m_wiresOf.find(id); found != m_wiresOf.end()) {
    std::vector<WireItem*> gone = std::move(found->second);
    m_wiresOf.erase(found);
    for (WireItem* w : gone) {
      Connection c = w->connection();
      if (NodeId other = c.from == id ? c.to : c.from; other != id) {
        auto& list = m_wiresOf[other];
        list.erase(std::remove(list.begin(), list.end(), w), list.end());
      }
      m_wires.erase({c.to, c.toPort});
      delete w;
    }
  }
  if (NodeItem* it = itemFor(id)) {
    delete it;
    m_items.erase(id);
  }
}

// Brings the wires in line with the document's connections.
void GraphScene::syncWires() {
  std::map<std::tuple<NodeId, int>, Connection> want;
  for (const Connection& c : m_doc->connections())
    if (itemFor(c.from) && itemFor(c.to)) want[{c.to, c.toPort}] = c;
  for (auto it = m_wires.begin(); it != m_wires.end();) {
    auto w = want.find(it->first);
    if (w == want.end() || !(w->second == it->second->connection())) {
      delete it->second;
      it = m_wires.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, c] : want)
    if (!m_wires.count(key)) {
      auto* w = new WireItem(this, c);
      addItem(w);
      m_wires[key] = w;
    }
  indexWires();
}

void GraphScene::syncEditedWires() {
  std::vector<NodeId> edited = std::move(m_edited);
  m_edited.clear();
  m_editedLast = edited;
  if (std::exchange(m_added, false)) return syncWires();
  for (NodeId id : edited) syncWiresInto(id);
}

void GraphScene::syncWiresInto(NodeId id) {
  if (!m_doc->contains(id)) return;
  auto dropWire = [&](std::map<std::tuple<NodeId, int>, WireItem*>::iterator it) {
    WireItem* w = it->second;
    for (NodeId end : {w->connection().from, w->connection().to})
      if (auto found = m_wiresOf.find(end); found != m_wiresOf.end()) {
        auto& list = found->second;
        list.erase(std::remove(list.begin(), list.end(), w), list.end());
      }
    delete w;
    return m_wires.erase(it);
  };
  int ports = m_doc->node(id).def.inputs_size();
  for (auto it = m_wires.lower_bound({id, 0}); it != m_wires.end() && std::get<0>(it->first) == id;)
    it = std::get<1>(it->first) >= ports ? dropWire(it) : std::next(it);
  for (int port = 0; port < ports; ++port) {
    std::optional<Connection> c = m_doc->inputConnection(id, port);
    if (c && !itemFor(c->from)) c.reset();
    auto it = m_wires.find({id, port});
    if (it != m_wires.end() && c && it->second->connection() == *c) continue;
    if (it != m_wires.end()) dropWire(it);
    if (!c) continue;
    auto* w = new WireItem(this, *c);
    addItem(w);
    m_wires[{id, port}] = w;
    m_wiresOf[c->from].push_back(w);
    if (c->to != c->from) m_wiresOf[c->to].push_back(w);
  }
}

void GraphScene::refreshAll() {
  const std::vector<NodeId>* changed = m_doc->analysisChangedNodes();
  if (!changed) syncWires();
  const std::vector<NodeId>& ids = changed ? *changed : m_doc->nodes();
  constexpr size_t kEager = 400;  // about what a frame can redraw
  if (ids.size() <= kEager && m_stale.empty()) {
    for (NodeId id : ids) refreshNode(id);
    // An edit that leaves the analysis as it was (a dropout rate, an undone name)
    // still changes what its node shows.
    for (NodeId id : std::exchange(m_editedLast, {}))
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) refreshNode(id);
    return;
  }
  m_stale.insert(ids.begin(), ids.end());
  // What the edit itself touched may have changed shape: never left for later.
  std::vector<NodeId> now = std::move(m_editedLast);
  m_editedLast.clear();
  std::vector<QRectF> seen;
  for (QGraphicsView* v : views())
    if (!dynamic_cast<MiniMap*>(v))  // it shows everything, too small to read
      seen.push_back(v->mapToScene(v->viewport()->rect()).boundingRect());
  for (NodeId id : ids)
    if (NodeItem* it = itemFor(id);
        it && std::any_of(seen.begin(), seen.end(),
                          [&](const QRectF& r) { return r.intersects(it->sceneBoundingRect()); }))
      now.push_back(id);
  for (NodeId id : now)
    if (m_stale.erase(id)) refreshNode(id);
  if (!m_stale.empty() && !std::exchange(m_staleQueued, true))
    QTimer::singleShot(0, this, &GraphScene::refreshStale);
}

void GraphScene::refreshNode(NodeId id) {
  if (NodeItem* it = itemFor(id)) it->refresh();
  if (auto found = m_wiresOf.find(id); found != m_wiresOf.end())
    for (WireItem* w : found->second) w->relabel();
}

// A batch at a time, so the event loop (and the user) is not held up.
void GraphScene::refreshStale() {
  m_staleQueued = false;
  constexpr int kBatch = 500;
  for (int i = 0; i < kBatch && !m_stale.empty(); ++i) {
    NodeId id = *m_stale.begin();
    m_stale.erase(m_stale.begin());
    refreshNode(id);
  }
  if (!m_stale.empty())
    m_staleQueued = true, QTimer::singleShot(0, this, &GraphScene::refreshStale);
  else
    emit refreshFinished();
}

void GraphScene::finishRefresh() {
  if (m_stale.empty()) return;
  std::unordered_set<NodeId> stale = std::move(m_stale);
  m_stale.clear();
  for (NodeId id : stale) refreshNode(id);
  emit refreshFinished();
}

void GraphScene::indexWires() {
  m_wiresOf.clear();
  for (const auto& [key, w] : m_wires) {
    m_wiresOf[w->connection().from].push_back(w);
    if (w->connection().to != w->connection().from) m_wiresOf[w->connection().to].push_back(w);
  }
}

void GraphScene::nodeDragged(NodeId id) {
  auto it = m_wiresOf.find(id);
  if (it == m_wiresOf.end()) return;
  for (WireItem* w : it->second) w->refresh();
}

NodeItem* GraphScene::nodeAt(QPointF scenePos) const {
  for (QGraphicsItem* it : items(scenePos))
    if (auto* n = dynamic_cast<NodeItem*>(it)) return n;
  // Ports stick out of the node's body: look a little around.
  for (QGraphicsItem* it :
       items(QRectF(scenePos - QPointF(10, 10), QSizeF(20, 20)), Qt::IntersectsItemBoundingRect))
    if (auto* n = dynamic_cast<NodeItem*>(it); n && n->portAt(scenePos).second >= 0) return n;
  return nullptr;
}

void GraphScene::drawBackground(QPainter* p, const QRectF& rect) {
  p->fillRect(rect, kCanvas);
  qreal scale = views().isEmpty() ? 1.0 : views().first()->transform().m11();
  if (scale < 0.3) return;  // far out, the grid is noise
  auto lines = [&](qreal step, const QColor& c) {
    QVector<QLineF> ls;
    for (qreal x = std::floor(rect.left() / step) * step; x < rect.right(); x += step)
      ls.append(QLineF(x, rect.top(), x, rect.bottom()));
    for (qreal y = std::floor(rect.top() / step) * step; y < rect.bottom(); y += step)
      ls.append(QLineF(rect.left(), y, rect.right(), y));
    p->setPen(QPen(c, 0));
    p->drawLines(ls);
  };
  if (scale >= 0.6) lines(kGrid, kGridMinor);
  lines(kGrid * 8, kGridMajor);
}

void GraphScene::mousePressEvent(QGraphicsSceneMouseEvent* e) {
  if (e->button() == Qt::LeftButton) {
    if (NodeItem* n = nodeAt(e->scenePos())) {
      auto [output, port] = n->portAt(e->scenePos());
      if (port >= 0) {
        // From an input that is wired, the drag picks the wire up from its source.
        m_dragFromOutput = output;
        m_dragFrom = n->id();
        m_dragPort = port;
        if (!output)
          if (auto c = m_doc->inputConnection(n->id(), port)) {
            m_doc->disconnectInput(n->id(), port);
            m_dragFrom = c->from, m_dragPort = c->fromPort, m_dragFromOutput = true;
          }
        m_pending = addPath(QPainterPath(), QPen(kWire, 1.6, Qt::DashLine));
        m_pending->setZValue(2);
        e->accept();
        return;
      }
    }
  }
  QGraphicsScene::mousePressEvent(e);
  m_dragStart.clear();
  for (NodeId id : selectedNodes()) m_dragStart[id] = m_doc->node(id).pos;
  ++m_dragId;
  m_pressScreen = e->screenPos();
  m_dragging = false;
}

void GraphScene::mouseMoveEvent(QGraphicsSceneMouseEvent* e) {
  if (m_pending) {
    NodeItem* from = itemFor(m_dragFrom);
    if (!from) return;
    QPointF a = m_dragFromOutput ? from->outputPos(m_dragPort) : e->scenePos();
    QPointF b = m_dragFromOutput ? e->scenePos() : from->inputPos(m_dragPort);
    m_pending->setPath(wirePath(a, b, m_doc->vertical()));
    return;
  }
  // A hand's jitter during a click is not a drag: nodes move (and snap) only once
  // the pointer has gone the platform's drag distance.
  if ((e->buttons() & Qt::LeftButton) && !m_dragging) {
    if ((e->screenPos() - m_pressScreen).manhattanLength() < QApplication::startDragDistance())
      return;
    m_dragging = true;
  }
  QGraphicsScene::mouseMoveEvent(e);
}

void GraphScene::mouseReleaseEvent(QGraphicsSceneMouseEvent* e) {
  if (m_pending) {
    delete m_pending;
    m_pending = nullptr;
    NodeItem* target = nodeAt(e->scenePos());
    if (!target) {
      if (m_dragFromOutput) emit quickAddRequested(e->scenePos(), m_dragFrom, m_dragPort);
      return;
    }
    auto [output, port] = target->portAt(e->scenePos());
    if (port < 0) {
      // Dropped on a node's body: its first free input (or its first input).
      output = !m_dragFromOutput;
      port = 0;
      if (m_dragFromOutput)
        for (int i = 0; i < m_doc->inputPortCount(target->id()); ++i)
          if (!m_doc->inputConnection(target->id(), i)) {
            port = i;
            break;
          }
    }
    if (output == m_dragFromOutput) {
      emit refused(output ? tr("an output can only feed an input")
                          : tr("an input can only take an output"));
      return;
    }
    QString why;
    bool ok = m_dragFromOutput
                  ? m_doc->connectPorts(m_dragFrom, m_dragPort, target->id(), port, &why)
                  : m_doc->connectPorts(target->id(), port, m_dragFrom, m_dragPort, &why);
    if (!ok) emit refused(why);
    return;
  }
  QGraphicsScene::mouseReleaseEvent(e);
  if (!m_dragging) {  // a click: nothing moved
    m_dragStart.clear();
    return;
  }
  m_dragging = false;
  // A node drag ends: one undoable move for everything that moved.
  std::map<NodeId, QPointF> moved;
  for (const auto& [id, start] : m_dragStart)
    if (NodeItem* it = itemFor(id); it && it->pos() != m_doc->node(id).pos) moved[id] = it->pos();
  m_dragStart.clear();
  if (!moved.empty()) m_doc->moveNodes(moved, m_dragId);
}

}  // namespace netloom::editor
