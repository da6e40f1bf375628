// The netloom main window, editing part: the canvas in the middle, the palette on
// the left, the inspector on the right, Problems and the model summary below; File,
// Edit and View menus with the usual shortcuts; the title shows the file and a
// modified mark; unsaved changes are asked about on close and autosaved to a side
// file every minute, which is offered back after a crash.
#pragma once

#include <QComboBox>
#include <QMainWindow>
#include <QMessageBox>
#include <QTimer>
#include <functional>

#include "editor/document.h"
#include "engine/runtime/devices.h"
#include "remote/remote.pb.h"

class QDialog;
class QLabel;
class QThread;
class QMenu;

namespace netloom::editor {
class GraphScene;
class GraphView;
class PaletteWidget;
class InspectorWidget;
class ProblemsWidget;
class SummaryWidget;
}  // namespace netloom::editor

namespace netloom::gui {

class DatasetDialog;
class EvaluationWidget;
class FirstRunPage;
class InteropActions;
class SettingsForm;
class RunController;
struct RunRecord;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // Answers a question with one of `buttons`; tests replace the dialog.
  using Prompt = std::function<QMessageBox::StandardButton(
      const QString& title, const QString& text, QMessageBox::StandardButtons buttons)>;

  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  editor::GraphDocument* document() { return &m_doc; }
  editor::GraphScene* scene() const { return m_scene; }
  editor::GraphView* view() const { return m_view; }
  editor::PaletteWidget* palette() const { return m_palette; }
  editor::InspectorWidget* inspector() const { return m_inspector; }
  editor::ProblemsWidget* problems() const { return m_problems; }
  editor::SummaryWidget* summary() const { return m_summary; }
  QAction* action(const QString& name) const;  // by object name, e.g. "save", "layout"
  RunController* runs() const { return m_runs; }
  EvaluationWidget* evaluation() const { return m_evaluation; }
  QDialog* evaluationWindow() const { return m_evaluationWindow; }
  SettingsForm* trainingSettings() const { return m_trainForm; }
  SettingsForm* dataSettings() const { return m_dataForm; }
  InteropActions* interop() const { return m_interop; }
  // Shows the evaluation of a run (the checked one, else the current or latest).
  bool evaluateRun();

  void setPrompt(Prompt p) { m_prompt = std::move(p); }
  // Asks for a name (a new block's); empty means cancelled. Tests replace the dialog.
  using NamePrompt = std::function<QString(const QString& title, const QString& suggestion)>;
  void setNamePrompt(NamePrompt p) { m_namePrompt = std::move(p); }
  // Asks where to save a project (Save As), given a suggested path; empty means
  // cancelled. Tests replace the file dialog.
  using SavePathPrompt = std::function<QString(const QString& suggestion)>;
  void setSavePathPrompt(SavePathPrompt p) { m_savePathPrompt = std::move(p); }
  // Where the templates for File > New come from (the projects/ folder).
  static QString templatesDir();
  // The side file autosave writes for a project (or for an untitled one).
  static QString autosavePath(const QString& projectPath);

  bool openFile(const QString& path);  // reports failures in a dialog and the status bar
  // Data ▸ Choose Dataset…; true when one was chosen. New from Dataset starts a new
  // project with it.
  bool chooseDataset();
  void newFromDataset();
  // Runs the dataset dialog in place of exec() (tests drive it); true: accepted.
  using DatasetHook = std::function<bool(DatasetDialog&)>;
  void setDatasetHook(DatasetHook h) { m_datasetHook = std::move(h); }
  FirstRunPage* firstRunPage() const { return m_firstRun; }
  bool newFromTemplate(const QString& path);
  bool save();
  bool saveAs(const QString& path = {});
  void revert();
  void autosaveNow();
  QString lastMessage() const { return m_lastMessage; }
  // Graphs of at least this many nodes are laid out on a worker thread.
  void setBackgroundLayoutFrom(int nodes) { m_backgroundLayoutFrom = nodes; }
  bool layoutRunning() const { return m_layoutThread != nullptr; }

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildActions();
  void buildDocks();
  // The docks as they were first laid out (View ▸ Reset Layout); the window's
  // geometry and docks are saved on close and restored when it opens.
  void resetLayout();
  void saveLayout();
  QRect availableScreen() const;
  QString layoutKey() const;  // settings key prefix for this screen size
  void fitDocks();
  void buildRunActions();
  void buildFirstRunPage();
  void startRun(bool resume);
  void compareRuns(const std::vector<const RunRecord*>& runs);
  void raiseDockOf(QWidget* w);  // shows and raises the dock `w` is in
  void updateTitle();
  void updateRecent(const QString& added = {});
  bool maybeSave();  // false: the user cancelled
  // Before another project replaces this one: stops a local run (asking) and asks to
  // save; false when the user kept the project.
  bool leaveProject();
  // Stops a local run in progress after asking `question` (detaching a remote one);
  // false when the user kept it running.
  bool stopRunToLeave(const QString& question);
  void showMessage(const QString& text, int ms = 6000);
  void copySelection();
  void paste();
  void deleteSelection();
  void layoutGraph();
  // Draws the graph top to bottom (or left to right), laid out again: one undo step.
  void turnGraph(bool vertical);
  void makeBlock();
  void expandOrCollapse(bool expand);
  void afterLoad();
  void reloadHosts();  // the device selector from the hosts file
  // The target the project last ran on (or the host of the remote run it follows).
  void restoreTarget();
  void offerRecovery(const QString& path);

  friend class InteropActions;  // reports through showMessage, asks maybeSave

  editor::GraphDocument m_doc;
  RunController* m_runs = nullptr;
  InteropActions* m_interop = nullptr;
  EvaluationWidget* m_evaluation = nullptr;
  QDialog* m_evaluationWindow = nullptr;
  SettingsForm* m_trainForm = nullptr;
  SettingsForm* m_dataForm = nullptr;
  editor::GraphScene* m_scene;
  editor::GraphView* m_view;
  editor::PaletteWidget* m_palette = nullptr;
  editor::InspectorWidget* m_inspector = nullptr;
  editor::ProblemsWidget* m_problems = nullptr;
  editor::SummaryWidget* m_summary = nullptr;
  QMenu* m_recentMenu = nullptr;
  QComboBox* m_device = nullptr;
  remotepb::HostList m_hosts;
  std::vector<ListedDevice> m_localDevices;  // this computer's GPUs, found at start
  QLabel* m_problemCount = nullptr;
  QTimer m_autosave;
  Prompt m_prompt;
  NamePrompt m_namePrompt;
  SavePathPrompt m_savePathPrompt;
  DatasetHook m_datasetHook;
  FirstRunPage* m_firstRun = nullptr;
  QString m_lastMessage;
  int m_pasteCount = 0;
  int m_revision = 0;  // counts document changes
  int m_backgroundLayoutFrom = 1500;
  QThread* m_layoutThread = nullptr;
  QByteArray m_defaultLayout;
  bool m_restoringTarget = false;
};

}  // namespace netloom::gui
