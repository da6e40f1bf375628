// The editor's side panels, all generated from the engine's declarations and kept
// live from the document's signals:
//   InspectorWidget  the selected node's name and attributes, one widget per
//                    attribute type (spin boxes with the op's ranges, combo boxes for
//                    choices, check boxes, shape lists), the doc line under each;
//                    every edit is an undoable command, revalidated as you type.
//   ProblemsWidget   every problem of the live analysis; activating one selects and
//                    frames its node.
//   SummaryWidget    parameters, FLOPs and activation memory per node and in total.
#pragma once

#include <QListWidget>
#include <QTableView>
#include <QWidget>
#include <map>

#include "editor/document.h"

class QFormLayout;
class QLabel;
class QLineEdit;

namespace netloom::editor {

class InspectorWidget : public QWidget {
  Q_OBJECT

 public:
  explicit InspectorWidget(GraphDocument* doc, QWidget* parent = nullptr);
  void showNode(NodeId id);  // -1: nothing selected
  NodeId shownNode() const { return m_id; }
  // The editor widget of attribute `key` (a QSpinBox, QDoubleSpinBox, QCheckBox,
  // QComboBox or QLineEdit), or null.
  QWidget* fieldFor(const std::string& key) const;
  QLineEdit* nameField() const { return m_name; }

 private:
  void rebuild();
  void reload();  // values from the document, without rebuilding
  void edit(const std::string& key, const std::optional<proto::AttrValue>& v);

  GraphDocument* m_doc;
  NodeId m_id = -1;
  QFormLayout* m_form = nullptr;
  QLineEdit* m_name = nullptr;
  QLabel* m_problems = nullptr;
  std::map<std::string, QWidget*> m_fields;
  std::string m_lastKey;
  int m_typingId = 0;
  bool m_loading = false;
};

class ProblemsWidget : public QListWidget {
  Q_OBJECT

 public:
  explicit ProblemsWidget(GraphDocument* doc, QWidget* parent = nullptr);
  // Problems from outside the graph (a run that failed to compile or to train),
  // listed first.
  void setExtra(const QStringList& problems);

 signals:
  void nodeActivated(netloom::editor::NodeId id);
  void countChanged(int problems);

 private:
  void reload();
  void recheckData();  // the data problems, then reload
  QString lossProblem() const;
  GraphDocument* m_doc;
  QStringList m_extra;
  QStringList m_dataProblems;
  QString m_dataDir;  // where the data problems were checked from
};

// The model's cost, node by node in document order, with a last row of totals.
class SummaryWidget : public QTableView {
  Q_OBJECT

 public:
  explicit SummaryWidget(GraphDocument* doc, QWidget* parent = nullptr);
  int64_t totalParams() const;
  QString cellText(int row, int column) const;  // as shown

 private:
  class Model;
  Model* m_model;
};

// "1.2 M", "35.3 k": counts for humans.
QString humanCount(double v);
QString humanBytes(double v);

}  // namespace netloom::editor
