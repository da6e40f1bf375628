// Training from the IDE, through the real window: Run on the spirals project in
// process and in a child netloom-train, with the loss chart fed from the run's
// event stream; a child killed mid-run is reported and its events kept; pause,
// stop with a checkpoint and resume from it; the run history across windows, its
// overlay and the settings that differ between runs.
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>
#include <csignal>

#include "../common/wait.h"
#include "editor/document.h"
#include "editor/panels.h"
#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "gui/charts.h"
#include "gui/evaluation.h"
#include "gui/main_window.h"
#include "gui/run_comparison.h"
#include "gui/run_controller.h"
#include "gui/settings_form.h"
#include "qcustomplot.h"
#include "training_fixture.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::trigger;
using netloom::testing::waitForEnd;
using netloom::testing::waitForSignals;
using netloom::testing::waitForSteps;
using netloom::testing::waitUntil;

namespace {

int64_t stepsIn(const RunRecord& r) {
  return r.steps();
}

bool hasCheckpointEvent(const RunRecord& r) {
  for (const auto& e : r.events)
    if (e.has_checkpoint()) return true;
  return false;
}

}  // namespace

class TestTraining : public QObject {
  Q_OBJECT

  netloom::testing::ProjectFolder m_dir;

 private slots:
  void initTestCase() { qputenv("NETLOOM_TRAIN", NETLOOM_TRAIN_EXE); }

  void runFromTheActionTrainsToTheFloor() {
    MainWindow w;
    QVERIFY(w.openFile(m_dir.spirals("inproc", 30)));
    QSignalSpy ended(w.runs(), &RunController::runEnded);
    trigger(w, "run");
    QVERIFY(w.runs()->running());
    QVERIFY(waitForEnd(w));
    QCOMPARE(ended.count(), 1);
    QVERIFY2(ended[0][0].toBool(), qPrintable(ended[0][1].toString()));
    const RunRecord* r = w.runs()->current();
    QVERIFY(r && r->finished());
    const proto::RunStarted* rs = r->started();
    QVERIFY(rs);
    // One point per step on the loss chart, one per epoch on the accuracy chart.
    QCOMPARE(int64_t(w.runs()->charts()->lossPoints()), rs->total_steps());
    QCOMPARE(stepsIn(*r), rs->total_steps());
    QCOMPARE(w.runs()->charts()->epochPoints(), 30);
    // A gradient and a weight norm curve per parameter (3 Linear layers: 6 tensors),
    // a point every tenth step and on the first.
    QCOMPARE(w.runs()->charts()->gradNormPlot()->graphCount(), 6);
    QCOMPARE(w.runs()->charts()->weightNormPlot()->graphCount(), 6);
    // Each per-layer chart names its curves in a legend.
    QVERIFY(w.runs()->charts()->gradNormPlot()->legend->visible());
    QCPLegend* legend = w.runs()->charts()->gradNormPlot()->legend;
    int named = 0;  // the legend wraps in a grid: cells past the last are empty
    for (int i = 0; i < legend->itemCount(); ++i) named += legend->item(i) != nullptr;
    QCOMPARE(named, 6);
    QVERIFY(w.runs()->charts()->weightNormPlot()->legend->visible());
    QCOMPARE(int64_t(w.runs()->charts()->gradNormPlot()->graph(0)->dataCount()),
             rs->total_steps() / 10 + 1);
    for (int i = 0; i < 6; ++i)
      QVERIFY(w.runs()->charts()->weightNormPlot()->graph(i)->data()->at(0)->value > 0);
    // The distributions offer the same six tensors, each with a band at those steps.
    for (const char* chooser : {"gradDistributionLayer", "weightDistributionLayer"}) {
      auto* layers = w.runs()->charts()->findChild<QComboBox*>(chooser);
      QVERIFY(layers);
      QCOMPARE(layers->count(), 6);
    }
    for (bool gradients : {true, false}) {
      QCPGraph* median = w.runs()->charts()->distributionPlot(gradients)->graph(4);
      QCOMPARE(int64_t(median->dataCount()), rs->total_steps() / 10 + 1);
      QCPGraph* lowest = w.runs()->charts()->distributionPlot(gradients)->graph(0);
      QVERIFY(lowest->data()->at(0)->value <= median->data()->at(0)->value);
    }
    QVERIFY2(r->finished()->test_accuracy() >= 0.9,
             qPrintable(QString::number(r->finished()->test_accuracy())));
    // The run folder: frozen project, stream, checkpoints, final weights.
    QVERIFY(QFile::exists(r->dir + "/project.nlproj"));
    QVERIFY(QFile::exists(r->weightsPath()));
    QVERIFY(!latestCheckpoint(*r).isEmpty());
    QCOMPARE(int(w.runs()->runs().size()), 1);
    // A chart exports as an image and as data.
    QString csv = m_dir.filePath("loss.csv"), png = m_dir.filePath("loss.png");
    QVERIFY(w.runs()->charts()->exportLoss(csv));
    QVERIFY(w.runs()->charts()->exportLoss(png));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll().count('\n'), rs->total_steps() + 1);
    QVERIFY(QImage(png).width() > 0);
    QString svg = m_dir.filePath("loss.svg");
    QVERIFY(w.runs()->charts()->exportLoss(svg));
    QFile s(svg);
    QVERIFY(s.open(QIODevice::ReadOnly));
    QVERIFY(s.readAll().contains("<svg"));
  }

  void killedChildIsReportedAndKeepsItsEvents() {
    MainWindow w;
    QVERIFY(w.openFile(m_dir.spirals("child", testing::kEndlessEpochs)));
    trigger(w, "childProcess");
    QVERIFY(w.runs()->childProcess());
    trigger(w, "run");
    QVERIFY(w.runs()->running());
    auto* child = qobject_cast<ChildProcessTarget*>(w.runs()->target());
    QVERIFY(child);
    QVERIFY(waitUntil([&] { return w.runs()->charts()->lossPoints() >= 50; }));
    // Evaluation during a run reads its latest checkpoint.
    QVERIFY(waitUntil([&] { return hasCheckpointEvent(*w.runs()->current()); }));
    QVERIFY(!latestCheckpoint(*w.runs()->current()).isEmpty());
    QVERIFY(w.evaluateRun());
    QCOMPARE(w.evaluation()->predictions().samples.size(), int64_t(600));
    ::kill(pid_t(child->processId()), SIGKILL);
    QVERIFY(waitForEnd(w));
    const RunRecord* r = w.runs()->current();
    QVERIFY(r->failed());
    QVERIFY2(QString::fromStdString(r->failed()->message()).contains("killed"),
             r->failed()->message().c_str());
    QVERIFY(r->steps() >= 50);
    QVERIFY2(w.lastMessage().contains("failed"), qPrintable(w.lastMessage()));
    // The folder stays readable: the history lists the run with its steps and why.
    auto runs = listRuns(w.runs()->runsDir());
    QCOMPARE(int(runs.size()), 1);
    QCOMPARE(runs[0].steps(), r->steps());
    QVERIFY(runs[0].stateText().contains("killed"));
  }

  // The device selector's data-parallel entries: two ranks in netloom-train, processes
  // (rank 1 logs beside the run) or threads of one process (none does); no pause.
  void ranksTrainFromTheDeviceSelector_data() {
    QTest::addColumn<bool>("threads");
    QTest::newRow("processes") << false;
    QTest::newRow("threads of one process") << true;
  }
  void ranksTrainFromTheDeviceSelector() {
    QFETCH(bool, threads);
    if (QThread::idealThreadCount() < 2) QSKIP("one core: no two ranks");
    MainWindow w;
    QVERIFY(w.openFile(m_dir.spirals(threads ? "thread-ranks" : "ranks", 3)));
    auto* selector = w.findChild<QComboBox*>("deviceSelector");
    const QString processes = "This computer — 2 CPU ranks (data parallel)";
    QVERIFY(selector);
    int item = selector->findText(
        threads ? "This computer — 2 CPU ranks in one process (data parallel)" : processes);
    QVERIFY(item >= 0);
    selector->setCurrentIndex(item);
    QCOMPARE(w.runs()->ranks(), 2);
    QCOMPARE(w.runs()->threadRanks(), threads);
    trigger(w, "run");
    QVERIFY(w.runs()->running());
    QVERIFY(qobject_cast<ChildProcessTarget*>(w.runs()->target()));
    trigger(w, "pauseRun");
    QVERIFY(!w.runs()->paused());
    QVERIFY2(w.runs()->status()->text().contains("cannot pause"),
             qPrintable(w.runs()->status()->text()));
    QVERIFY(waitForEnd(w));
    const RunRecord* r = w.runs()->current();
    QVERIFY2(r->finished(), qPrintable(r->stateText()));
    QCOMPARE(r->project.train().distributed().ranks(), 2);
    QCOMPARE(r->project.train().distributed().threads(), threads);
    bool rankLine = false;
    for (const auto& e : r->events)
      rankLine = rankLine || (e.has_log() && e.log().text().rfind("rank 1: pid ", 0) == 0);
    QCOMPARE(rankLine, !threads);
    QCOMPARE(QFile::exists(r->dir + "/logs/rank-1.log"), !threads);
    // The throughput chart adds each rank's samples/s and the share spent waiting
    // for gradient sums, one point per step.
    QCOMPARE(int(r->started()->ranks()), 2);
    QCOMPARE(w.runs()->charts()->perRankPoints(), int(r->steps()));
    QCOMPARE(w.runs()->charts()->commPoints(), int(r->steps()));
    for (const auto& e : r->events)
      if (e.has_step()) QVERIFY(e.step().comm_share() >= 0 && e.step().comm_share() <= 1);
  }

  void pauseStopAndResumeFromCheckpoint_data() {
    QTest::addColumn<bool>("child");
    QTest::addRow("in process") << false;
    QTest::addRow("child process") << true;
  }
  void pauseStopAndResumeFromCheckpoint() {
    QFETCH(bool, child);
    MainWindow w;
    QVERIFY(w.openFile(m_dir.spirals(child ? "resume-child" : "resume", testing::kEndlessEpochs)));
    if (child) trigger(w, "childProcess");
    trigger(w, "run");
    QVERIFY(waitForSteps(w, 60));
    // The status bar shows the memory in use on the run's device, as the run reports it.
    w.runs()->poll();
    QVERIFY2(w.runs()->status()->text().contains(" · cpu memory "),
             qPrintable(w.runs()->status()->text()));
    auto* inProcess = qobject_cast<InProcessTarget*>(w.runs()->target());
    QCOMPARE(inProcess == nullptr, child);
    std::optional<QSignalSpy> parked;
    if (inProcess) parked.emplace(inProcess, &InProcessTarget::parked);
    trigger(w, "pauseRun");
    QVERIFY(w.runs()->paused());
    // The pause has taken effect: the child is stopped by the kernel, the training
    // thread waits between two steps. Whatever was written before is in the stream.
    if (child) {
      auto* c = qobject_cast<ChildProcessTarget*>(w.runs()->target());
      QVERIFY(waitUntil([&] { return testing::processStopped(c->processId()); }));
    } else {
      QVERIFY(waitForSignals(*parked));
    }
    w.runs()->poll();
    const int64_t held = w.runs()->current()->steps();
    const int64_t heldBytes = QFileInfo(w.runs()->current()->eventsPath()).size();
    if (child)
      QVERIFY(testing::processStopped(
          qobject_cast<ChildProcessTarget*>(w.runs()->target())->processId()));
    const QString pausedStatus = w.runs()->status()->text();
    QVERIFY2(pausedStatus.contains("samples/s") && pausedStatus.contains("paused"),
             qPrintable(pausedStatus));
    w.runs()->poll();
    QCOMPARE(w.runs()->current()->steps(), held);  // no step while paused
    QCOMPARE(QFileInfo(w.runs()->current()->eventsPath()).size(), heldBytes);
    // Paused reads as paused, and its figures (samples/s, ETA) stand still.
    QCOMPARE(w.runs()->status()->text(), pausedStatus);
    QVERIFY(w.runs()->history()->item(w.runs()->history()->count() - 1)->text().contains("paused"));
    trigger(w, "pauseRun");
    QVERIFY(!w.runs()->paused());
    QVERIFY(waitForSteps(w, held + 1));
    trigger(w, "stopRun");
    QVERIFY(waitForEnd(w));
    const RunRecord* r = w.runs()->current();
    QVERIFY(r->finished());  // a stop is a clean end
    QCOMPARE(r->stateText(), QString("stopped at step %1").arg(r->steps()));
    int64_t stoppedAt = r->steps();
    QString ckpt = latestCheckpoint(*r);
    QVERIFY(!ckpt.isEmpty());
    // Resume: the same run folder continues from its checkpoint, in the same stream.
    trigger(w, "resumeRun");
    QVERIFY(w.runs()->running());
    QVERIFY(waitForSteps(w, stoppedAt + 21));
    w.runs()->stopAndWait();
    QCOMPARE(int(w.runs()->runs().size()), 1);
    auto events = readEvents((r->dir + "/events.pb").toStdString());
    QVERIFY(events.ok());
    int runsStarted = 0;
    for (const auto& e : events->events) runsStarted += e.has_run_started();
    QCOMPARE(runsStarted, 2);
  }

  void historyReloadsOverlaysAndCompares() {
    QString path = m_dir.spirals("history", 2);
    {
      MainWindow w;
      QVERIFY(w.openFile(path));
      trigger(w, "run");
      QVERIFY(waitForEnd(w));
      // A second run with another learning rate.
      auto p = loadProject(path.toStdString());
      p->mutable_train()->mutable_optimizer()->set_lr(0.003);
      QVERIFY(saveProject(path.toStdString(), *p));
      QVERIFY(w.openFile(path));
      trigger(w, "run");
      QVERIFY(waitForEnd(w));
    }
    MainWindow w;
    QVERIFY(w.openFile(path));
    QCOMPARE(int(w.runs()->runs().size()), 2);
    QCOMPARE(w.runs()->history()->count(), 2);
    QVERIFY(w.runs()->history()->item(0)->text().contains("finished"));
    int graphs = w.runs()->charts()->lossPlot()->graphCount();
    for (int i = 0; i < 2; ++i) w.runs()->history()->item(i)->setCheckState(Qt::Checked);
    QCOMPARE(w.runs()->charts()->lossPlot()->graphCount(), graphs + 2);
    SettingsDiff d = compareSettings(w.runs()->checkedRuns());
    QCOMPARE(d.keys, std::vector<std::string>{"train.optimizer.lr"});
    QCOMPARE(d.values[0], (std::vector<std::string>{"0.01", "0.003"}));
    QCOMPARE(d.results.front(), std::string("result.state"));
    // Compare Checked Runs: a table, a column per run, how each ended and then what
    // differs; it fits in the window and scrolls.
    w.show();
    trigger(w, "compareRuns");
    auto* dialog = w.findChild<QDialog*>("compareDialog");
    QVERIFY(dialog && dialog->isVisible());
    auto* table = dialog->findChild<QTableWidget*>("compareTable");
    QVERIFY(table);
    QCOMPARE(table->columnCount(), 2);
    QCOMPARE(table->horizontalHeaderItem(0)->text(), w.runs()->runs()[0].name);
    int lr = -1, state = -1;
    for (int r = 0; r < table->rowCount(); ++r) {
      if (table->verticalHeaderItem(r)->text() == "Training › optimizer › lr") lr = r;
      if (table->verticalHeaderItem(r)->text() == "How it ended") state = r;
    }
    QVERIFY(lr >= 0 && state >= 0);
    QCOMPARE(table->item(lr, 1)->text(), QString("0.003"));
    QCOMPARE(table->item(state, 0)->text(), QString("finished"));
    // How each run ended reads in the palette's own colours, in bold.
    QCOMPARE(table->item(state, 0)->foreground().color(), table->palette().color(QPalette::Text));
    QCOMPARE(table->item(state, 0)->background().color(),
             table->palette().color(QPalette::AlternateBase));
    QVERIFY(table->item(state, 0)->font().bold());
    QVERIFY(dialog->height() <= w.height() && dialog->width() <= w.width());
    dialog->close();
    // Renamed, tagged, given a note and deleted from the Runs list; each run keeps
    // one colour on the charts and in the list, whichever runs are checked.
    QListWidget* list = w.runs()->history();
    const QColor second = w.runs()->charts()->lossPlot()->graph(graphs + 1)->pen().color();
    list->item(0)->setCheckState(Qt::Unchecked);
    QCOMPARE(w.runs()->charts()->lossPlot()->graph(graphs)->pen().color(), second);
    QCOMPARE(list->item(1)->foreground().color(), second);
    list->setCurrentRow(0);
    QStringList answers{"baseline", "lr-sweep  fast", "the first try"};
    w.setNamePrompt([&](const QString&, const QString&) { return answers.takeFirst(); });
    trigger(w, "renameRun");
    trigger(w, "tagRun");
    trigger(w, "noteRun");
    QVERIFY2(list->item(0)->text().startsWith("baseline #lr-sweep #fast — finished"),
             qPrintable(list->item(0)->text()));
    QVERIFY(list->item(0)->toolTip().contains("the first try"));
    MainWindow again;
    QVERIFY(again.openFile(path));
    QCOMPARE(again.runs()->runs()[0].title, QString("baseline"));
    QCOMPARE(again.runs()->runs()[0].tags, (QStringList{"lr-sweep", "fast"}));
    const QString gone = again.runs()->runs()[0].dir;
    again.setPrompt([](const QString&, const QString&, QMessageBox::StandardButtons) {
      return QMessageBox::Yes;
    });
    again.runs()->history()->setCurrentRow(0);
    trigger(again, "deleteRun");
    QVERIFY(!QDir(gone).exists());
    QCOMPARE(int(again.runs()->runs().size()), 1);
  }

  // Attributes read as values, not as the file's syntax.
  void attributesReadAsValues() {
    proto::AttrValue v;
    v.mutable_ints()->add_values(5);
    v.mutable_ints()->add_values(5);
    QCOMPARE(attrText(v), std::string("[5, 5]"));
    v.set_s("relu");
    QCOMPARE(attrText(v), std::string("relu"));
    v.set_f(0.1);
    QCOMPARE(attrText(v), std::string("0.1"));
    v.set_b(false);
    QCOMPARE(attrText(v), std::string("false"));
  }

  // Closing the window during a run asks; yes stops the run cleanly (its stream
  // ends with Finished) and keeps a checkpoint; cancel keeps it running.
  void closingDuringARunAsksThenStopsCleanly() {
    QString path = m_dir.spirals("closing", testing::kEndlessEpochs);
    QString runDir;
    {
      MainWindow w;
      QVERIFY(w.openFile(path));
      QStringList asked;
      QMessageBox::StandardButton answer = QMessageBox::Cancel;
      w.setPrompt([&](const QString& title, const QString&, QMessageBox::StandardButtons) {
        asked << title;
        return answer;
      });
      w.show();
      trigger(w, "run");
      QVERIFY(waitUntil([&] { return w.runs()->charts()->lossPoints() >= 60; }));
      QVERIFY(!w.close());
      QCOMPARE(asked, QStringList{"A run is in progress"});
      QVERIFY(w.runs()->running());
      answer = QMessageBox::Yes;
      QVERIFY(w.close());
      QVERIFY(!w.runs()->running());
      runDir = w.runs()->current()->dir;
    }
    auto runs =
        listRuns(QFileInfo(path).absolutePath() + "/runs/" + QFileInfo(path).completeBaseName());
    QCOMPARE(int(runs.size()), 1);
    QVERIFY(runs[0].finished());
    QVERIFY(!latestCheckpoint(runs[0]).isEmpty());
  }

  // Two projects in one folder keep their runs apart: neither lists, overlays or
  // reports the other's; a run from before (directly in runs/) stays with its project.
  void runsOfTwoProjectsInOneFolderStayApart() {
    const QString a = m_dir.spirals("shared", 1);
    QVERIFY(!a.isEmpty());
    auto p = loadProject(a.toStdString());
    p->set_name("Other spirals");
    p->mutable_train()->mutable_optimizer()->set_lr(0);  // a warning in Problems
    const QString b = m_dir.filePath("shared/other.nlproj");
    QVERIFY(saveProject(b.toStdString(), *p).ok());
    {
      MainWindow w;
      QVERIFY(w.openFile(b));
      trigger(w, "run");
      QVERIFY(waitForEnd(w));
      QCOMPARE(int(w.runs()->runs().size()), 1);
      QVERIFY(w.runs()->runsDir().endsWith("/runs/other"));
    }
    // A run folder as older versions kept it, directly in runs/, of the first project.
    auto legacy = createRun(m_dir.filePath("shared/runs"), *loadProject(a.toStdString()),
                            m_dir.filePath("shared"));
    QVERIFY(legacy.ok());
    MainWindow w;
    QVERIFY(w.openFile(a));
    QCOMPARE(int(w.runs()->runs().size()), 1);
    QCOMPARE(w.runs()->runs()[0].dir, legacy->dir);
    QCOMPARE(w.runs()->history()->count(), 1);
    trigger(w, "run");
    QVERIFY(waitForEnd(w));
    QCOMPARE(int(w.runs()->runs().size()), 2);
    for (const RunRecord& r : w.runs()->runs())
      QCOMPARE(r.project.name(), loadProject(a.toStdString())->name());
    MainWindow other;
    QVERIFY(other.openFile(b));
    QCOMPARE(int(other.runs()->runs().size()), 1);
  }

  // Missing data fails the run with the file named; the stream says so.
  // The pace shown is the stream's, smoothed: one odd step does not swing it, and it
  // is measured in the run's own clock.
  void paceIsTheStreamsSmoothed() {
    RunRecord r;
    proto::TrainEvent start;
    start.mutable_run_started();
    r.events.push_back(start);
    for (int i = 1; i <= 40; ++i) {
      proto::TrainEvent e;
      e.mutable_step()->set_step(i);
      e.mutable_step()->set_seconds(i * 0.5);  // two steps a second
      e.mutable_step()->set_samples_per_sec(i == 20 ? 14000 : i == 21 ? 51 : 1000 + i % 3);
      r.events.push_back(e);
    }
    const RunRecord::Pace p = r.pace();
    QCOMPARE(p.stepsPerSec, 2.0);
    QVERIFY(p.samplesPerSec >= 1000 && p.samplesPerSec <= 1002);
  }

  // Missing data is found with the graph: Problems names the file, Run is refused up
  // front and makes no run; a project with no data source says so too.
  void missingDataIsAProblemAndRunIsRefused() {
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/fashion-lenet.nlproj");
    QVERIFY(p.ok());
    p->mutable_data()->mutable_idx()->set_train_images("/nonexistent/train-images.gz");
    QDir().mkpath(m_dir.filePath("missing"));
    QString path = m_dir.filePath("missing/lenet.nlproj");
    QVERIFY(saveProject(path.toStdString(), *p));
    MainWindow w;
    QVERIFY(w.openFile(path));
    auto listed = [&](const QString& text) {
      for (int i = 0; i < w.problems()->count(); ++i)
        if (w.problems()->item(i)->text().contains(text)) return true;
      return false;
    };
    QVERIFY(listed("data.idx.train_images: /nonexistent/train-images.gz does not exist"));
    trigger(w, "run");
    QVERIFY(!w.runs()->running());
    QVERIFY2(w.lastMessage().contains("/nonexistent/train-images.gz"), qPrintable(w.lastMessage()));
    QVERIFY(w.runs()->runs().empty());
    // Fixed in the Data settings, the problem goes.
    proto::DataDef fixed = w.document()->data();
    fixed.mutable_idx()->clear_train_images();
    w.document()->setSettings(w.document()->train(), fixed, "fix data");
    QVERIFY(!listed("train_images"));
    fixed.clear_idx();
    w.document()->setSettings(w.document()->train(), fixed, "no data");
    QVERIFY(listed("no data source"));
  }

  void invalidGraphIsRefused() {
    MainWindow w;
    QVERIFY(w.openFile(m_dir.spirals("invalid", 2)));
    editor::GraphDocument* doc = w.document();
    doc->disconnectInput(doc->findNode("act1"), 0);
    QVERIFY(!doc->analysis().ok());
    trigger(w, "run");
    QVERIFY(!w.runs()->running());
    QVERIFY2(w.lastMessage().contains("problem"), qPrintable(w.lastMessage()));
    QVERIFY(!QDir(w.runs()->runsDir()).exists());
  }
};

QTEST_MAIN(TestTraining)
#include "tst_training.moc"
