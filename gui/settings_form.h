// The Training and Data docks: forms generated from the project schema (TrainDef,
// DataDef) by protobuf reflection, one widget per field by its type: spin boxes for
// numbers, check boxes, combo boxes for enums, text for strings and lists, a group
// per nested message. Every edit is an undoable step on the document (a burst of
// typing in one field merges into one) and is saved with the project. The Data dock
// also previews samples with their labels and counts the classes. Above the fields,
// the checks a run makes (checkProject) show the first error, its field drawn red,
// and the warnings, as the user types.
#pragma once

#include <QPointF>
#include <QWidget>
#include <functional>
#include <map>
#include <string>

#include "editor/document.h"

class QComboBox;
class QFormLayout;
class QLabel;
class QListWidget;

namespace google::protobuf {
class Descriptor;
class Message;
}  // namespace google::protobuf

namespace netloom::gui {

struct FieldHint;

// The learning rate over a run as the schedule makes it, epoch by epoch.
class SchedulePlot : public QWidget {
  Q_OBJECT

 public:
  explicit SchedulePlot(QWidget* parent = nullptr);
  void setSchedule(const proto::LrSchedule& s, double lr, int epochs);
  // (epoch, rate) pairs drawn, for tests.
  const std::vector<QPointF>& points() const { return m_points; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  std::vector<QPointF> m_points;
  int m_epochs = 1;
  double m_max = 0;
};

class SettingsForm : public QWidget {
  Q_OBJECT

 public:
  enum class Part { Train, Data };
  SettingsForm(editor::GraphDocument* doc, Part part, QWidget* parent = nullptr);

  // The widget editing a field, by its path in the message ("optimizer.lr").
  QWidget* field(const std::string& path) const;
  // Data only: loads the data set and shows its first samples and class counts.
  Status preview();
  QListWidget* previewSamples() const { return m_samples; }
  // The settings' first error and their warnings, as a run would report them; hidden
  // when there are none.
  QLabel* problems() const { return m_problems; }
  QLabel* classCounts() const { return m_counts; }
  SchedulePlot* schedulePlot() const { return m_schedule; }

 private:
  void build(QFormLayout* form, const google::protobuf::Descriptor* d, const std::string& prefix);
  void reload();
  void showProblems();
  void showRows(const google::protobuf::Message& root);
  // A text field picked among a hint's choices.
  QComboBox* choiceBox(const FieldHint& hint, std::function<void(const std::string&)> set);
  // Applies `set` to a copy of the settings at `path`'s message, as one edit.
  void commit(const std::string& path,
              const std::function<void(google::protobuf::Message&, const std::string&)>& set);

  editor::GraphDocument* m_doc;
  Part m_part;
  std::map<std::string, QWidget*> m_fields;
  std::map<std::string, QFormLayout*> m_forms;  // the form each field's row is in
  std::map<std::string, QWidget*> m_groups;     // a nested message's box, by path
  SchedulePlot* m_schedule = nullptr;
  bool m_loading = false;
  QListWidget* m_samples = nullptr;
  QLabel* m_counts = nullptr;
  QLabel* m_problems = nullptr;
  QWidget* m_flagged = nullptr;  // the field the error names, drawn red
};

}  // namespace netloom::gui
