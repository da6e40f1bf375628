// The Experiments dock, through the real window and the real netloom-train: the
// spirals sweep run from Run Sweep to its end, its table filtered by text and by a
// brush on the parallel coordinates, the best-so-far curve and the importance; a
// trial promoted into the project as one undoable edit; and a sweep whose window
// closes mid-way shown again by the next window, which finishes it without losing a
// trial.
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QUndoStack>
#include <QtTest>

#include "../common/wait.h"
#include "editor/document.h"
#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "gui/charts.h"
#include "gui/experiments_view.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"
#include "gui/trial_curves.h"
#include "qcustomplot.h"
#include "remote/hosts.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::waitForSignals;
using netloom::testing::waitUntil;

namespace {

int visibleRows(QTableWidget* t) {
  int n = 0;
  for (int r = 0; r < t->rowCount(); ++r) n += !t->isRowHidden(r);
  return n;
}

}  // namespace

class TestExperiments : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

  // The shipped sweep, saved under `name` in the temporary folder.
  QString sweepProject(const QString& name, int trials = 12, int epochs = 30) {
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals-sweep.nlproj");
    if (!p) return {};
    p->mutable_sweep()->set_trials(trials);
    p->mutable_train()->set_epochs(epochs);
    QDir(m_dir.path()).mkpath(name);
    const QString path = m_dir.filePath(name + "/spirals-sweep.nlproj");
    return saveProject(path.toStdString(), *p) ? path : QString();
  }

 private slots:
  void aSweepRunsFromTheDock() {
    MainWindow w;
    QVERIFY(w.openFile(sweepProject("run")));
    ExperimentsView* x = w.experiments();
    QVERIFY(x);
    auto* run = x->findChild<QPushButton*>("runSweep");
    QVERIFY(run && run->isEnabled());
    QSignalSpy ended(x, &ExperimentsView::sweepEnded);
    run->click();
    QVERIFY(x->running());
    QVERIFY(waitForSignals(ended));
    QCOMPARE(ended.front().at(0).toBool(), true);
    QCOMPARE(x->table()->rowCount(), 12);
    QCOMPARE(int(x->trials().size()), 12);
    int done = 0;
    double best = 0;
    for (const auto& t : x->trials()) {
      QVERIFY2(t.status == "done" || t.status == "pruned", t.status.c_str());
      done += t.status == "done";
      best = std::max(best, t.objective);
    }
    QVERIFY(best >= 0.97);
    // The best so far rises, trial after trial, to the best.
    QCPGraph* curve = x->bestSoFar()->graph(0);
    QCOMPARE(curve->dataCount(), 12);
    for (int i = 1; i < curve->dataCount(); ++i)
      QVERIFY(curve->data()->at(i)->value >= curve->data()->at(i - 1)->value);
    QCOMPARE(curve->data()->at(11)->value, best);
    QCOMPARE(x->coordinates()->plottableCount(), 12);
    for (const char* p : {"train.optimizer.lr", "nodes.fc1.out_features", "nodes.fc2.out_features"})
      QVERIFY2(x->importance()->text().contains(p), qPrintable(x->importance()->text()));
    // Filtered by text, then by a brush on the objective's axis (the fourth).
    x->filter()->setText("pruned");
    QCOMPARE(visibleRows(x->table()), 12 - done);
    x->filter()->clear();
    QCOMPARE(visibleRows(x->table()), 12);
    x->brush(3, 0.97, 1.0);
    int good = 0;
    for (const auto& t : x->trials()) good += t.objective >= 0.97;
    QCOMPARE(visibleRows(x->table()), good);
    x->clearBrushes();
    QCOMPARE(visibleRows(x->table()), 12);
    // Two trials selected: their losses drawn, a point a step, and kept selected when
    // the sweep's file is read again.
    x->table()->selectRow(0);
    x->table()->selectionModel()->select(x->table()->model()->index(1, 0),
                                         QItemSelectionModel::Select | QItemSelectionModel::Rows);
    const int a = x->table()->item(0, 0)->data(Qt::UserRole).toInt();
    const int b = x->table()->item(1, 0)->data(Qt::UserRole).toInt();
    auto steps = [&](int trial) {
      auto events = readEvents(x->trials()[size_t(trial)].folder + "/events.pb");
      int n = 0;
      for (const auto& e : events->events) n += e.has_step();
      return n;
    };
    QVERIFY(waitUntil(
        [&] { return x->curves()->points(a) == steps(a) && x->curves()->points(b) == steps(b); }));
    QVERIFY(steps(a) > 0);
    x->reload();
    QCOMPARE(x->table()->selectionModel()->selectedRows().size(), 2);
    QCOMPARE(x->curves()->plot()->graphCount(), 2);
    // The two, ended, are drawn over the Training charts too, named by trial.
    QCustomPlot* loss = w.runs()->charts()->lossPlot();
    QStringList names;
    for (int g = 0; g < loss->graphCount(); ++g) names << loss->graph(g)->name();
    for (int t : {a, b})
      QVERIFY2(names.filter(QString("trial %1").arg(t)).size() > 0, qPrintable(names.join(", ")));
    x->table()->clearSelection();
    int left = 0;
    for (int g = 0; g < loss->graphCount(); ++g) left += loss->graph(g)->name().startsWith("trial");
    QCOMPARE(left, 0);
  }

  void promotingATrialIsOneUndoableEdit() {
    MainWindow w;
    const QString path = sweepProject("promote");
    QVERIFY(w.openFile(path));
    ExperimentsView* x = w.experiments();
    QSignalSpy ended(x, &ExperimentsView::sweepEnded);
    x->runSweep();
    QVERIFY(waitForSignals(ended));
    std::optional<sweep::TrialRecord> pick;  // a copy: the view reads the sweep again on edits
    for (const auto& t : x->trials())
      if (!pick || t.objective > pick->objective) pick = t;
    QVERIFY(pick);
    editor::GraphDocument* doc = w.document();
    const double lrBefore = doc->train().optimizer().lr();
    const int steps = doc->undoStack()->count();
    QVERIFY(x->promote(pick->index));
    QCOMPARE(doc->undoStack()->count(), steps + 1);
    QCOMPARE(doc->train().optimizer().lr(), pick->at[0]);
    const auto width = [&](const char* node) {
      const proto::Project now = doc->toProject();
      for (const auto& n : now.model().nodes())
        if (n.name() == node) return int(n.attrs().at("out_features").i());
      return -1;
    };
    QCOMPARE(QString::number(width("fc1")), QString::fromStdString(pick->values[1]));
    QCOMPARE(QString::number(width("fc2")), QString::fromStdString(pick->values[2]));
    doc->undoStack()->undo();
    QCOMPARE(doc->train().optimizer().lr(), lrBefore);
    QCOMPARE(width("fc1"), 64);
  }

  // Closed while its sweep runs: the trials that ended are on disk; the next window
  // shows them at once, and Run Sweep ends the sweep with them kept.
  void aSweepOutlivesItsWindow() {
    const QString path = sweepProject("outlives", 30, 300);
    std::vector<sweep::TrialRecord> before;
    {
      MainWindow w;
      QVERIFY(w.openFile(path));
      ExperimentsView* x = w.experiments();
      x->runSweep();
      auto endedCount = [&] {
        int n = 0;
        for (const auto& t : x->trials()) n += t.ended();
        return n;
      };
      QVERIFY(waitUntil([&] { return endedCount() >= 3; }));
      QVERIFY(x->running());
    }  // closed: the sweep's process is told to stop
    MainWindow again;
    QVERIFY(again.openFile(path));
    ExperimentsView* x = again.experiments();
    for (const auto& t : x->trials())
      if (t.ended()) before.push_back(t);
    QVERIFY(before.size() >= 3);
    QVERIFY(int(x->trials().size()) < 30 || before.size() < 30);
    QSignalSpy ended(x, &ExperimentsView::sweepEnded);
    x->runSweep();
    QVERIFY(waitForSignals(ended));
    QCOMPARE(int(x->trials().size()), 30);
    for (const auto& t : before) {
      const auto& now = x->trials()[size_t(t.index)];
      QCOMPARE(now.status, t.status);
      QCOMPARE(now.objective, t.objective);
    }
    for (const auto& t : x->trials()) QVERIFY2(t.ended(), t.status.c_str());
  }

  // The sweep edited in the dock: text that could not run is refused naming the field,
  // and leaves the project as it was; the sweep run, then extended by 3 trials (one
  // undoable edit), keeps its 12 and ends with 15; an edit of the text is undone.
  void theSweepIsEditedAndExtended() {
    MainWindow w;
    QVERIFY(w.openFile(sweepProject("extend")));
    ExperimentsView* x = w.experiments();
    editor::GraphDocument* doc = w.document();
    const std::string before = doc->toProject().sweep().SerializeAsString();
    QVERIFY(!x->applySweepText("params { target: 'train.optimizer.lrr' min: 0.1 max: 1 }"));
    QVERIFY(x->findChild<QLabel*>()->text().contains("sweep.params[0]"));
    QCOMPARE(doc->toProject().sweep().SerializeAsString(), before);
    QSignalSpy ended(x, &ExperimentsView::sweepEnded);
    x->runSweep();
    QVERIFY(waitForSignals(ended));
    const std::vector<sweep::TrialRecord> first = x->trials();
    QCOMPARE(first.size(), size_t(12));
    const int steps = doc->undoStack()->count();
    x->extend(3);
    QCOMPARE(doc->undoStack()->count(), steps + 1);
    QCOMPARE(doc->toProject().sweep().trials(), 15);
    QVERIFY(waitForSignals(ended, 2));
    QCOMPARE(x->trials().size(), size_t(15));
    for (size_t k = 0; k < first.size(); ++k) {
      QCOMPARE(x->trials()[k].status, first[k].status);
      QCOMPARE(x->trials()[k].objective, first[k].objective);
    }
    QVERIFY(x->applySweepText(
        "params { target: 'train.optimizer.lr' min: 0.001 max: 0.01 log: true } trials: 4"));
    QCOMPARE(doc->toProject().sweep().trials(), 4);
    QCOMPARE(doc->toProject().sweep().params_size(), 1);
    doc->undoStack()->undo();
    QCOMPARE(doc->toProject().sweep().trials(), 15);
  }

  // A trial stopped by hand ends "stopped" with its events; the sweep goes on.
  void aTrialIsStoppedByHand() {
    const QString path = sweepProject("stop-one", 3, 4000);
    auto p = loadProject(path.toStdString());
    QVERIFY(p.ok());
    p->mutable_sweep()->set_strategy(proto::RANDOM);  // nothing pruned
    QVERIFY(saveProject(path.toStdString(), *p).ok());
    MainWindow w;
    QVERIFY(w.openFile(path));
    ExperimentsView* x = w.experiments();
    QSignalSpy ended(x, &ExperimentsView::sweepEnded);
    x->runSweep();
    QVERIFY(waitUntil([&] { return !x->trials().empty() && x->trials()[0].epochs >= 1; }));
    QVERIFY(x->stopTrial(0));
    QVERIFY(waitUntil([&] { return x->trials()[0].status == "stopped"; }));
    QVERIFY(x->trials()[0].epochs < 4000);
    x->stopSweep();
    QVERIFY(waitForSignals(ended));
    QCOMPARE(x->trials()[0].status, std::string("stopped"));
    QVERIFY(QFileInfo(QString::fromStdString(x->trials()[0].folder + "/events.pb")).size() > 0);
  }

  // The trials go where the dock says: a saved host chosen, each trial is a job sent
  // there (this one does not exist: every trial fails naming it, and the sweep ends).
  void trialsGoWhereTheDockSays() {
    const QString config = m_dir.filePath("config");
    qputenv("XDG_CONFIG_HOME", config.toUtf8());
    qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
    remotepb::HostList hosts;
    remotepb::Host* h = hosts.add_hosts();
    h->set_name("nowhere");
    h->set_address("nowhere.invalid");
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), hosts).ok());
    MainWindow w;
    QVERIFY(w.openFile(sweepProject("where", 2)));
    ExperimentsView* x = w.experiments();
    x->reloadHosts();
    QCOMPARE(x->where()->count(), 2);
    x->where()->setCurrentIndex(1);
    QSignalSpy ended(x, &ExperimentsView::sweepEnded);
    x->runSweep();
    QVERIFY(waitForSignals(ended));
    QCOMPARE(x->trials().size(), size_t(2));
    for (const auto& t : x->trials()) {
      QCOMPARE(t.status, std::string("failed"));
      QVERIFY2(t.where.find("nowhere") != std::string::npos, t.where.c_str());
      QVERIFY2(t.error.find("nowhere.invalid") != std::string::npos, t.error.c_str());
    }
    qunsetenv("XDG_CONFIG_HOME");
    qunsetenv("XDG_DATA_HOME");
  }
};

QTEST_MAIN(TestExperiments)
#include "tst_experiments.moc"
