// What the IDE's training tests share: a spirals project saved in a temporary folder,
// a window action triggered by name, and waits on a window's runs.
#pragma once

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include "../common/wait.h"
#include "engine/io/project_file.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"

namespace netloom::testing {

inline void trigger(gui::MainWindow& w, const char* name) {
  QAction* a = w.action(name);
  QVERIFY2(a, name);
  a->trigger();
}

inline bool waitForEnd(gui::MainWindow& w) {
  return waitUntil([&] { return !w.runs()->running(); });
}

inline bool waitForSteps(gui::MainWindow& w, int64_t steps) {
  return waitUntil([&] { return w.runs()->current() && w.runs()->current()->steps() >= steps; });
}

// Projects saved in a temporary folder of the test's own.
class ProjectFolder {
 public:
  QString filePath(const QString& name) const { return m_dir.filePath(name); }

  // Spirals with `epochs` epochs, one thread, checkpoints every epoch, saved in the
  // folder under `name`.
  QString spirals(const QString& name, int epochs, double lr = 0.01) const {
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
    if (!p) return {};
    p->mutable_train()->set_epochs(epochs);
    p->mutable_train()->set_threads(1);
    p->mutable_train()->mutable_optimizer()->set_lr(lr);
    p->mutable_train()->mutable_checkpoint()->set_every_epochs(1);
    p->mutable_train()->mutable_checkpoint()->set_keep_last(2);
    QDir(m_dir.path()).mkpath(name);
    QString path = m_dir.filePath(name + "/spirals.nlproj");
    return saveProject(path.toStdString(), *p) ? path : QString();
  }

 private:
  QTemporaryDir m_dir;
};

}  // namespace netloom::testing
