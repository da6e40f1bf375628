// The netloom main window: the canvas in the middle, the palette on the left, the
// inspector, the runs and the settings on the right, Problems, the summary and the
// training charts below. It builds the docks and the View and Data menus, and wires
// the parts that each own an area: ProjectFiles (the File menu, saving, autosave),
// EditActions (the Edit menu), RunActions and TargetSelector (the Run menu and
// toolbar), DockLayout (the docks' sizes, remembered per screen size).
#pragma once

#include <QMainWindow>
#include <QMessageBox>
#include <functional>
#include <memory>

#include "editor/document.h"

class QDialog;
class QLabel;
class QMenu;
class QTabWidget;

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
class DockLayout;
class EditActions;
class EvaluationWidget;
class FirstRunPage;
class InteropActions;
class ProjectFiles;
class RunActions;
class GeneratePanel;
class ExperimentsView;
class AttentionView;
class SettingsForm;
class RunController;
class TargetSelector;

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
  GeneratePanel* generatePanel() const { return m_generate; }
  ExperimentsView* experiments() const { return m_experiments; }
  AttentionView* attention() const { return m_attention; }
  QTabWidget* evaluationTabs() const { return m_evaluationTabs; }
  QDialog* evaluationWindow() const { return m_evaluationWindow; }
  SettingsForm* trainingSettings() const { return m_trainForm; }
  SettingsForm* dataSettings() const { return m_dataForm; }
  InteropActions* interop() const { return m_interop; }
  ProjectFiles* files() const { return m_files; }
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
  // Those questions, asked through whatever answers them now (the parts ask here).
  QMessageBox::StandardButton ask(const QString& title, const QString& text,
                                  QMessageBox::StandardButtons buttons) const;
  // `null`: no name prompt is set, ask with a dialog of the caller's.
  const NamePrompt& namePrompt() const { return m_namePrompt; }
  const SavePathPrompt& savePathPrompt() const { return m_savePathPrompt; }

  // The project on disk, as files() keeps it (File ▸ Open, Save, …; autosave).
  static QString templatesDir();
  static QString autosavePath(const QString& projectPath);
  bool openFile(const QString& path);
  bool save();
  bool saveAs(const QString& path = {});

  // Data ▸ Choose Dataset…; true when one was chosen. New from Dataset starts a new
  // project with it.
  bool chooseDataset();
  void newFromDataset();
  // Runs the dataset dialog in place of exec() (tests drive it); true: accepted.
  using DatasetHook = std::function<bool(DatasetDialog&)>;
  void setDatasetHook(DatasetHook h) { m_datasetHook = std::move(h); }
  FirstRunPage* firstRunPage() const { return m_firstRun; }
  class ParallelToolbar* parallelToolbar() const {
    return m_parallel;
  }
  QString lastMessage() const { return m_lastMessage; }
  void showMessage(const QString& text, int ms = 6000);
  // Graphs of at least this many nodes are laid out on a worker thread.
  void setBackgroundLayoutFrom(int nodes);
  bool layoutRunning() const;
  // An action of the window's, in `menu`, found by `name`; it calls `fn` while
  // `context` lives (the window when null).
  QAction* makeAction(QMenu* menu, const QString& name, const QString& text, QKeySequence key = {},
                      std::function<void()> fn = {}, QObject* context = nullptr);
  void raiseDockOf(QWidget* w);  // shows and raises the dock `w` is in

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildDocks();
  void buildEvaluationWindow();
  void buildMenus();
  void buildViewMenu();
  void buildFirstRunPage();
  // A project was opened, reverted or started: the view, the runs and the target
  // become its own.
  void afterLoad();

  editor::GraphDocument m_doc;
  RunController* m_runs = nullptr;
  ProjectFiles* m_files = nullptr;
  EditActions* m_edit = nullptr;
  RunActions* m_runActions = nullptr;
  TargetSelector* m_target = nullptr;
  std::unique_ptr<DockLayout> m_docks;
  InteropActions* m_interop = nullptr;
  EvaluationWidget* m_evaluation = nullptr;
  GeneratePanel* m_generate = nullptr;
  ExperimentsView* m_experiments = nullptr;
  AttentionView* m_attention = nullptr;
  QTabWidget* m_evaluationTabs = nullptr;
  QDialog* m_evaluationWindow = nullptr;
  SettingsForm* m_trainForm = nullptr;
  SettingsForm* m_dataForm = nullptr;
  editor::GraphScene* m_scene;
  editor::GraphView* m_view;
  editor::PaletteWidget* m_palette = nullptr;
  editor::InspectorWidget* m_inspector = nullptr;
  editor::ProblemsWidget* m_problems = nullptr;
  editor::SummaryWidget* m_summary = nullptr;
  QLabel* m_problemCount = nullptr;
  Prompt m_prompt;
  NamePrompt m_namePrompt;
  SavePathPrompt m_savePathPrompt;
  DatasetHook m_datasetHook;
  FirstRunPage* m_firstRun = nullptr;
  class ParallelToolbar* m_parallel = nullptr;
  QString m_lastMessage;
};

}  // namespace netloom::gui
