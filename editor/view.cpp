#include "editor/view.h"

#include <QKeyEvent>
#include <QMimeData>
#include <QScrollBar>
#include <QWheelEvent>
#include <cmath>

#include "editor/palette.h"

namespace netloom::editor {

namespace {
constexpr qreal kMinZoom = 0.02, kMaxZoom = 4.0;
constexpr int kMiniW = 150, kMiniH = 100;  // a corner, not a quarter of the canvas
}  // namespace

// MiniMap ---------------------------------------------------------------------------

MiniMap::MiniMap(GraphScene* scene, QGraphicsView* main)
    : QGraphicsView(scene, main), m_main(main) {
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setInteractive(false);
  setRenderHint(QPainter::Antialiasing, false);
  setOptimizationFlags(QGraphicsView::DontAdjustForAntialiasing);
  setViewportUpdateMode(QGraphicsView::BoundingRectViewportUpdate);
  setFrameStyle(QFrame::Box);
  setFixedSize(kMiniW, kMiniH);
  setCursor(Qt::PointingHandCursor);
  setToolTip(tr("Minimap: click or drag to move the view"));
}

void MiniMap::refit() {
  QRectF r = scene()->itemsBoundingRect();
  if (r.isEmpty()) return;
  fitInView(r.adjusted(-40, -40, 40, 40), Qt::KeepAspectRatio);
}

void MiniMap::drawForeground(QPainter* p, const QRectF&) {
  QRectF seen = m_main->mapToScene(m_main->viewport()->rect()).boundingRect();
  p->setPen(QPen(QColor(0xf0, 0xc0, 0x40), 0));
  p->setBrush(QColor(0xf0, 0xc0, 0x40, 40));
  p->drawRect(seen);
}

void MiniMap::mousePressEvent(QMouseEvent* e) {
  m_main->centerOn(mapToScene(e->position().toPoint()));
}

void MiniMap::mouseMoveEvent(QMouseEvent* e) {
  if (e->buttons() & Qt::LeftButton) m_main->centerOn(mapToScene(e->position().toPoint()));
}

void MiniMap::wheelEvent(QWheelEvent* e) {
  e->ignore();
}

// GraphView -------------------------------------------------------------------------

GraphView::GraphView(GraphScene* scene, QWidget* parent)
    : QGraphicsView(scene, parent), m_scene(scene) {
  setRenderHint(QPainter::Antialiasing);
  setDragMode(QGraphicsView::RubberBandDrag);
  setRubberBandSelectionMode(Qt::IntersectsItemShape);
  setTransformationAnchor(QGraphicsView::NoAnchor);
  setResizeAnchor(QGraphicsView::AnchorViewCenter);
  setViewportUpdateMode(QGraphicsView::MinimalViewportUpdate);
  setAcceptDrops(true);
  setFocusPolicy(Qt::StrongFocus);
  setSceneRect(QRectF(-1e6, -1e6, 2e6, 2e6));  // pan anywhere
  m_minimap = new MiniMap(scene, this);
  m_quick = new QuickAdd(this);
  connect(scene, &QGraphicsScene::changed, m_minimap, [this] {
    m_minimap->setVisible(m_minimapOn && m_scene->document()->nodes().size() >= 12);
    m_minimap->refit();
  });
  connect(scene, &GraphScene::quickAddRequested, this,
          [this](QPointF at, NodeId from, int port) { openQuickAdd(at, from, port); });
  placeMiniMap();
}

void GraphView::zoomAt(qreal factor, QPoint viewPos) {
  qreal z = zoom();
  factor = std::clamp(z * factor, kMinZoom, kMaxZoom) / z;
  QPointF before = mapToScene(viewPos);
  scale(factor, factor);
  QPointF after = mapToScene(viewPos);
  QPointF d = after - before;
  translate(d.x(), d.y());
  m_minimap->viewport()->update();
}

void GraphView::frame(const QRectF& r) {
  if (r.isEmpty()) return;
  QRectF padded = r.adjusted(-60, -60, 60, 60);
  fitInView(padded, Qt::KeepAspectRatio);
  qreal z = zoom();
  if (z > 1.5) {  // a single small node: do not blow it up
    scale(1.5 / z, 1.5 / z);
  }
  centerOn(r.center());
  m_minimap->viewport()->update();
}

void GraphView::frameSelection() {
  std::vector<NodeId> sel = m_scene->selectedNodes();
  frame(m_scene->nodesRect(sel));
}

void GraphView::frameAll() {
  frame(m_scene->nodesRect({}));
}

void GraphView::frameForReading() {
  const QRectF all = m_scene->nodesRect({});
  if (all.isEmpty()) return;
  frame(all);
  if (zoom() >= kReadableZoom) return;
  // Too large to read whole: readable, from where the data comes in.
  scale(kReadableZoom / zoom(), kReadableZoom / zoom());
  const QRectF seen = mapToScene(viewport()->rect()).boundingRect();
  QPointF at(all.left() - 40 + seen.width() / 2, all.top() - 40 + seen.height() / 2);
  if (all.height() + 80 < seen.height()) at.setY(all.center().y());
  if (all.width() + 80 < seen.width()) at.setX(all.center().x());
  centerOn(at);
  m_minimap->viewport()->update();
}

void GraphView::setMiniMapEnabled(bool on) {
  m_minimapOn = on;
  m_minimap->setVisible(on && m_scene->document()->nodes().size() >= 12);
}

void GraphView::openQuickAdd(QPointF scenePos, NodeId from, int fromPort) {
  std::vector<std::string> allowed;
  if (from >= 0) {
    allowed = m_scene->document()->opsAccepting(from, fromPort);
    if (allowed.empty()) {
      emit m_scene->refused(tr("no op can take this output"));
      return;
    }
  }
  m_quick->open(scenePos, allowed, from, fromPort);
}

void GraphView::wheelEvent(QWheelEvent* e) {
  qreal steps = e->angleDelta().y() / 120.0;
  if (steps == 0) return QGraphicsView::wheelEvent(e);
  zoomAt(std::pow(1.15, steps), e->position().toPoint());
  e->accept();
}

void GraphView::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::MiddleButton || (m_space && e->button() == Qt::LeftButton)) {
    m_panning = true;
    m_panFrom = e->position().toPoint();
    viewport()->setCursor(Qt::ClosedHandCursor);
    e->accept();
    return;
  }
  if (m_quick->isVisible()) m_quick->hide();
  QGraphicsView::mousePressEvent(e);
}

void GraphView::mouseMoveEvent(QMouseEvent* e) {
  if (m_panning) {
    QPoint d = e->position().toPoint() - m_panFrom;
    m_panFrom = e->position().toPoint();
    horizontalScrollBar()->setValue(horizontalScrollBar()->value() - d.x());
    verticalScrollBar()->setValue(verticalScrollBar()->value() - d.y());
    e->accept();
    return;
  }
  QGraphicsView::mouseMoveEvent(e);
}

void GraphView::mouseReleaseEvent(QMouseEvent* e) {
  if (m_panning) {
    m_panning = false;
    viewport()->setCursor(Qt::ArrowCursor);
    e->accept();
    return;
  }
  QGraphicsView::mouseReleaseEvent(e);
}

void GraphView::keyPressEvent(QKeyEvent* e) {
  if (e->key() == Qt::Key_Tab && !e->modifiers()) {
    // With one node selected, the new one follows it: wired from its first output and
    // placed after it, so Tab, a name and Enter, again and again, build a chain.
    std::vector<NodeId> sel = m_scene->selectedNodes();
    GraphDocument* doc = m_scene->document();
    if (sel.size() == 1 && doc->outputPortCount(sel[0]) > 0) {
      const QPointF from = doc->node(sel[0]).pos;
      const QPointF step = doc->vertical() ? QPointF(0, 110) : QPointF(260, 0);
      openQuickAdd(from + step, sel[0], 0);
      return;
    }
    QPoint at = viewport()->mapFromGlobal(QCursor::pos());
    if (!viewport()->rect().contains(at)) at = viewport()->rect().center();
    openQuickAdd(mapToScene(at));
    return;
  }
  if (e->key() == Qt::Key_Space && !e->isAutoRepeat()) {
    m_space = true;
    setDragMode(QGraphicsView::NoDrag);
    return;
  }
  QGraphicsView::keyPressEvent(e);
}

void GraphView::keyReleaseEvent(QKeyEvent* e) {
  if (e->key() == Qt::Key_Space && !e->isAutoRepeat()) {
    m_space = false;
    setDragMode(QGraphicsView::RubberBandDrag);
    return;
  }
  QGraphicsView::keyReleaseEvent(e);
}

bool GraphView::focusNextPrevChild(bool) {
  return false;
}

void GraphView::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasFormat(kOpMimeType)) e->acceptProposedAction();
}

void GraphView::dragMoveEvent(QDragMoveEvent* e) {
  if (e->mimeData()->hasFormat(kOpMimeType)) e->acceptProposedAction();
}

void GraphView::dropEvent(QDropEvent* e) {
  if (!e->mimeData()->hasFormat(kOpMimeType)) return;
  std::string op = QString::fromUtf8(e->mimeData()->data(kOpMimeType)).toStdString();
  QPointF at = mapToScene(e->position().toPoint());
  NodeId id = m_scene->addNodeAt(op, at - QPointF(NodeGeometry::kWidth / 2, 12));
  m_scene->selectNodes({id});
  e->acceptProposedAction();
  setFocus();
}

void GraphView::resizeEvent(QResizeEvent* e) {
  QGraphicsView::resizeEvent(e);
  placeMiniMap();
}

void GraphView::scrollContentsBy(int dx, int dy) {
  QGraphicsView::scrollContentsBy(dx, dy);
  m_minimap->viewport()->update();
}

void GraphView::placeMiniMap() {
  m_minimap->move(viewport()->width() - kMiniW - 8, viewport()->height() - kMiniH - 8);
}

}  // namespace netloom::editor
