// The main window's files: opening, saving (atomically, with a side file autosaved
// every minute and offered back after a crash), reverting, the recent list, the
// title, and leaving a project or closing the window without losing work or a run.
#include <QCloseEvent>
#include <QDateTime>
#include <QDialog>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>

#include "editor/autolayout.h"
#include "editor/view.h"
#include "engine/io/project_file.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"

namespace netloom::gui {

using namespace netloom::editor;

namespace {
constexpr int kRecentMax = 8;
}  // namespace

QString MainWindow::autosavePath(const QString& projectPath) {
  if (projectPath.isEmpty()) {
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(dir);
    return QDir(dir).filePath("untitled.nlproj.autosave");
  }
  QFileInfo fi(projectPath);
  return fi.dir().filePath("." + fi.fileName() + ".autosave");
}

void MainWindow::updateTitle() {
  QString name =
      m_doc.filePath().isEmpty() ? tr("Untitled") : QFileInfo(m_doc.filePath()).fileName();
  setWindowTitle(name + "[*] — NetLoom");
  setWindowModified(!m_doc.undoStack()->isClean());
}

void MainWindow::updateRecent(const QString& added) {
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

void MainWindow::showMessage(const QString& text, int ms) {
  m_lastMessage = text;
  statusBar()->showMessage(text, ms);
}

void MainWindow::afterLoad() {
  // A file without positions (written by hand or by a script) is laid out once; that
  // is no edit of the user's.
  if (!m_doc.hasLayout() && !m_doc.nodes().empty()) {
    // Top to bottom, as Netron draws networks: a long chain reads down the canvas.
    m_doc.directionForLayout(proto::Layout::TOP_TO_BOTTOM);
    autoLayout(m_doc, {});
    m_doc.undoStack()->clear();
    m_doc.laidOut();
  }
  updateTitle();
  m_view->frameForReading();
  m_pasteCount = 0;
  // The charts, status and run list become the new project's; another project's
  // evaluation is not shown over it.
  m_runs->switchProject();
  m_evaluationWindow->hide();
  m_runs->reattach();
  restoreTarget();
}

bool MainWindow::openFile(const QString& path) {
  Status s = m_doc.load(path);
  if (!s) {
    // Nothing is opened: the current document stays as it was.
    QString why = QString::fromStdString(s.error().message);
    showMessage(tr("Could not open %1: %2").arg(path, why), 0);
    if (m_prompt) m_prompt(tr("Could not open the project"), why, QMessageBox::Ok);
    return false;
  }
  updateRecent(path);
  afterLoad();
  offerRecovery(path);
  if (!m_doc.analysis().ok())
    showMessage(tr("Opened %1 with %n problem(s)", "", int(m_doc.analysis().problems.size()))
                    .arg(QFileInfo(path).fileName()));
  else
    showMessage(tr("Opened %1").arg(path));
  return true;
}

bool MainWindow::newFromTemplate(const QString& path) {
  if (!leaveProject()) return false;
  auto project = loadProject(path.toStdString());
  if (!project) {
    showMessage(QString::fromStdString(project.error().message), 0);
    return false;
  }
  m_doc.setProject(*project);
  m_doc.setFilePath({});
  afterLoad();
  showMessage(tr("New project from %1").arg(QFileInfo(path).completeBaseName()));
  return true;
}

void MainWindow::offerRecovery(const QString& path) {
  QString side = autosavePath(path);
  QFileInfo info(side);
  if (!info.exists()) return;
  auto text = [](const QString& p) {
    QFile f(p);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  QByteArray saved = text(side);
  if (saved.isEmpty() || saved == QByteArray::fromStdString(m_doc.toText())) {
    QFile::remove(side);
    return;
  }
  auto answer =
      m_prompt(tr("Recover unsaved changes?"),
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
    showMessage(tr("The autosave %1 is damaged: %2")
                    .arg(side, QString::fromStdString(project.error().message)),
                0);
    return;
  }
  m_doc.setProject(*project);
  m_doc.setFilePath(path);
  // Recovered changes are not on disk yet: mark the document modified.
  m_doc.undoStack()->resetClean();
  updateTitle();
  showMessage(tr("Recovered unsaved changes to %1").arg(QFileInfo(path).fileName()));
}

bool MainWindow::save() {
  if (m_doc.filePath().isEmpty()) return saveAs();
  QString path = m_doc.filePath();
  Status s = m_doc.save(path);
  if (!s) {
    showMessage(tr("Could not save %1: %2").arg(path, QString::fromStdString(s.error().message)),
                0);
    return false;
  }
  QFile::remove(autosavePath(path));
  updateRecent(path);
  updateTitle();
  showMessage(tr("Saved %1").arg(path));
  return true;
}

bool MainWindow::saveAs(const QString& given) {
  QString path = given;
  if (path.isEmpty()) {
    // An untitled project is offered a name of its own, in the user's documents.
    QString suggestion = m_doc.filePath();
    if (suggestion.isEmpty()) {
      QString name = QString::fromStdString(m_doc.toProject().name()).trimmed();
      name.replace(QRegularExpression("[^A-Za-z0-9._-]+"), "-");
      suggestion = QDir(QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation))
                       .filePath((name.isEmpty() ? QString("untitled") : name) + ".nlproj");
    }
    path = m_savePathPrompt ? m_savePathPrompt(suggestion)
                            : QFileDialog::getSaveFileName(this, tr("Save project"), suggestion,
                                                           tr("NetLoom projects (*.nlproj)"));
  }
  if (path.isEmpty()) return false;
  if (!path.endsWith(".nlproj")) path += ".nlproj";
  QString old = m_doc.filePath();
  m_doc.setFilePath(path);
  if (!save()) {
    m_doc.setFilePath(old);
    return false;
  }
  QFile::remove(autosavePath(old));
  return true;
}

void MainWindow::revert() {
  if (m_doc.filePath().isEmpty()) return;
  if (!stopRunToLeave(tr("Stop the run and revert the project?"))) return;
  if (!m_doc.undoStack()->isClean() &&
      m_prompt(tr("Revert"), tr("Discard every change since the last save?"),
               QMessageBox::Yes | QMessageBox::No) != QMessageBox::Yes)
    return;
  QString path = m_doc.filePath();
  if (Status s = m_doc.load(path); !s) {
    showMessage(QString::fromStdString(s.error().message), 0);
    return;
  }
  QFile::remove(autosavePath(path));
  afterLoad();
}

void MainWindow::autosaveNow() {
  if (m_doc.undoStack()->isClean()) return;
  QSaveFile f(autosavePath(m_doc.filePath()));
  if (!f.open(QIODevice::WriteOnly)) return;
  f.write(QByteArray::fromStdString(m_doc.toText()));
  if (f.commit()) showMessage(tr("Autosaved"), 2000);
}

bool MainWindow::maybeSave() {
  if (m_doc.undoStack()->isClean()) return true;
  QString name =
      m_doc.filePath().isEmpty() ? tr("Untitled") : QFileInfo(m_doc.filePath()).fileName();
  auto answer = m_prompt(tr("Unsaved changes"), tr("Save the changes to %1?").arg(name),
                         QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (answer == QMessageBox::Save) return save();
  if (answer == QMessageBox::Discard) {
    QFile::remove(autosavePath(m_doc.filePath()));
    return true;
  }
  return false;
}

bool MainWindow::stopRunToLeave(const QString& question) {
  // A remote run goes on without the IDE, and is reattached when the project opens.
  if (m_runs->remoteRun()) {
    m_runs->detach();
    return true;
  }
  if (!m_runs->running()) return true;
  auto answer = m_prompt(tr("A run is in progress"),
                         question + " " +
                             tr("It stops after the current step and keeps its events and a "
                                "checkpoint."),
                         QMessageBox::Yes | QMessageBox::Cancel);
  return answer == QMessageBox::Yes && m_runs->stopAndWait();
}

bool MainWindow::leaveProject() {
  // Nothing is stopped or detached until the user has kept or dropped the changes.
  return maybeSave() && stopRunToLeave(tr("Stop the run and leave the project?"));
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (!stopRunToLeave(tr("Stop the run and close?"))) return e->ignore();
  if (maybeSave()) {
    saveLayout();
    e->accept();
  } else {
    e->ignore();
  }
}

}  // namespace netloom::gui
