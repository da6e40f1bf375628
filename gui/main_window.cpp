#include "gui/main_window.h"

#include <QCloseEvent>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QMenuBar>
#include <QProgressBar>
#include <QScrollArea>
#include <QStatusBar>
#include <QTabWidget>
#include <QVBoxLayout>

#include "editor/palette.h"
#include "editor/panels.h"
#include "editor/scene.h"
#include "editor/view.h"
#include "gui/attention_view.h"
#include "gui/charts.h"
#include "gui/dataset_dialog.h"
#include "gui/dock_layout.h"
#include "gui/edit_actions.h"
#include "gui/evaluation.h"
#include "gui/experiments_view.h"
#include "gui/first_run.h"
#include "gui/generate_panel.h"
#include "gui/interop_actions.h"
#include "gui/parallel_toolbar.h"
#include "gui/project_files.h"
#include "gui/run_actions.h"
#include "gui/run_controller.h"
#include "gui/settings_form.h"
#include "gui/target_selector.h"

namespace netloom::gui {

using namespace netloom::editor;

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      m_docks(std::make_unique<DockLayout>(this)),
      m_scene(new GraphScene(&m_doc, this)),
      m_view(new GraphView(m_scene)) {
  m_prompt = [this](const QString& title, const QString& text, QMessageBox::StandardButtons b) {
    return QMessageBox::question(this, title, text, b);
  };
  setCentralWidget(m_view);
  m_doc.setProject(ProjectFiles::emptyProject());
  m_runs = new RunController(&m_doc, this);
  m_files = new ProjectFiles(this, &m_doc, m_runs);
  m_edit = new EditActions(this, &m_doc, m_scene, m_view);
  m_runActions = new RunActions(this, &m_doc, m_runs);
  buildDocks();
  buildMenus();
  m_runActions->build();
  m_parallel = new ParallelToolbar(this, &m_doc, m_scene);
  m_parallel->build(menuBar()->addMenu(tr("&Parallel")));
  m_generate->setSourceProvider([this] { return m_runActions->generateSource(); });
  buildFirstRunPage();
  connect(m_files, &ProjectFiles::loaded, this, &MainWindow::afterLoad);
  connect(m_scene, &GraphScene::refused, this, [this](const QString& why) { showMessage(why); });
  connect(m_scene, &QGraphicsScene::selectionChanged, this, [this] {
    std::vector<NodeId> sel = m_scene->selectedNodes();
    m_inspector->showNode(sel.size() == 1 ? sel[0] : -1);
  });
  m_docks->restore();
}

// The canvas goes first, while the document it draws still exists, and without
// telling the panels about a selection that disappears with it.
MainWindow::~MainWindow() {
  delete m_runs;  // ends a run in progress while the window still stands
  m_runs = nullptr;
  delete m_edit;  // waits for a layout in progress
  m_edit = nullptr;
  m_scene->disconnect(this);
  delete m_view;
  delete m_scene;
}

QString MainWindow::templatesDir() {
  return ProjectFiles::templatesDir();
}

QString MainWindow::autosavePath(const QString& projectPath) {
  return ProjectFiles::autosavePath(projectPath);
}

QAction* MainWindow::action(const QString& name) const {
  return findChild<QAction*>(name);
}

QAction* MainWindow::makeAction(QMenu* menu, const QString& name, const QString& text,
                                QKeySequence key, std::function<void()> fn, QObject* context) {
  auto* a = new QAction(text, this);
  a->setObjectName(name);
  if (!key.isEmpty()) a->setShortcut(key);
  a->setShortcutContext(Qt::WindowShortcut);
  if (fn) connect(a, &QAction::triggered, context ? context : this, std::move(fn));
  menu->addAction(a);
  return a;
}

QMessageBox::StandardButton MainWindow::ask(const QString& title, const QString& text,
                                            QMessageBox::StandardButtons buttons) const {
  return m_prompt ? m_prompt(title, text, buttons) : QMessageBox::NoButton;
}

void MainWindow::showMessage(const QString& text, int ms) {
  m_lastMessage = text;
  statusBar()->showMessage(text, ms);
}

bool MainWindow::openFile(const QString& path) {
  return m_files->openFile(path);
}

bool MainWindow::save() {
  return m_files->save();
}

bool MainWindow::saveAs(const QString& path) {
  return m_files->saveAs(path);
}

bool MainWindow::evaluateRun() {
  return m_runActions->evaluateRun();
}

void MainWindow::setBackgroundLayoutFrom(int nodes) {
  m_edit->setBackgroundLayoutFrom(nodes);
}

bool MainWindow::layoutRunning() const {
  return m_edit->layoutRunning();
}

void MainWindow::raiseDockOf(QWidget* w) {
  m_docks->raiseDockOf(w);
}

void MainWindow::afterLoad() {
  m_view->frameForReading();
  m_edit->resetPaste();
  // The charts, status and run list become the new project's; another project's
  // evaluation is not shown over it.
  m_runs->switchProject();
  m_evaluationWindow->hide();
  m_runs->reattach();
  m_runActions->targets()->restoreTarget();
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (m_files->mayClose()) {
    m_docks->save();
    e->accept();
  } else {
    e->ignore();
  }
}

void MainWindow::buildDocks() {
  // The right column runs the window's full height: the inspector and the settings
  // tabs get the room, the bottom docks sit under the canvas only.
  setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
  m_palette = new PaletteWidget;
  m_inspector = new InspectorWidget(&m_doc);
  m_problems = new ProblemsWidget(&m_doc);
  m_summary = new SummaryWidget(&m_doc);
  m_docks->add("Layers", m_palette, Qt::LeftDockWidgetArea);
  m_docks->add("Inspector", m_inspector, Qt::RightDockWidgetArea);
  QDockWidget* problems = m_docks->add("Problems", m_problems, Qt::BottomDockWidgetArea);
  QDockWidget* summary = m_docks->add("Summary", m_summary, Qt::BottomDockWidgetArea);
  tabifyDockWidget(problems, summary);
  problems->raise();
  auto showBlocks = [this] { m_palette->setBlocks(editor::paletteBlocks(m_doc)); };
  showBlocks();
  connect(&m_doc, &GraphDocument::blocksChanged, this, showBlocks);
  connect(&m_doc, &GraphDocument::reset, this, showBlocks);
  connect(m_palette, &PaletteWidget::opActivated, this, [this](const QString& op) {
    QPointF at = m_view->mapToScene(m_view->viewport()->rect().center());
    m_scene->addNodeAt(op.toStdString(), at);
  });
  connect(m_problems, &ProblemsWidget::nodeActivated, this, [this](NodeId id) {
    m_scene->selectNodes({id});
    m_view->frameSelection();
  });
  QDockWidget* charts = m_docks->add("Training", m_runs->charts(), Qt::BottomDockWidgetArea);
  tabifyDockWidget(summary, charts);
  m_generate = new GeneratePanel;
  QDockWidget* generate = m_docks->add("Generate", m_generate, Qt::BottomDockWidgetArea);
  tabifyDockWidget(charts, generate);
  m_experiments = new ExperimentsView(&m_doc);
  QDockWidget* experiments =
      m_docks->add("Experiments", m_experiments, Qt::BottomDockWidgetArea, true);
  tabifyDockWidget(generate, experiments);
  connect(m_experiments, &ExperimentsView::overlaysChanged, m_runs,
          &RunController::setExtraOverlays);
  QDockWidget* runs = m_docks->add("Runs", m_runs->history(), Qt::RightDockWidgetArea);
  m_trainForm = new SettingsForm(&m_doc, SettingsForm::Part::Train);
  m_dataForm = new SettingsForm(&m_doc, SettingsForm::Part::Data);
  QDockWidget* training =
      m_docks->add("Training Setup", m_trainForm, Qt::RightDockWidgetArea, true);
  QDockWidget* data = m_docks->add("Data", m_dataForm, Qt::RightDockWidgetArea, true);
  tabifyDockWidget(runs, training);
  tabifyDockWidget(training, data);
  runs->raise();
  charts->raise();  // the training charts in front
  buildEvaluationWindow();
  statusBar()->addPermanentWidget(m_runs->status());
  statusBar()->addPermanentWidget(m_runs->progress());
  connect(m_runs, &RunController::message, this, [this](const QString& t) { showMessage(t); });
  connect(m_runs, &RunController::problemsChanged, m_problems, &ProblemsWidget::setExtra);
  m_problemCount = new QLabel;
  statusBar()->addPermanentWidget(m_problemCount);
  connect(m_problems, &ProblemsWidget::countChanged, this, [this](int n) {
    m_problemCount->setText(n == 0 ? tr("No problems") : tr("%n problem(s)", "", n));
  });
  m_problemCount->setText(m_doc.analysis().ok() ? tr("No problems") : QString());
}

// Evaluation is a window of its own: a confusion matrix and a grid of samples need
// more room than a dock beside the canvas has on a laptop's screen.
void MainWindow::buildEvaluationWindow() {
  m_evaluation = new EvaluationWidget;
  m_evaluationWindow = new QDialog(this, Qt::Window);
  m_evaluationWindow->setObjectName("evaluationWindow");
  m_evaluationWindow->setWindowTitle(tr("Evaluation"));
  auto* scroll = new QScrollArea;
  scroll->setWidget(m_evaluation);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  m_attention = new AttentionView;
  m_evaluationTabs = new QTabWidget;
  m_evaluationTabs->addTab(scroll, tr("Classes"));
  m_evaluationTabs->addTab(m_attention, tr("Attention"));
  auto* box = new QVBoxLayout(m_evaluationWindow);
  box->setContentsMargins(0, 0, 0, 0);
  box->addWidget(m_evaluationTabs);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  m_files->addActions(file);
  makeAction(file, "newFromDataset", tr("New from &Dataset…"), {}, [this] { newFromDataset(); });
  file->addSeparator();
  QMenu* data = new QMenu(tr("&Data"), this);
  makeAction(data, "chooseDataset", tr("Choose &Dataset…"),
             QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D), [this] { chooseDataset(); });
  data->addSeparator();
  m_interop = new InteropActions(this, file, data);
  file->addSeparator();
  makeAction(file, "quit", tr("&Quit"), QKeySequence::Quit, [this] { close(); });
  m_edit->addActions(menuBar()->addMenu(tr("&Edit")));
  buildViewMenu();
  menuBar()->addMenu(data);
}

void MainWindow::buildViewMenu() {
  auto make = [this](QMenu* menu, const QString& name, const QString& text, QKeySequence key = {},
                     std::function<void()> fn = {}) {
    return makeAction(menu, name, text, key, std::move(fn));
  };
  QMenu* view = menuBar()->addMenu(tr("&View"));
  make(view, "frame", tr("&Frame Selection"), QKeySequence(Qt::Key_F),
       [this] { m_view->frameSelection(); });
  make(view, "frameAll", tr("Frame &All"), QKeySequence(Qt::Key_Home),
       [this] { m_view->frameAll(); });
  make(view, "zoomIn", tr("Zoom &In"), QKeySequence::ZoomIn,
       [this] { m_view->zoomAt(1.25, m_view->viewport()->rect().center()); });
  make(view, "zoomOut", tr("Zoom &Out"), QKeySequence::ZoomOut,
       [this] { m_view->zoomAt(0.8, m_view->viewport()->rect().center()); });
  QAction* minimap = make(view, "minimap", tr("&Minimap"));
  minimap->setCheckable(true);
  minimap->setChecked(true);
  connect(minimap, &QAction::toggled, this, [this](bool on) { m_view->setMiniMapEnabled(on); });
  // Which way the graph is drawn; turning it lays the graph out again, one undo step.
  QAction* vertical = make(view, "topToBottom", tr("Draw &Top to Bottom"));
  vertical->setCheckable(true);
  connect(vertical, &QAction::triggered, this, [this](bool on) { m_edit->turnGraph(on); });
  auto follow = [this, vertical] { vertical->setChecked(m_doc.vertical()); };
  connect(&m_doc, &GraphDocument::directionChanged, this, follow);
  connect(&m_doc, &GraphDocument::reset, this, follow);
  QAction* snap = make(view, "snap", tr("&Snap to Grid"));
  snap->setCheckable(true);
  snap->setChecked(true);
  connect(snap, &QAction::toggled, this, [this](bool on) { m_scene->setSnapToGrid(on); });
  view->addSeparator();
  for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
  view->addSeparator();
  make(view, "resetLayout", tr("&Reset Layout"), {}, [this] { m_docks->reset(); });
}

bool MainWindow::chooseDataset() {
  DatasetDialog dialog(&m_doc, this);
  const bool chosen = m_datasetHook ? m_datasetHook(dialog) : dialog.exec() == QDialog::Accepted;
  if (chosen) {
    m_view->frameForReading();
    showMessage(tr("Dataset set: add layers below the Input (Tab), end in a loss, and press F5"));
  }
  return chosen;
}

void MainWindow::newFromDataset() {
  if (m_files->newProject()) chooseDataset();
}

// Over the canvas while the graph is empty: where to start, and the keys that matter.
void MainWindow::buildFirstRunPage() {
  QStringList examples;
  QDir dir(templatesDir());
  for (const QString& f : dir.entryList({"*.nlproj"}, QDir::Files, QDir::Name))
    examples << dir.filePath(f);
  m_firstRun = new FirstRunPage(examples, m_view);
  connect(m_firstRun, &FirstRunPage::newFromDataset, this, [this] { chooseDataset(); });
  connect(m_firstRun, &FirstRunPage::openExample, this,
          [this](const QString& path) { m_files->newFromTemplate(path); });
  auto follow = [this] { m_firstRun->setVisible(m_doc.nodes().empty()); };
  connect(&m_doc, &GraphDocument::changed, this, follow);
  connect(&m_doc, &GraphDocument::reset, this, follow);
  follow();
}

}  // namespace netloom::gui
