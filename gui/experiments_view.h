// The Experiments dock: the open project's sweep (its `sweep` section) run by
// `netloom-train --sweep` as a child process, into runs/sweep-<project>/ beside the
// project, and watched there through sweep.json:
// - a table of the trials (status, objective, epochs, rung, time, parameters),
//   sortable and filtered by text and by the brushes of
// - a parallel-coordinates plot, an axis per parameter and one for the objective;
//   dragging along an axis brushes a range of it, a click clears it;
// - the best objective so far, trial after trial;
// - each parameter's importance, as a random forest fitted to the trials sees it.
// Promote copies a trial's parameters into the project as one undoable edit. A sweep
// outlives the IDE: its state is on disk, shown again when the project opens, and
// Run Sweep goes on from it.
#pragma once

#include <QMap>
#include <QPair>
#include <QWidget>
#include <vector>

#include "engine/sweep/runner.h"
#include "gui/charts.h"

class QCustomPlot;
class QFileSystemWatcher;
class QLabel;
class QComboBox;
class QLineEdit;
class QPlainTextEdit;
class QSpinBox;
class QProcess;
class QPushButton;
class QTableWidget;
class QTimer;

namespace netloom::editor {
class GraphDocument;
}

namespace netloom::gui {

class TrialCurves;

class ExperimentsView : public QWidget {
  Q_OBJECT

 public:
  explicit ExperimentsView(editor::GraphDocument* doc, QWidget* parent = nullptr);
  ~ExperimentsView() override;

  QTableWidget* table() const { return m_table; }
  QCustomPlot* coordinates() const { return m_coordinates; }
  QCustomPlot* bestSoFar() const { return m_best; }
  QLabel* importance() const { return m_importance; }
  // The selected trials' loss as they train (the running ones while none is selected).
  TrialCurves* curves() const { return m_curves; }
  QLineEdit* filter() const { return m_filter; }
  // Where the trials run: "This computer", a saved host, or every saved host.
  QComboBox* where() const { return m_where; }
  void reloadHosts();  // the saved hosts offered
  bool running() const { return m_process != nullptr; }
  // runs/sweep-<project>/ beside the saved project; empty for an unsaved one.
  QString folder() const;
  // The trials as sweep.json last said.
  const std::vector<sweep::TrialRecord>& trials() const { return m_trials; }

  // Keeps the table's rows whose value on `axis` (a parameter's index, or the
  // parameters' count for the objective) lies in [lo, hi], in the axis's own units.
  void brush(int axis, double lo, double hi);
  void clearBrushes();

 public slots:
  void runSweep();  // starts, or goes on with, the sweep
  void stopSweep();
  bool promote(int trial);    // the trial's parameters into the project, one undo step
  bool stopTrial(int trial);  // after its step; the others go on
  // More trials for the sweep (an undoable edit of sweep.trials), then Run Sweep.
  void extend(int more);
  // The sweep section from protobuf text (the dock's editor), one undoable edit;
  // refused, saying why and naming the field, where the sweep could not run.
  bool applySweepText(const QString& text);
  void reload();  // sweep.json read again

 signals:
  void sweepEnded(bool ok, const QString& why);
  void trialsChanged();
  // The selected trials that ended, to draw over the Training charts.
  void overlaysChanged(const std::vector<netloom::gui::TrainingCharts::Overlay>& trials);

 private:
  void onProjectChanged();
  void fillTable();
  void drawCoordinates();
  void drawBest();
  void showImportance();
  void applyFilters();
  void say(const QString& text);
  std::vector<int> selectedTrials() const;  // the table's selected rows' trials
  int selectedTrial() const;                // the first of them; -1: none
  // Where trial `t` lies on `axis`, 0 … 1 (a log range by its logarithm).
  double onAxis(const sweep::TrialRecord& t, int axis) const;
  void followCurves();
  void overlaySelected(std::vector<int> selected);

  editor::GraphDocument* m_doc;
  QLabel* m_summary;
  QPushButton *m_run, *m_stop, *m_promote, *m_stopTrial, *m_extend, *m_apply;
  QSpinBox* m_more;
  QComboBox* m_where;
  QPlainTextEdit* m_text;
  QLineEdit* m_filter;
  QTableWidget* m_table;
  QCustomPlot *m_coordinates, *m_best;
  QLabel* m_importance;
  TrialCurves* m_curves;
  std::vector<int> m_followed;
  std::vector<std::pair<int, std::string>> m_overlaid;  // trial, status
  QProcess* m_process = nullptr;
  QFileSystemWatcher* m_watcher;
  QTimer* m_poll;
  std::optional<sweep::SweepPlan> m_plan;
  std::vector<sweep::TrialRecord> m_trials;
  QMap<int, QPair<double, double>> m_brushes;  // axis -> range, in the axis's units
  double m_pressY = 0;
  int m_pressAxis = -1;
};

}  // namespace netloom::gui
