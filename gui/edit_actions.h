// The Edit menu and what it does to the graph: undo and redo, cut, copy, paste,
// duplicate and delete, blocks (make, expand, collapse), and laying the graph out,
// large graphs on a worker thread.
#pragma once

#include <QObject>

class QMenu;
class QThread;

namespace netloom::editor {
class GraphDocument;
class GraphScene;
class GraphView;
}  // namespace netloom::editor

namespace netloom::gui {

class MainWindow;

class EditActions : public QObject {
  Q_OBJECT

 public:
  EditActions(MainWindow* window, editor::GraphDocument* doc, editor::GraphScene* scene,
              editor::GraphView* view);
  // Waits for a layout in progress (it holds only a copy of the graph).
  ~EditActions() override;

  void addActions(QMenu* edit);

  // Draws the graph top to bottom (or left to right), laid out again: one undo step.
  void turnGraph(bool vertical);
  // Another project is open: pasting starts again at the first offset.
  void resetPaste() { m_pasteCount = 0; }
  // Graphs of at least this many nodes are laid out on a worker thread.
  void setBackgroundLayoutFrom(int nodes) { m_backgroundLayoutFrom = nodes; }
  bool layoutRunning() const { return m_layoutThread != nullptr; }

 private:
  void copySelection();
  void paste();
  void deleteSelection();
  void layoutGraph();
  void makeBlock();
  void expandOrCollapse(bool expand);

  MainWindow* m_window;
  editor::GraphDocument* m_doc;
  editor::GraphScene* m_scene;
  editor::GraphView* m_view;
  int m_pasteCount = 0;
  int m_revision = 0;  // counts document changes
  int m_backgroundLayoutFrom = 1500;
  QThread* m_layoutThread = nullptr;
};

}  // namespace netloom::gui
