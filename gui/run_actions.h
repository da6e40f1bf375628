// The Run menu, the Run toolbar and the Runs list's own actions: run, pause, stop,
// cancel, resume from a checkpoint, reattach to a remote run, delete its job folder,
// evaluate, compare checked runs; rename, tag, note and delete a run. The controller
// does the running; this asks, reports and brings the right dock to the front.
#pragma once

#include <QObject>
#include <functional>
#include <vector>

#include "gui/generate_panel.h"

class QMenu;

namespace netloom::editor {
class GraphDocument;
}

namespace netloom::gui {

class MainWindow;
class RunController;
class TargetSelector;
struct RunRecord;

class RunActions : public QObject {
  Q_OBJECT

 public:
  RunActions(MainWindow* window, editor::GraphDocument* doc, RunController* runs);

  // Adds the Run menu to the menu bar, the Run toolbar (with the target selector) and
  // the Runs list's context menu.
  void build();
  TargetSelector* targets() const { return m_targets; }

  void startRun(bool resume);
  // Shows the evaluation of a run (the checked one, else the current or latest).
  bool evaluateRun();
  // What the Generate panel samples from: that run and its weights.
  Result<GenerateSource> generateSource();

 private:
  void addRunMenu(QMenu* run);
  void addRemoteActions(QMenu* run);
  void addRunListActions();
  void addToolBar();
  void setHostPrompts();  // the questions a session with a host asks
  void changeRun(const char* name, const QString& text, std::function<void(RunRecord&)> change);
  QString askText(const QString& title, const QString& now) const;
  void deleteRun();
  // The checked run, else the current one, else the latest; null when none.
  const RunRecord* runToUse() const;
  // Its final weights, else its latest checkpoint (fetched first from a remote run in
  // progress); empty when it has neither.
  QString weightsOf(const RunRecord* run);
  // A table in the spirit of TensorBoard's HParams, beside the charts.
  void compareRuns(const std::vector<const RunRecord*>& runs);

  MainWindow* m_window;
  editor::GraphDocument* m_doc;
  RunController* m_runs;
  TargetSelector* m_targets = nullptr;
  QMenu* m_menu = nullptr;
};

}  // namespace netloom::gui
