// The palette and quick-add, both generated from the op registry: every op a user
// may place (not the engine's internal ones), grouped by category, with the op's doc
// line as tooltip. Drag an op from the palette onto the canvas to add it; on the
// canvas, Tab opens quick-add at the cursor: type to filter, Enter to add.
#pragma once

#include <QFrame>
#include <QListWidget>
#include <QTreeWidget>
#include <QWidget>
#include <map>
#include <string>
#include <vector>

#include "editor/document.h"

class QLineEdit;

namespace netloom::editor {

class GraphView;

// The ops a user may place, by category then name.
std::vector<const OpDef*> placeableOps();

// The blocks a user may place: the project's, then the library's it does not hold,
// described as ops (category "Blocks").
std::vector<OpDef> paletteBlocks(const GraphDocument& doc);

// What usually follows a node of op `op`, likeliest first: quick-add from its
// output lists these first (attention after an embedding, a norm after a conv).
const std::vector<std::string>& suggestedAfter(const std::string& op);

// Whether `op` matches the filter text: every word is in its name, category or doc.
bool opMatches(const OpDef& op, const QString& filter);

class OpTree : public QTreeWidget {
 public:
  explicit OpTree(QWidget* parent = nullptr);

 protected:
  QStringList mimeTypes() const override;
  QMimeData* mimeData(const QList<QTreeWidgetItem*>& items) const override;

 public:
  // The MIME data a drag of these items carries (public for tests and callers).
  QMimeData* dragData(const QList<QTreeWidgetItem*>& items) const { return mimeData(items); }
};

class PaletteWidget : public QWidget {
  Q_OBJECT

 public:
  explicit PaletteWidget(QWidget* parent = nullptr);
  QLineEdit* searchField() const { return m_search; }
  OpTree* tree() const { return m_tree; }
  QTreeWidgetItem* itemFor(const QString& op) const;
  void setFilter(const QString& text);
  // Shows these blocks in the "Blocks" group (see paletteBlocks).
  void setBlocks(std::vector<OpDef> blocks);

 signals:
  void opActivated(const QString& op);  // double-clicked: add at the view's centre

 private:
  QTreeWidgetItem* addItem(std::map<std::string, QTreeWidgetItem*>& groups, const OpDef& op);

  QLineEdit* m_search;
  OpTree* m_tree;
  std::vector<OpDef> m_blocks;
};

class QuickAdd : public QFrame {
  Q_OBJECT

 public:
  explicit QuickAdd(GraphView* view);
  // Shows at `scenePos`; `allowed` empty means every placeable op.
  void open(QPointF scenePos, const std::vector<std::string>& allowed, NodeId from = -1,
            int fromPort = 0);
  QLineEdit* field() const { return m_field; }
  QListWidget* list() const { return m_list; }
  void accept();  // adds the current op and closes

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void refilter();

  GraphView* m_view;
  QLineEdit* m_field;
  QListWidget* m_list;
  QPointF m_at;
  std::vector<std::string> m_allowed;
  NodeId m_from = -1;
  int m_fromPort = 0;
};

}  // namespace netloom::editor
