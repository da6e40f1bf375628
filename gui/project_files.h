// The window's project on disk: File ▸ New, Open, Open Recent, Save, Save As and
// Revert; saving atomically, a side file autosaved every minute and offered back
// after a crash; the title with its modified mark; and leaving a project or closing
// the window without losing work or a run.
#pragma once

#include <QObject>
#include <QTimer>

#include "engine/proto/project.pb.h"

class QMenu;

namespace netloom::editor {
class GraphDocument;
}

namespace netloom::gui {

class MainWindow;
class RunController;

class ProjectFiles : public QObject {
  Q_OBJECT

 public:
  ProjectFiles(MainWindow* window, editor::GraphDocument* doc, RunController* runs);

  // Adds New from Template, New, Open…, Open Recent, Save, Save As… and Revert.
  void addActions(QMenu* file);

  // Where the templates for File > New come from (the projects/ folder).
  static QString templatesDir();
  // The side file autosave writes for a project (or for an untitled one).
  static QString autosavePath(const QString& projectPath);
  // An empty project, drawn top to bottom as projects opened without positions are.
  static proto::Project emptyProject();

  bool openFile(const QString& path);  // reports failures in a dialog and the status bar
  // An empty, untitled project; false when the user kept the open one.
  bool newProject();
  bool newFromTemplate(const QString& path);
  bool save();
  bool saveAs(const QString& path = {});
  void revert();
  void autosaveNow();
  // Before another project replaces this one: stops a local run (asking) and asks to
  // save; false when the user kept the project.
  bool leaveProject();
  // Whether the window may close: a local run stopped (asking), the changes kept or
  // dropped.
  bool mayClose();

 signals:
  // Another project is in the document (opened, reverted, new), laid out if it had
  // no positions.
  void loaded();

 private:
  void afterLoad();
  void updateTitle();
  void updateRecent(const QString& added = {});
  bool maybeSave();  // false: the user cancelled
  // Stops a local run in progress after asking `question` (detaching a remote one);
  // false when the user kept it running.
  bool stopRunToLeave(const QString& question);
  void offerRecovery(const QString& path);

  MainWindow* m_window;
  editor::GraphDocument* m_doc;
  RunController* m_runs;
  QMenu* m_recentMenu = nullptr;
  QTimer m_autosave;
};

}  // namespace netloom::gui
