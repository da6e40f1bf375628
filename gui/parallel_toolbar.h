// The Parallel toolbar and menu: how the project spreads over ranks, drawn on the
// canvas as it is chosen (editor/parallel_layout.h). The whole model's strategy (data
// parallel, tensor parallel over a group, a pipeline of stages, ZeRO-1 or ZeRO-2) and
// the ranks; for the selected nodes, Megatron's splits (a Linear by columns or by
// rows, attention by heads) or data parallelism, kept as SBP hints. Every choice is
// one undoable edit of train.distributed, refused with the reason (naming the node)
// where the model cannot be planned so.
#pragma once

#include <QObject>

#include "engine/proto/project.pb.h"

class QComboBox;
class QMenu;
class QSpinBox;

namespace netloom {
namespace editor {
class GraphDocument;
class GraphScene;
}  // namespace editor
namespace gui {
class MainWindow;

class ParallelToolbar : public QObject {
  Q_OBJECT

 public:
  ParallelToolbar(MainWindow* window, editor::GraphDocument* doc, editor::GraphScene* scene);
  void build(QMenu* menu);
  // For the selected nodes: "column", "row", "heads" or "data"; "" clears their hints.
  bool splitSelection(const QString& kind);
  // The selected nodes placed in pipeline stage `stage` (-1: their placement cleared).
  bool placeSelection(int stage);

 private:
  void reload();      // the widgets from the project
  void applyWhole();  // the widgets to the project
  bool commit(const QString& text, const proto::TrainDef& train);

  MainWindow* m_window;
  editor::GraphDocument* m_doc;
  editor::GraphScene* m_scene;
  QSpinBox* m_ranks = nullptr;
  QComboBox* m_strategy = nullptr;
  QSpinBox* m_group = nullptr;
  QSpinBox* m_stage = nullptr;
  bool m_loading = false;
};

}  // namespace gui
}  // namespace netloom
