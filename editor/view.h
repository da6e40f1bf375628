// The canvas view: zoom to the cursor with the wheel, pan with the middle button (or
// Space + drag), rubber-band selection, frame selection / frame all, drops from the
// palette, Tab for quick-add at the cursor, and a minimap in the corner for large
// graphs (click or drag on it to move the view).
#pragma once

#include <QGraphicsView>

#include "editor/scene.h"

namespace netloom::editor {

class QuickAdd;

// The MIME type a palette drag carries: the op's name as UTF-8.
inline constexpr const char* kOpMimeType = "application/x-netloom-op";

class MiniMap : public QGraphicsView {
  Q_OBJECT

 public:
  MiniMap(GraphScene* scene, QGraphicsView* main);
  void refit();

 protected:
  void drawForeground(QPainter* p, const QRectF& rect) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;

 private:
  QGraphicsView* m_main;
};

class GraphView : public QGraphicsView {
  Q_OBJECT

 public:
  explicit GraphView(GraphScene* scene, QWidget* parent = nullptr);
  GraphScene* graphScene() const { return m_scene; }
  MiniMap* miniMap() const { return m_minimap; }
  QuickAdd* quickAdd() const { return m_quick; }

  qreal zoom() const { return transform().m11(); }
  // Scales by `factor` keeping the scene point under `viewPos` where it is.
  void zoomAt(qreal factor, QPoint viewPos);
  void frameSelection();  // the selected nodes, or everything when none is
  void frameAll();
  // What opening a project shows: the whole graph when it fits at a zoom where names
  // and shapes can be read, else its beginning (the inputs) at that zoom.
  void frameForReading();
  static constexpr qreal kReadableZoom = 0.75;
  // The minimap in the canvas's corner (View > Minimap); shown only for larger graphs.
  void setMiniMapEnabled(bool on);
  bool miniMapEnabled() const { return m_minimapOn; }
  // Opens quick-add at `scenePos`; with `from` set, offers only ops that can take
  // that output and wires the new node to it.
  void openQuickAdd(QPointF scenePos, NodeId from = -1, int fromPort = 0);

 protected:
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  void keyReleaseEvent(QKeyEvent* e) override;
  bool focusNextPrevChild(bool next) override;  // Tab belongs to quick-add
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dragMoveEvent(QDragMoveEvent* e) override;
  void dropEvent(QDropEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  void scrollContentsBy(int dx, int dy) override;

 private:
  void frame(const QRectF& r);
  void placeMiniMap();

  GraphScene* m_scene;
  MiniMap* m_minimap;
  bool m_minimapOn = true;
  QuickAdd* m_quick;
  bool m_panning = false, m_space = false;
  QPoint m_panFrom;
};

}  // namespace netloom::editor
