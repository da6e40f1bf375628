#include "gui/project_files.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSettings>
#include <QStandardPaths>

#include "editor/autolayout.h"
#include "editor/document.h"
#include "engine/io/project_file.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"

namespace netloom::gui {

using namespace netloom::editor;

namespace {
constexpr int kAutosaveMs = 60 * 1000;
constexpr int kRecentMax = 8;
}  // namespace

ProjectFiles::ProjectFiles(MainWindow* window, GraphDocument* doc, RunController* runs)
    : QObject(window), m_window(window), m_doc(doc), m_runs(runs) {
  connect(m_doc->undoStack(), &QUndoStack::cleanChanged, this, &ProjectFiles::updateTitle);
  m_autosave.setInterval(kAutosaveMs);
  connect(&m_autosave, &QTimer::timeout, this, &ProjectFiles::autosaveNow);
  m_autosave.start();
  updateTitle();
}

proto::Project ProjectFiles::emptyProject() {
  proto::Project p;
  p.mutable_layout()->set_direction(proto::Layout::TOP_TO_BOTTOM);
  return p;
}

void ProjectFiles::addActions(QMenu* file) {
  auto make = [this, file](const QString& name, const QString& text, QKeySequence key,
                           std::function<void()> fn) {
    return m_window->makeAction(file, name, text, key, std::move(fn), this);
  };
  QMenu* templates = file->addMenu(tr("&New from Template"));
  QDir dir(templatesDir());
  for (const QString& f : dir.entryList({"*.nlproj"}, QDir::Files, QDir::Name)) {
    QString path = dir.filePath(f);
    auto* a = templates->addAction(QFileInfo(f).completeBaseName());
    connect(a, &QAction::triggered, this, [this, path] { newFromTemplate(path); });
  }
  make("new", tr("&New"), QKeySequence::New, [this] { newProject(); });
  make("open", tr("&Open…"), QKeySequence::Open, [this] {
    // From the open project's folder; the examples when there is none. The project
    // is left only once another is chosen.
    const QString from =
        m_doc->filePath().isEmpty() ? templatesDir() : QFileInfo(m_doc->filePath()).absolutePath();
    QString path = QFileDialog::getOpenFileName(m_window, tr("Open project"), from,
                                                tr("NetLoom projects (*.nlproj)"));
    if (!path.isEmpty() && leaveProject()) openFile(path);
  });
  m_recentMenu = file->addMenu(tr("Open &Recent"));
  file->addSeparator();
  make("save", tr("&Save"), QKeySequence::Save, [this] { save(); });
  make("saveAs", tr("Save &As…"), QKeySequence::SaveAs, [this] { saveAs(); });
  make("revert", tr("Re&vert"), {}, [this] { revert(); });
  updateRecent();
}

bool ProjectFiles::newProject() {
  if (!leaveProject()) return false;
  m_doc->setProject(emptyProject());
  m_doc->setFilePath({});
  afterLoad();
  return true;
}

QString ProjectFiles::templatesDir() {
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

QString ProjectFiles::autosavePath(const QString& projectPath) {
  if (projectPath.isEmpty()) {
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(dir);
    return QDir(dir).filePath("untitled.nlproj.autosave");
  }
  QFileInfo fi(projectPath);
  return fi.dir().filePath("." + fi.fileName() + ".autosave");
}

void ProjectFiles::updateTitle() {
  QString name =
      m_doc->filePath().isEmpty() ? tr("Untitled") : QFileInfo(m_doc->filePath()).fileName();
  m_window->setWindowTitle(name + "[*] — NetLoom");
  m_window->setWindowModified(!m_doc->undoStack()->isClean());
}

void ProjectFiles::updateRecent(const QString& added) {
  QSettings settings;
  QStringList recent = settings.value("recentFiles").toStringList();
  if (!added.isEmpty()) {
    recent.removeAll(added);
    recent.prepend(added);
    while (recent.size() > kRecentMax) recent.removeLast();
    settings.setValue("recentFiles", recent);
  }
  m_recentMenu->clear();
  for (const QString& path : recent) {
    QAction* a = m_recentMenu->addAction(QFileInfo(path).fileName());
    a->setToolTip(path);
    connect(a, &QAction::triggered, this, [this, path] {
      if (leaveProject()) openFile(path);
    });
  }
  m_recentMenu->setEnabled(!recent.isEmpty());
}

void ProjectFiles::afterLoad() {
  // A file without positions (written by hand or by a script) is laid out once; that
  // is no edit of the user's.
  if (!m_doc->hasLayout() && !m_doc->nodes().empty()) {
    // Top to bottom, as Netron draws networks: a long chain reads down the canvas.
    m_doc->directionForLayout(proto::Layout::TOP_TO_BOTTOM);
    autoLayout(*m_doc, {});
    m_doc->undoStack()->clear();
    m_doc->laidOut();
  }
  updateTitle();
  emit loaded();
}

bool ProjectFiles::openFile(const QString& path) {
  Status s = m_doc->load(path);
  if (!s) {
    // Nothing is opened: the current document stays as it was.
    QString why = QString::fromStdString(s.error().message);
    m_window->showMessage(tr("Could not open %1: %2").arg(path, why), 0);
    m_window->ask(tr("Could not open the project"), why, QMessageBox::Ok);
    return false;
  }
  updateRecent(path);
  afterLoad();
  offerRecovery(path);
  if (!m_doc->analysis().ok())
    m_window->showMessage(
        tr("Opened %1 with %n problem(s)", "", int(m_doc->analysis().problems.size()))
            .arg(QFileInfo(path).fileName()));
  else
    m_window->showMessage(tr("Opened %1").arg(path));
  return true;
}

bool ProjectFiles::newFromTemplate(const QString& path) {
  if (!leaveProject()) return false;
  auto project = loadProject(path.toStdString());
  if (!project) {
    m_window->showMessage(QString::fromStdString(project.error().message), 0);
    return false;
  }
  m_doc->setProject(*project);
  m_doc->setFilePath({});
  afterLoad();
  m_window->showMessage(tr("New project from %1").arg(QFileInfo(path).completeBaseName()));
  return true;
}

void ProjectFiles::offerRecovery(const QString& path) {
  QString side = autosavePath(path);
  QFileInfo info(side);
  if (!info.exists()) return;
  auto text = [](const QString& p) {
    QFile f(p);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  QByteArray saved = text(side);
  if (saved.isEmpty() || saved == QByteArray::fromStdString(m_doc->toText())) {
    QFile::remove(side);
    return;
  }
  auto answer = m_window->ask(
      tr("Recover unsaved changes?"),
      tr("NetLoom has unsaved changes to %1 from %2, kept when it last stopped "
         "without saving. Recover them?")
          .arg(QFileInfo(path).fileName(), info.lastModified().toString(Qt::TextDate)),
      QMessageBox::Yes | QMessageBox::No);
  if (answer != QMessageBox::Yes) {
    QFile::remove(side);
    return;
  }
  auto project = parseProject(saved.toStdString(), side.toStdString());
  if (!project) {
    m_window->showMessage(tr("The autosave %1 is damaged: %2")
                              .arg(side, QString::fromStdString(project.error().message)),
                          0);
    return;
  }
  m_doc->setProject(*project);
  m_doc->setFilePath(path);
  // Recovered changes are not on disk yet: mark the document modified.
  m_doc->undoStack()->resetClean();
  updateTitle();
  m_window->showMessage(tr("Recovered unsaved changes to %1").arg(QFileInfo(path).fileName()));
}

bool ProjectFiles::save() {
  if (m_doc->filePath().isEmpty()) return saveAs();
  QString path = m_doc->filePath();
  Status s = m_doc->save(path);
  if (!s) {
    m_window->showMessage(
        tr("Could not save %1: %2").arg(path, QString::fromStdString(s.error().message)), 0);
    return false;
  }
  QFile::remove(autosavePath(path));
  updateRecent(path);
  updateTitle();
  m_window->showMessage(tr("Saved %1").arg(path));
  return true;
}

bool ProjectFiles::saveAs(const QString& given) {
  QString path = given;
  if (path.isEmpty()) {
    // An untitled project is offered a name of its own, in the user's documents.
    QString suggestion = m_doc->filePath();
    if (suggestion.isEmpty()) {
      QString name = QString::fromStdString(m_doc->toProject().name()).trimmed();
      name.replace(QRegularExpression("[^A-Za-z0-9._-]+"), "-");
      suggestion = QDir(QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation))
                       .filePath((name.isEmpty() ? QString("untitled") : name) + ".nlproj");
    }
    path = m_window->savePathPrompt()
               ? m_window->savePathPrompt()(suggestion)
               : QFileDialog::getSaveFileName(m_window, tr("Save project"), suggestion,
                                              tr("NetLoom projects (*.nlproj)"));
  }
  if (path.isEmpty()) return false;
  if (!path.endsWith(".nlproj")) path += ".nlproj";
  QString old = m_doc->filePath();
  m_doc->setFilePath(path);
  if (!save()) {
    m_doc->setFilePath(old);
    return false;
  }
  QFile::remove(autosavePath(old));
  return true;
}

void ProjectFiles::revert() {
  if (m_doc->filePath().isEmpty()) return;
  if (!stopRunToLeave(tr("Stop the run and revert the project?"))) return;
  if (!m_doc->undoStack()->isClean() &&
      m_window->ask(tr("Revert"), tr("Discard every change since the last save?"),
                    QMessageBox::Yes | QMessageBox::No) != QMessageBox::Yes)
    return;
  QString path = m_doc->filePath();
  if (Status s = m_doc->load(path); !s) {
    m_window->showMessage(QString::fromStdString(s.error().message), 0);
    return;
  }
  QFile::remove(autosavePath(path));
  afterLoad();
}

void ProjectFiles::autosaveNow() {
  if (m_doc->undoStack()->isClean()) return;
  QSaveFile f(autosavePath(m_doc->filePath()));
  if (!f.open(QIODevice::WriteOnly)) return;
  f.write(QByteArray::fromStdString(m_doc->toText()));
  if (f.commit()) m_window->showMessage(tr("Autosaved"), 2000);
}

bool ProjectFiles::maybeSave() {
  if (m_doc->undoStack()->isClean()) return true;
  QString name =
      m_doc->filePath().isEmpty() ? tr("Untitled") : QFileInfo(m_doc->filePath()).fileName();
  auto answer = m_window->ask(tr("Unsaved changes"), tr("Save the changes to %1?").arg(name),
                              QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (answer == QMessageBox::Save) return save();
  if (answer == QMessageBox::Discard) {
    QFile::remove(autosavePath(m_doc->filePath()));
    return true;
  }
  return false;
}

bool ProjectFiles::stopRunToLeave(const QString& question) {
  // A remote run goes on without the IDE, and is reattached when the project opens.
  if (m_runs->remoteRun()) {
    m_runs->detach();
    return true;
  }
  if (!m_runs->running()) return true;
  auto answer = m_window->ask(tr("A run is in progress"),
                              question + " " +
                                  tr("It stops after the current step and keeps its events and a "
                                     "checkpoint."),
                              QMessageBox::Yes | QMessageBox::Cancel);
  return answer == QMessageBox::Yes && m_runs->stopAndWait();
}

bool ProjectFiles::leaveProject() {
  // Nothing is stopped or detached until the user has kept or dropped the changes.
  return maybeSave() && stopRunToLeave(tr("Stop the run and leave the project?"));
}

bool ProjectFiles::mayClose() {
  return stopRunToLeave(tr("Stop the run and close?")) && maybeSave();
}

}  // namespace netloom::gui
