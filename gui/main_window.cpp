#include "gui/main_window.h"

#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QCoreApplication>
#include <QDateTime>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QProgressBar>
#include <QRegularExpression>
#include <QSaveFile>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QThread>
#include <QToolBar>
#include <QVBoxLayout>

#include "editor/autolayout.h"
#include "editor/palette.h"
#include "editor/panels.h"
#include "editor/scene.h"
#include "editor/view.h"
#include "engine/io/project_file.h"
#include "gui/charts.h"
#include "gui/dataset_dialog.h"
#include "gui/evaluation.h"
#include "gui/first_run.h"
#include "gui/interop_actions.h"
#include "gui/run_controller.h"
#include "gui/settings_form.h"

namespace netloom::gui {

using namespace netloom::editor;

namespace {
constexpr int kAutosaveMs = 60 * 1000;

// An empty project, drawn top to bottom as projects opened without positions are.
proto::Project newProject() {
  proto::Project p;
  p.mutable_layout()->set_direction(proto::Layout::TOP_TO_BOTTOM);
  return p;
}
}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), m_scene(new GraphScene(&m_doc, this)), m_view(new GraphView(m_scene)) {
  m_prompt = [this](const QString& title, const QString& text, QMessageBox::StandardButtons b) {
    return QMessageBox::question(this, title, text, b);
  };
  setCentralWidget(m_view);
  m_doc.setProject(newProject());
  m_runs = new RunController(&m_doc, this);
  buildDocks();
  buildActions();
  buildRunActions();
  buildFirstRunPage();
  connect(m_doc.undoStack(), &QUndoStack::cleanChanged, this, &MainWindow::updateTitle);
  connect(&m_doc, &GraphDocument::changed, this, [this] { ++m_revision; });
  connect(&m_doc, &GraphDocument::reset, this, [this] { ++m_revision; });
  connect(m_scene, &GraphScene::refused, this, [this](const QString& why) { showMessage(why); });
  connect(m_scene, &QGraphicsScene::selectionChanged, this, [this] {
    std::vector<NodeId> sel = m_scene->selectedNodes();
    m_inspector->showNode(sel.size() == 1 ? sel[0] : -1);
  });
  m_autosave.setInterval(kAutosaveMs);
  connect(&m_autosave, &QTimer::timeout, this, &MainWindow::autosaveNow);
  m_autosave.start();
  // Never larger than the screen it opens on; its size and docks are remembered for
  // each screen size, so a laptop and a desktop monitor each keep their own.
  const QRect avail = availableScreen();
  resize(std::min(1400, avail.width()), std::min(900, avail.height()));
  fitDocks();
  m_defaultLayout = saveState();
  QSettings settings;
  restoreGeometry(settings.value(layoutKey() + "geometry").toByteArray());
  restoreState(settings.value(layoutKey() + "docks").toByteArray());
  if (width() > avail.width() || height() > avail.height()) {
    resize(std::min(width(), avail.width()), std::min(height(), avail.height()));
    move(avail.topLeft());
  }
  updateTitle();
}

QRect MainWindow::availableScreen() const {
  QScreen* s = screen() ? screen() : QGuiApplication::primaryScreen();
  return s ? s->availableGeometry() : QRect(0, 0, 1366, 768);
}

QString MainWindow::layoutKey() const {
  const QRect avail = availableScreen();
  return QString("layout/%1x%2/").arg(avail.width()).arg(avail.height());
}

// The canvas gets most of the window; the docks share the rest in proportion to the
// window, so a 768-pixel screen still shows a chart, the inspector and a settings tab
// at a usable size.
void MainWindow::fitDocks() {
  auto find = [this](const char* title) { return findChild<QDockWidget*>(tr(title)); };
  const int w = width(), h = height();
  resizeDocks(
      {find("Layers"), find("Inspector"), find("Runs")},
      {std::clamp(w / 7, 150, 200), std::clamp(w / 4, 260, 340), std::clamp(w / 4, 260, 340)},
      Qt::Horizontal);
  resizeDocks({find("Inspector"), find("Runs"), find("Problems")},
              {h * 2 / 5, h * 3 / 5, std::clamp(h * 2 / 5, 200, 330)}, Qt::Vertical);
}

void MainWindow::resetLayout() {
  restoreState(m_defaultLayout);
  for (QDockWidget* d : findChildren<QDockWidget*>()) d->show();
  findChild<QDockWidget*>(tr("Training"))->raise();
  findChild<QDockWidget*>(tr("Runs"))->raise();
}

void MainWindow::saveLayout() {
  QSettings settings;
  settings.setValue(layoutKey() + "geometry", saveGeometry());
  settings.setValue(layoutKey() + "docks", saveState());
}

// The canvas goes first, while the document it draws still exists, and without
// telling the panels about a selection that disappears with it.
MainWindow::~MainWindow() {
  delete m_runs;  // ends a run in progress while the window still stands
  m_runs = nullptr;
  if (m_layoutThread) {  // it holds only a copy of the graph; let it end
    m_layoutThread->disconnect(this);
    m_layoutThread->wait();
    delete m_layoutThread;
  }
  m_scene->disconnect(this);
  delete m_view;
  delete m_scene;
}

QString MainWindow::templatesDir() {
  QByteArray env = qgetenv("NETLOOM_PROJECTS");
  if (!env.isEmpty()) return QString::fromLocal8Bit(env);
  QDir exe(QCoreApplication::applicationDirPath());
  for (const char* rel : {"../projects", "../../projects", "../share/netloom/projects"})
    if (QFileInfo(exe.filePath(rel)).isDir()) return QDir::cleanPath(exe.filePath(rel));
#ifdef NETLOOM_PROJECTS_DIR
  return NETLOOM_PROJECTS_DIR;
#else
  return exe.filePath("projects");
#endif
}

QAction* MainWindow::action(const QString& name) const {
  return findChild<QAction*>(name);
}

void MainWindow::buildDocks() {
  // Every dock scrolls what does not fit rather than growing the window: the
  // window fits a laptop's screen whatever is open or selected.
  auto dock = [&](const QString& title, QWidget* w, Qt::DockWidgetArea area,
                  bool scrollsItself = false) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(title);
    if (scrollsItself) {
      w->setMinimumSize(80, 60);
      d->setWidget(w);
      addDockWidget(area, d);
      return d;
    }
    auto* scroll = new QScrollArea;
    scroll->setWidget(w);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setMinimumSize(80, 60);
    d->setWidget(scroll);
    addDockWidget(area, d);
    return d;
  };
  // The right column runs the window's full height: the inspector and the settings
  // tabs get the room, the bottom docks sit under the canvas only.
  setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
  m_palette = new PaletteWidget;
  m_inspector = new InspectorWidget(&m_doc);
  m_problems = new ProblemsWidget(&m_doc);
  m_summary = new SummaryWidget(&m_doc);
  dock(tr("Layers"), m_palette, Qt::LeftDockWidgetArea);
  dock(tr("Inspector"), m_inspector, Qt::RightDockWidgetArea);
  QDockWidget* problems = dock(tr("Problems"), m_problems, Qt::BottomDockWidgetArea);
  QDockWidget* summary = dock(tr("Summary"), m_summary, Qt::BottomDockWidgetArea);
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
  QDockWidget* charts = dock(tr("Training"), m_runs->charts(), Qt::BottomDockWidgetArea);
  tabifyDockWidget(summary, charts);
  QDockWidget* runs = dock(tr("Runs"), m_runs->history(), Qt::RightDockWidgetArea);
  m_trainForm = new SettingsForm(&m_doc, SettingsForm::Part::Train);
  m_dataForm = new SettingsForm(&m_doc, SettingsForm::Part::Data);
  QDockWidget* training = dock(tr("Training Setup"), m_trainForm, Qt::RightDockWidgetArea, true);
  QDockWidget* data = dock(tr("Data"), m_dataForm, Qt::RightDockWidgetArea, true);
  tabifyDockWidget(runs, training);
  tabifyDockWidget(training, data);
  runs->raise();
  charts->raise();  // the training charts in front
  // Evaluation is a window of its own: a confusion matrix and a grid of samples need
  // more room than a dock beside the canvas has on a laptop's screen.
  m_evaluation = new EvaluationWidget;
  m_evaluationWindow = new QDialog(this, Qt::Window);
  m_evaluationWindow->setObjectName("evaluationWindow");
  m_evaluationWindow->setWindowTitle(tr("Evaluation"));
  auto* scroll = new QScrollArea;
  scroll->setWidget(m_evaluation);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* box = new QVBoxLayout(m_evaluationWindow);
  box->setContentsMargins(0, 0, 0, 0);
  box->addWidget(scroll);
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

void MainWindow::buildActions() {
  auto make = [this](QMenu* menu, const QString& name, const QString& text, QKeySequence key = {},
                     std::function<void()> fn = {}) {
    auto* a = new QAction(text, this);
    a->setObjectName(name);
    if (!key.isEmpty()) a->setShortcut(key);
    a->setShortcutContext(Qt::WindowShortcut);
    if (fn) connect(a, &QAction::triggered, this, fn);
    menu->addAction(a);
    return a;
  };

  QMenu* file = menuBar()->addMenu(tr("&File"));
  QMenu* templates = file->addMenu(tr("&New from Template"));
  QDir dir(templatesDir());
  for (const QString& f : dir.entryList({"*.nlproj"}, QDir::Files, QDir::Name)) {
    QString path = dir.filePath(f);
    auto* a = templates->addAction(QFileInfo(f).completeBaseName());
    connect(a, &QAction::triggered, this, [this, path] { newFromTemplate(path); });
  }
  make(file, "new", tr("&New"), QKeySequence::New, [this] {
    if (!leaveProject()) return;
    m_doc.setProject(newProject());
    m_doc.setFilePath({});
    afterLoad();
  });
  make(file, "open", tr("&Open…"), QKeySequence::Open, [this] {
    // From the open project's folder; the examples when there is none. The project
    // is left only once another is chosen.
    const QString from =
        m_doc.filePath().isEmpty() ? templatesDir() : QFileInfo(m_doc.filePath()).absolutePath();
    QString path = QFileDialog::getOpenFileName(this, tr("Open project"), from,
                                                tr("NetLoom projects (*.nlproj)"));
    if (!path.isEmpty() && leaveProject()) openFile(path);
  });
  m_recentMenu = file->addMenu(tr("Open &Recent"));
  file->addSeparator();
  make(file, "save", tr("&Save"), QKeySequence::Save, [this] { save(); });
  make(file, "saveAs", tr("Save &As…"), QKeySequence::SaveAs, [this] { saveAs(); });
  make(file, "revert", tr("Re&vert"), {}, [this] { revert(); });
  make(file, "newFromDataset", tr("New from &Dataset…"), {}, [this] { newFromDataset(); });
  file->addSeparator();
  QMenu* data = new QMenu(tr("&Data"), this);
  make(data, "chooseDataset", tr("Choose &Dataset…"),
       QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D), [this] { chooseDataset(); });
  data->addSeparator();
  m_interop = new InteropActions(this, file, data);
  file->addSeparator();
  make(file, "quit", tr("&Quit"), QKeySequence::Quit, [this] { close(); });
  updateRecent();

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* undo = m_doc.undoStack()->createUndoAction(this, tr("&Undo"));
  undo->setObjectName("undo");
  undo->setShortcut(QKeySequence::Undo);
  QAction* redo = m_doc.undoStack()->createRedoAction(this, tr("&Redo"));
  redo->setObjectName("redo");
  redo->setShortcut(QKeySequence::Redo);
  edit->addAction(undo);
  edit->addAction(redo);
  edit->addSeparator();
  make(edit, "cut", tr("Cu&t"), QKeySequence::Cut, [this] {
    copySelection();
    deleteSelection();
  });
  make(edit, "copy", tr("&Copy"), QKeySequence::Copy, [this] { copySelection(); });
  make(edit, "paste", tr("&Paste"), QKeySequence::Paste, [this] { paste(); });
  make(edit, "duplicate", tr("&Duplicate"), QKeySequence(Qt::CTRL | Qt::Key_D), [this] {
    std::vector<NodeId> ids = m_doc.duplicate(m_scene->selectedNodes(), QPointF(32, 32));
    m_scene->selectNodes(ids);
  });
  QAction* del =
      make(edit, "delete", tr("De&lete"), QKeySequence::Delete, [this] { deleteSelection(); });
  del->setShortcuts({QKeySequence::Delete, QKeySequence(Qt::Key_Backspace)});
  make(edit, "selectAll", tr("Select &All"), QKeySequence::SelectAll, [this] {
    for (QGraphicsItem* it : m_scene->items())
      if (it->flags() & QGraphicsItem::ItemIsSelectable) it->setSelected(true);
  });
  edit->addSeparator();
  make(edit, "makeBlock", tr("Make &Block…"), QKeySequence(Qt::CTRL | Qt::Key_G),
       [this] { makeBlock(); });
  make(edit, "expandBlock", tr("&Expand Block"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_G),
       [this] { expandOrCollapse(true); });
  make(edit, "collapseBlock", tr("C&ollapse Block"), QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_G),
       [this] { expandOrCollapse(false); });
  edit->addSeparator();
  make(edit, "layout", tr("Auto-&layout"), QKeySequence(Qt::CTRL | Qt::Key_L),
       [this] { layoutGraph(); });

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
  connect(vertical, &QAction::triggered, this, [this](bool on) { turnGraph(on); });
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
  make(view, "resetLayout", tr("&Reset Layout"), {}, [this] { resetLayout(); });
  menuBar()->addMenu(data);
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
  if (!leaveProject()) return;
  m_doc.setProject(newProject());
  m_doc.setFilePath({});
  afterLoad();
  chooseDataset();
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
          [this](const QString& path) { newFromTemplate(path); });
  auto follow = [this] { m_firstRun->setVisible(m_doc.nodes().empty()); };
  connect(&m_doc, &GraphDocument::changed, this, follow);
  connect(&m_doc, &GraphDocument::reset, this, follow);
  follow();
}

void MainWindow::makeBlock() {
  std::vector<NodeId> ids = m_scene->selectedNodes();
  if (ids.empty()) return showMessage(tr("Select the nodes to make a block of"));
  QString suggestion = "Block";
  for (int i = 2; m_doc.block(suggestion.toStdString()); ++i)
    suggestion = QString("Block%1").arg(i);
  QString name = m_namePrompt ? m_namePrompt(tr("Make block"), suggestion)
                              : QInputDialog::getText(this, tr("Make block"), tr("Block name:"),
                                                      QLineEdit::Normal, suggestion);
  if (name.isEmpty()) return;
  auto made = m_doc.makeBlock(ids, name.trimmed().toStdString());
  if (!made) return showMessage(QString::fromStdString(made.error().message));
  m_scene->selectNodes({*made});
}

void MainWindow::expandOrCollapse(bool expand) {
  std::vector<NodeId> ids = m_scene->selectedNodes();
  if (expand) {
    if (ids.size() != 1 || !m_doc.isInstance(ids[0]))
      return showMessage(tr("Select one block instance to expand"));
    auto nodes = m_doc.expandInstance(ids[0]);
    if (!nodes) return showMessage(QString::fromStdString(nodes.error().message));
    m_scene->selectNodes(*nodes);
    return;
  }
  auto inst = m_doc.collapse(ids);
  if (!inst) return showMessage(QString::fromStdString(inst.error().message));
  m_scene->selectNodes({*inst});
}

void MainWindow::copySelection() {
  std::vector<NodeId> sel = m_scene->selectedNodes();
  if (sel.empty()) return;
  QGuiApplication::clipboard()->setText(QString::fromStdString(m_doc.copyText(sel)));
  m_pasteCount = 0;
  showMessage(tr("Copied %n node(s)", "", int(sel.size())));
}

void MainWindow::paste() {
  QString text = QGuiApplication::clipboard()->text();
  auto ids = m_doc.pasteText(text.toStdString(), QPointF(32, 32) * (++m_pasteCount));
  if (!ids) {
    showMessage(QString::fromStdString(ids.error().message));
    return;
  }
  m_scene->selectNodes(*ids);
}

void MainWindow::deleteSelection() {
  std::vector<NodeId> sel = m_scene->selectedNodes();
  if (!sel.empty()) m_doc.removeNodes(sel);
}

void MainWindow::turnGraph(bool vertical) {
  if (vertical == m_doc.vertical()) return;
  QString why;
  auto positions = runLayout(layoutInput(m_doc, {}, vertical), &why);
  if (positions.empty() && !m_doc.nodes().empty()) {
    action("topToBottom")->setChecked(m_doc.vertical());
    return showMessage(why);
  }
  m_doc.setDirection(vertical ? proto::Layout::TOP_TO_BOTTOM : proto::Layout::LEFT_TO_RIGHT,
                     positions);
  m_view->frameForReading();
}

// Large graphs are laid out on a worker thread from a copy of the graph, so the
// window stays responsive; the result applies as one undo step if nothing changed
// meanwhile.
void MainWindow::layoutGraph() {
  if (m_layoutThread) return showMessage(tr("The graph is being laid out already"));
  std::vector<NodeId> sel = m_scene->selectedNodes();
  bool all = sel.size() <= 1;
  auto in = std::make_shared<LayoutInput>(layoutInput(m_doc, all ? std::vector<NodeId>{} : sel));
  if (int(in->boxes.size()) < m_backgroundLayoutFrom) {
    QString why;
    auto positions = runLayout(*in, &why);
    if (positions.empty() && !in->boxes.empty()) return showMessage(why);
    m_doc.placeNodes(positions, tr("Auto-layout"));
    if (all) m_view->frameAll();
    return;
  }
  struct Outcome {
    std::map<NodeId, QPointF> positions;
    QString error;
  };
  auto out = std::make_shared<Outcome>();
  int revision = m_revision;
  m_layoutThread = QThread::create([in, out] { out->positions = runLayout(*in, &out->error); });
  connect(m_layoutThread, &QThread::finished, this, [this, out, revision, all] {
    m_layoutThread->deleteLater();
    m_layoutThread = nullptr;
    if (revision != m_revision)
      return showMessage(tr("The graph changed while it was laid out: lay it out again"));
    if (out->positions.empty()) return showMessage(out->error);
    m_doc.placeNodes(out->positions, tr("Auto-layout"));
    if (all) m_view->frameAll();
    showMessage(tr("Laid out %n node(s)", "", int(out->positions.size())));
  });
  showMessage(tr("Laying out %n node(s)…", "", int(in->boxes.size())), 0);
  m_layoutThread->start();
}

}  // namespace netloom::gui
