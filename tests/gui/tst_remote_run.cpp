// Training on a remote host from the IDE, against a real sshd on 127.0.0.1: pick
// the host in the device selector, press Run, and the charts fill from the host;
// the run folder's events.pb equals the job's byte for byte; the weights come
// home; closing the IDE leaves the job running and opening the project again
// reattaches with nothing lost or shown twice; pause, stop and cancel reach the
// host. The Hosts dialog saves a private hosts file and tests connections.
#include <sys/stat.h>

#include <QComboBox>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "../common/wait.h"
#include "../remote/slurm_fixture.h"
#include "../remote/sshd_fixture.h"
#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "gui/charts.h"
#include "gui/hosts_dialog.h"
#include "gui/main_window.h"
#include "gui/remote_target.h"
#include "gui/run_controller.h"
#include "kernels/core/device.h"
#include "remote/hosts.h"
#include "remote/jobs.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::waitUntil;

class TestRemoteRun : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  SshdFixture m_sshd;
  QString m_skip;

 private:
  remotepb::Host loop() const {
    return m_sshd.savedHost(m_dir.filePath("known_hosts"), "loop", NETLOOM_TRAIN_EXE,
                            m_dir.filePath("host-work"));
  }

  QString spirals(const QString& name, int epochs) {
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
    p->mutable_train()->set_epochs(epochs);
    p->mutable_train()->set_threads(1);
    p->mutable_train()->mutable_checkpoint()->set_every_epochs(5);
    QDir(m_dir.path()).mkpath(name);
    QString path = m_dir.filePath(name + "/spirals.nlproj");
    return saveProject(path.toStdString(), *p) ? path : QString();
  }

  // The spirals project reading its points from a CSV file beside it (some 60 KiB),
  // which a remote run uploads.
  QString spiralsFromCsv(const QString& name, int epochs) {
    QString path = spirals(name, epochs);
    auto p = loadProject(path.toStdString());
    QFile csv(m_dir.filePath(name + "/points.csv"));
    if (!p || !csv.open(QIODevice::WriteOnly)) return {};
    for (int i = 0; i < 3000; ++i)
      csv.write(QString("%1,%2,%3\n")
                    .arg(std::sin(i * 0.37), 0, 'f', 6)
                    .arg(std::cos(i * 0.11), 0, 'f', 6)
                    .arg(i % 3)
                    .toUtf8());
    p->mutable_data()->clear_synthetic();
    p->mutable_data()->mutable_csv()->set_train_path("points.csv");
    return saveProject(path.toStdString(), *p) ? path : QString();
  }

  static void selectHost(MainWindow& w, const QString& name) {
    auto* combo = w.findChild<QComboBox*>("deviceSelector");
    QVERIFY(combo);
    int i = combo->findText(name);
    QVERIFY2(i > 0, qPrintable(name));
    combo->setCurrentIndex(i);
    QVERIFY(w.runs()->remoteHost().has_value());
  }

  static QByteArray bytesOf(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }

  static remotepb::JobRecord jobOf(const RunRecord& r) {
    auto j = remoteJobOf(r.dir);
    return j ? *j : remotepb::JobRecord();
  }

  std::unique_ptr<remote::SshSession> session() {
    auto s = remote::openSession(remote::hostSpec(loop()), nullptr);
    return s ? std::move(*s) : nullptr;
  }

  // The job's state on the host, over a new connection each time (cuts happen).
  std::string stateOf(const remotepb::JobRecord& job) {
    auto s = session();
    auto st = s ? remote::jobStatus(*s, job) : makeError("no session");
    return st ? st->state : "unreachable: " + st.error().message;
  }

  // Steps 1, 2, 3, … each once.
  static bool stepsInOrder(const RunRecord& r) {
    int64_t next = 1;
    for (const auto& e : r.events)
      if (e.has_step() && e.step().step() != next++) return false;
    return true;
  }

 private slots:
  void initTestCase() {
    qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
    qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
    qunsetenv("SSH_AUTH_SOCK");
    m_skip = m_sshd.start(m_dir.path());
    remotepb::HostList list;
    *list.add_hosts() = loop();
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
  }

  // A test that failed half-way may leave an endless job on the host: it goes.
  void cleanup() {
    if (!QTest::currentTestFailed() || !m_skip.isEmpty()) return;
    auto s = session();
    auto jobs = s ? remote::listJobs(*s, loop()) : makeError("no session");
    if (!jobs) return;
    for (const auto& j : *jobs)
      if (j.state == "running" || j.state == "paused")
        if (auto job = remote::loadJobRecord(remote::defaultJobsDir(), j.id))
          (void)remote::signalJob(*s, *job, "KILL");
  }

  void hostsDialogSavesAndTests() {
    const QString path = m_dir.filePath("dialog/hosts.txtpb");
    HostsDialog d(path);
    d.addHost(loop());
    d.findChild<QLineEdit*>("hostName")->setText("bad name");
    QVERIFY(!d.save().ok());  // names have no spaces
    QVERIFY(d.report().contains("may not hold spaces"));
    d.findChild<QLineEdit*>("hostName")->setText("loop2");
    QVERIFY(d.save().ok());
    struct stat st;
    QCOMPARE(::stat(path.toUtf8().constData(), &st), 0);
    QCOMPARE(int(st.st_mode & 0777), 0600);
    auto saved = remote::loadHosts(path.toStdString());
    QVERIFY(saved.ok() && saved->hosts_size() == 1);
    QCOMPARE(saved->hosts(0).name(), std::string("loop2"));
    QCOMPARE(saved->hosts(0).port(), m_sshd.port());
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    // The first test meets an unknown key: it is asked about, with its fingerprint.
    QString asked;
    d.acceptHostKey = [&](const remote::HostKey& k, const QString&) {
      asked = QString::fromStdString(k.fingerprint);
      return true;
    };
    QString report = d.testConnection();
    QCOMPARE(asked, m_sshd.fingerprint());
    QVERIFY2(report.contains("CPUs") &&
                 report.contains(QString::fromStdString(remote::trainerVersionLine())),
             qPrintable(report));
    // What the host's netloom-train trains on is kept with the host.
    QVERIFY(d.hosts().hosts(0).devices_size() > 0);
    QVERIFY(QString::fromStdString(d.hosts().hosts(0).devices(0)).startsWith("cpu: "));
    asked.clear();
    d.findChild<QLineEdit*>("hostTrainer")->setText(m_dir.filePath("nowhere/netloom-train"));
    report = d.testConnection();
    QVERIFY(asked.isEmpty());  // known now
    QVERIFY2(report.contains("scripts/setup.sh node"), qPrintable(report));
    // A reloaded dialog shows what was saved.
    HostsDialog again(path);
    QCOMPARE(again.hosts().hosts_size(), 1);
    QCOMPARE(again.findChild<QLineEdit*>("hostName")->text(), QString("loop2"));
  }

  // With two saved hosts (the loopback sshd under two names), the selector offers a
  // rank on each: the run is one data-parallel job whose rank 0 stream arrives in the
  // run as any remote run's does, to its end.
  void ranksOnTwoSavedHosts() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    remotepb::HostList list;
    *list.add_hosts() = loop();
    remotepb::Host second = loop();
    second.set_name("loop-b");
    second.set_work_dir(m_dir.filePath("host-work-b").toStdString());
    *list.add_hosts() = second;
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
    {
      MainWindow w;
      auto* combo = w.findChild<QComboBox*>("deviceSelector");
      QVERIFY(combo);
      int all = combo->findText("All saved hosts — 2 ranks (data parallel)");
      QVERIFY(all > 0);
      combo->setCurrentIndex(all);
      QCOMPARE(int(w.runs()->rankHosts().size()), 2);
      QVERIFY(w.openFile(spirals("two-hosts", 2)));
      w.setPrompt([](const QString&, const QString&, QMessageBox::StandardButtons) {
        return QMessageBox::Yes;  // the loopback server's key, if not known yet
      });
      QSignalSpy ended(w.runs(), &RunController::runEnded);
      w.action("run")->trigger();
      QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
      QCOMPARE(ended.count(), 1);
      QVERIFY(ended[0][0].toBool());
      w.runs()->poll();
      const RunRecord* r = w.runs()->current();
      QVERIFY(r && r->finished());
      QVERIFY(stepsInOrder(*r));
      QCOMPARE(r->project.train().distributed().ranks(), 2);
      bool twoRanks = false;
      for (const auto& e : r->events)
        twoRanks =
            twoRanks || (e.has_log() && e.log().text().find("rank 0 of 2") != std::string::npos);
      QVERIFY(twoRanks);
      QCOMPARE(jobOf(*r).ranks_size(), 1);
      combo->setCurrentIndex(0);
    }
    list.mutable_hosts()->RemoveLast();
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
  }

  // A host that lists two GPUs is offered as two ranks, one on each (netloom-job's
  // --ranks-per-host): the run asks the host for them, and the loopback host, which
  // has none, is refused naming it, in the run's Failed event.
  void aRankOnEachGpuOfAHost() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    remotepb::HostList list;
    remotepb::Host* h = list.add_hosts();
    *h = loop();
    h->add_devices("cuda:0: NVIDIA Test — 80.0 GiB (79.0 GiB free), compute capability 9.0");
    h->add_devices("cuda:1: NVIDIA Test — 80.0 GiB (79.0 GiB free), compute capability 9.0");
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
    {
      MainWindow w;
      auto* combo = w.findChild<QComboBox*>("deviceSelector");
      QVERIFY(combo);
      const int both = combo->findText("loop — 2 GPUs (a rank each)");
      QVERIFY(both > 0);
      combo->setCurrentIndex(both);
      QCOMPARE(int(w.runs()->rankHosts().size()), 1);
      QCOMPARE(w.runs()->ranksPerHost(), 2);
      QCOMPARE(w.runs()->hostRanks(), 2);
      QVERIFY(w.openFile(spirals("gpu-ranks", 2)));
      w.setPrompt([](const QString&, const QString&, QMessageBox::StandardButtons) {
        return QMessageBox::Yes;
      });
      QSignalSpy ended(w.runs(), &RunController::runEnded);
      w.action("run")->trigger();
      QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
      QCOMPARE(ended.count(), 1);
      QVERIFY(!ended[0][0].toBool());
      const RunRecord* r = w.runs()->current();
      QVERIFY(r && r->failed());
      QCOMPARE(r->project.train().distributed().ranks(), 2);
      QVERIFY2(r->failed()->message().find("has 0 GPUs; --ranks-per-host 2 needs one for each "
                                           "rank") != std::string::npos,
               r->failed()->message().c_str());
      combo->setCurrentIndex(0);
      QCOMPARE(w.runs()->hostRanks(), 0);
    }
    list.mutable_hosts(0)->clear_devices();
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
  }

  // The selector offers each GPU a host listed; the choice becomes the run's device,
  // which a local run trains on (or, with no GPU here, fails naming).
  void deviceSelectorOffersGpus() {
    remotepb::HostList list;
    remotepb::Host* h = list.add_hosts();
    *h = loop();
    h->add_devices("cpu: Some CPU — 1.0 GiB (1.0 GiB free), 2 threads");
    h->add_devices("cuda:1: NVIDIA Test — 80.0 GiB (79.0 GiB free), compute capability 9.0");
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
    {
      MainWindow w;
      auto* combo = w.findChild<QComboBox*>("deviceSelector");
      QVERIFY(combo);
      int gpu = combo->findText("loop — cuda:1", Qt::MatchStartsWith);
      QVERIFY(gpu > 0);
      QVERIFY(combo->itemText(gpu).contains("NVIDIA Test"));
      combo->setCurrentIndex(gpu);
      QVERIFY(w.runs()->remoteHost().has_value());
      QCOMPARE(w.runs()->device(), std::string("cuda:1"));
      combo->setCurrentIndex(combo->findText("loop"));
      QVERIFY(w.runs()->remoteHost().has_value());
      QCOMPARE(w.runs()->device(), std::string());
      combo->setCurrentIndex(0);
      QVERIFY(!w.runs()->remoteHost().has_value());

      QVERIFY(w.openFile(spirals("device", 1)));
      std::string why;
      const bool haveGpu = openDevice(DeviceId{DeviceKind::Cuda, 0}, why) != nullptr;
      w.runs()->setDevice("cuda:0");
      QSignalSpy ended(w.runs(), &RunController::runEnded);
      w.action("run")->trigger();
      QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
      QCOMPARE(ended.count(), 1);
      const RunRecord* r = w.runs()->current();
      QVERIFY(r);
      QCOMPARE(r->project.train().device(), std::string("cuda:0"));
      if (haveGpu) {
        QVERIFY(ended[0][0].toBool());
        QCOMPARE(r->started()->device(), std::string("cuda:0"));
      } else {
        QVERIFY(!ended[0][0].toBool());
        QVERIFY2(r->failed() && r->failed()->message().find(why) != std::string::npos,
                 r->failed() ? r->failed()->message().c_str() : "no Failed event");
      }
    }
    list.mutable_hosts(0)->clear_devices();
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
  }

  void runOnAHostFillsTheCharts() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    MainWindow w;
    int asked = 0;
    w.setPrompt([&](const QString& title, const QString&, QMessageBox::StandardButtons) {
      asked += title.contains("host key");
      return QMessageBox::Yes;
    });
    QVERIFY(w.openFile(spiralsFromCsv("remote", 12)));
    selectHost(w, "loop");
    QSignalSpy ended(w.runs(), &RunController::runEnded);
    // The upload shows on a real bar, with its bytes in the run's status, and not
    // again in the window's messages.
    std::vector<int> bar;
    QStringList uploads, messages;
    connect(w.runs()->progress(), &QProgressBar::valueChanged, this, [&](int v) {
      if (w.runs()->progress()->maximum() != 1000) return;
      bar.push_back(v);
      uploads << w.runs()->status()->text();
    });
    connect(w.runs(), &RunController::message, this, [&](const QString& t) { messages << t; });
    w.action("run")->trigger();
    QVERIFY(w.runs()->running() && w.runs()->remoteRun());
    QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
    QVERIFY(!bar.empty());
    QCOMPARE(bar.back(), 1000);
    for (const QString& text : uploads) {
      QVERIFY2(text.contains("uploading") && text.contains(" of ") && !text.contains(" 0 of 0"),
               qPrintable(text));
      QVERIFY2(text.contains(QRegularExpression("\\d (B|KiB|MiB|GiB) of ")), qPrintable(text));
    }
    QVERIFY2(!messages.join("\n").contains("pload", Qt::CaseInsensitive),
             qPrintable(messages.join("\n")));
    QCOMPARE(ended.count(), 1);
    QVERIFY2(ended[0][0].toBool(), qPrintable(ended[0][1].toString()));
    const RunRecord* r = w.runs()->current();
    QVERIFY(r && r->finished());
    remotepb::JobRecord job = jobOf(*r);
    QVERIFY(remote::isJobId(job.id()));
    QCOMPARE(job.local_run(), r->dir.toStdString());
    QByteArray local = bytesOf(r->eventsPath());
    QVERIFY(!local.isEmpty());
    QVERIFY(local == bytesOf(QString::fromStdString(job.dir()) + "/events.pb"));
    QCOMPARE(int64_t(w.runs()->charts()->lossPoints()), r->started()->total_steps());
    QVERIFY(stepsInOrder(*r));
    QVERIFY(QFile::exists(r->weightsPath()));  // fetched for evaluation
    QVERIFY(!latestCheckpoint(*r).isEmpty());
    QVERIFY(w.evaluateRun());
    // The job is in the registry netloom-job reads, and the history names the host.
    QVERIFY(remote::loadJobRecord(remote::defaultJobsDir(), job.id()).ok());
    QVERIFY(
        w.runs()->history()->item(w.runs()->history()->count() - 1)->text().contains("on loop"));
    // --devices reached the host.
    QVERIFY(std::find(job.args().begin(), job.args().end(), "--devices") != job.args().end());
    QVERIFY(asked <= 1);
  }

  void closingLeavesTheJobAndReopeningReattaches() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    const QString path = spirals("reattach", testing::kEndlessEpochs);
    QString runDir;
    remotepb::JobRecord job;
    {
      MainWindow w;
      w.setPrompt([](const QString&, const QString&, QMessageBox::StandardButtons) {
        return QMessageBox::Yes;
      });
      QVERIFY(w.openFile(path));
      selectHost(w, "loop");
      w.action("run")->trigger();
      QVERIFY(waitUntil([&] { return w.runs()->current() && w.runs()->current()->steps() > 20; }));
      runDir = w.runs()->current()->dir;
      job = jobOf(*w.runs()->current());
      QVERIFY(w.close());  // no question: the job goes on without the IDE
    }
    QCOMPARE(stateOf(job), std::string("running"));
    MainWindow w;
    QVERIFY(w.openFile(path));
    QVERIFY(w.runs()->remoteRun());
    QCOMPARE(w.runs()->current()->dir, runDir);
    // The selector shows where the run is, and Run says where it would train.
    QCOMPARE(w.findChild<QComboBox*>("deviceSelector")->currentText(), QString("loop"));
    QVERIFY(w.action("run")->text().contains("loop"));
    // A cut of every SSH connection: the run follows on after a reconnect, which says
    // so.
    // Once the stream flows again (the follower is connected) ...
    const int64_t reopened = w.runs()->current()->steps();
    QVERIFY(waitUntil([&] { return w.runs()->current()->steps() > reopened + 5; }));
    const int64_t before = w.runs()->current()->steps();
    QStringList said;
    connect(w.runs(), &RunController::message, this, [&](const QString& t) { said << t; });
    m_sshd.dropConnections();
    QVERIFY2(waitUntil([&] { return said.join("\n").contains("nothing lost"); }, 60000),
             qPrintable(said.join("\n")));
    QVERIFY(waitUntil([&] { return w.runs()->current()->steps() > before + 20; }));
    QVERIFY(w.runs()->remoteRun());
    // Pause reaches the host, and so does Stop.
    w.action("pauseRun")->trigger();
    QVERIFY(waitUntil([&] { return stateOf(job) == "paused"; }));
    w.action("pauseRun")->trigger();
    QVERIFY(waitUntil([&] { return stateOf(job) == "running"; }));
    w.action("stopRun")->trigger();
    QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
    const RunRecord* r = w.runs()->current();
    QVERIFY(r->finished());
    QVERIFY(r->steps() < r->started()->total_steps());  // stopped early
    // Said the same way here and on the host, whose list reads the job's own record.
    QCOMPARE(r->stateText(), QString("stopped at step %1").arg(r->steps()));
    QCOMPARE(stateOf(job), std::string("stopped"));
    QVERIFY(bytesOf(r->eventsPath()) == bytesOf(QString::fromStdString(job.dir()) + "/events.pb"));
    QVERIFY(stepsInOrder(*r));  // nothing lost, nothing twice
    QCOMPARE(int64_t(w.runs()->charts()->lossPoints()), r->steps());
  }

  void cancelMarksTheRunFailed() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    MainWindow w;
    w.setPrompt([](const QString&, const QString&, QMessageBox::StandardButtons) {
      return QMessageBox::Yes;  // the loopback server's key, when this test runs alone
    });
    QVERIFY(w.openFile(spirals("cancel", testing::kEndlessEpochs)));
    selectHost(w, "loop");
    QSignalSpy ended(w.runs(), &RunController::runEnded);
    w.action("run")->trigger();
    QVERIFY(waitUntil([&] { return w.runs()->current() && w.runs()->current()->steps() > 10; }));
    // Evaluate (F7) while it runs: the latest checkpoint comes from the host.
    QVERIFY(waitUntil([&] {
      for (const auto& e : w.runs()->current()->events)
        if (e.has_checkpoint()) return true;
      return false;
    }));
    QVERIFY2(w.evaluateRun(), qPrintable(w.lastMessage()));
    QVERIFY(!latestCheckpoint(*w.runs()->current()).isEmpty());
    QVERIFY(w.runs()->remoteRun());  // still followed
    w.action("cancelRun")->trigger();
    QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
    QCOMPARE(ended.count(), 1);
    QVERIFY(!ended[0][0].toBool());
    const RunRecord* r = w.runs()->current();
    QVERIFY(r->failed());
    QVERIFY2(QString::fromStdString(r->failed()->message()).contains("killed"),
             r->failed()->message().c_str());
    QVERIFY(r->steps() > 10);  // what came before is kept
    QVERIFY(bytesOf(r->eventsPath()) ==
            bytesOf(QString::fromStdString(jobOf(*r).dir()) + "/events.pb"));
    // A finished job's folder can go; the reopened project does not reattach it.
    // An ended run is not followed again.
    QVERIFY(!w.runs()->reattach(r->dir));
    const QString jobDir = QString::fromStdString(jobOf(*r).dir());
    QVERIFY(QDir(jobDir).exists());
    w.action("deleteRemoteJob")->trigger();
    QVERIFY2(!QDir(jobDir).exists(), qPrintable(w.lastMessage()));
    MainWindow again;
    QVERIFY(again.openFile(m_dir.filePath("cancel/spirals.nlproj")));
    QVERIFY(!again.runs()->remoteRun());
  }

  // A Slurm cluster (slurm_fixture.h) behind the loopback sshd as its login node,
  // saved through the Hosts dialog: Run queues the project with sbatch and the
  // charts fill from the job's stream as for any host; pause is not offered.
  void runOnASlurmClusterFillsTheCharts() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    SlurmFixture slurm;
    if (QString why = slurm.start(m_dir.filePath("slurm")); !why.isEmpty()) QSKIP(qPrintable(why));
    remotepb::HostList list;
    *list.add_hosts() = loop();
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
    {
      HostsDialog d(QString::fromStdString(remote::defaultHostsPath()));
      remotepb::Host cluster = loop();
      cluster.set_name("cluster");
      cluster.set_work_dir(m_dir.filePath("cluster-work").toStdString());
      cluster.add_env(slurm.env());
      d.addHost(cluster);
      d.findChild<QGroupBox*>("slurmSettings")->setChecked(true);
      d.findChild<QLineEdit*>("slurmPartition")->setText("main'; touch PWNED; '");
      QVERIFY(!d.save().ok());
      QVERIFY2(d.report().contains("slurm.partition"), qPrintable(d.report()));
      d.findChild<QLineEdit*>("slurmPartition")->setText("main");
      d.findChild<QLineEdit*>("slurmTime")->setText("10:00");
      d.findChild<QSpinBox*>("slurmCpusPerTask")->setValue(1);
      d.findChild<QPlainTextEdit*>("slurmExtra")->setPlainText("--comment=netloom-test\n--hold\n");
      QVERIFY2(d.save().ok(), qPrintable(d.report()));
    }
    auto saved = remote::loadHosts(remote::defaultHostsPath());
    QVERIFY(saved.ok() && saved->hosts_size() == 2);
    const remotepb::Host& cluster = saved->hosts(1);
    QVERIFY(cluster.has_slurm());
    QCOMPARE(cluster.slurm().partition(), std::string("main"));
    QCOMPARE(cluster.slurm().time_limit(), std::string("10:00"));
    QCOMPARE(cluster.slurm().extra_size(), 2);
    {
      MainWindow w;
      w.setPrompt([](const QString&, const QString&, QMessageBox::StandardButtons) {
        return QMessageBox::Yes;
      });
      QVERIFY(w.openFile(spirals("slurm", 3)));
      selectHost(w, "cluster");
      QSignalSpy ended(w.runs(), &RunController::runEnded);
      w.action("run")->trigger();
      QVERIFY(w.runs()->running() && w.runs()->remoteRun());
      QVERIFY(w.runs()->target()->kind().contains("Slurm"));
      QVERIFY(!w.runs()->target()->canPause());
      // Held (--hold), the job is pending, and the Runs list says so while it is
      // followed; released, it runs.
      QVERIFY(waitUntil([&] {
        const QString text = w.runs()->history()->item(w.runs()->history()->count() - 1)->text();
        return !w.runs()->running() || text.contains("pending (JobHeldUser)");
      }));
      QVERIFY(w.runs()->running());
      const std::string id = jobOf(*w.runs()->current()).slurm_job_id();
      QVERIFY(!id.empty());
      slurm.run("scontrol", {"release", QString::fromStdString(id)});
      QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
      QCOMPARE(ended.count(), 1);
      QVERIFY2(ended[0][0].toBool(), qPrintable(ended[0][1].toString()));
      const RunRecord* r = w.runs()->current();
      QVERIFY(r && r->finished());
      remotepb::JobRecord job = jobOf(*r);
      QVERIFY(!job.slurm_job_id().empty());
      QVERIFY(bytesOf(r->eventsPath()) ==
              bytesOf(QString::fromStdString(job.dir()) + "/events.pb"));
      QCOMPARE(int64_t(w.runs()->charts()->lossPoints()), r->started()->total_steps());
      QVERIFY(stepsInOrder(*r));
      QVERIFY(QFile::exists(r->weightsPath()));
      QVERIFY(bytesOf(QString::fromStdString(job.dir()) + "/job.sbatch")
                  .contains("#SBATCH --comment=netloom-test\n"));
    }
    QVERIFY(!QFile::exists(m_dir.filePath("PWNED")));
    list.Clear();
    *list.add_hosts() = loop();
    QVERIFY(remote::saveHosts(remote::defaultHostsPath(), list).ok());
  }

  void unreachableHostSaysSo() {
    MainWindow w;
    QVERIFY(w.openFile(spirals("unreachable", 2)));
    remotepb::Host h = loop();
    h.set_port(1);  // nothing listens there
    w.runs()->setRemoteHost(h);
    QSignalSpy ended(w.runs(), &RunController::runEnded);
    w.action("run")->trigger();
    QVERIFY(waitUntil([&] { return !w.runs()->running(); }));
    QCOMPARE(ended.count(), 1);
    QVERIFY(!ended[0][0].toBool());
    QVERIFY2(ended[0][1].toString().contains("cannot connect"), qPrintable(ended[0][1].toString()));
    QVERIFY(ended[0][1].toString().contains(":1"));
    // The run that never started says so in its own stream, and so in the history.
    const RunRecord* r = w.runs()->current();
    QVERIFY(r);
    auto stream = readEvents(r->eventsPath().toStdString());
    QVERIFY(stream.ok());
    QCOMPARE(stream->events.size(), size_t(1));
    QVERIFY(stream->events[0].has_failed());
    QCOMPARE(stream->events[0].failed().step(), int64_t(0));
    QVERIFY2(
        QString::fromStdString(stream->events[0].failed().message()).contains("cannot connect"),
        stream->events[0].failed().message().c_str());
    std::vector<RunRecord> history = listRuns(QFileInfo(r->dir).path());
    QVERIFY(!history.empty() && history.back().dir == r->dir);
    QVERIFY2(history.back().stateText().startsWith("failed: "),
             qPrintable(history.back().stateText()));
  }
};

QTEST_MAIN(TestRemoteRun)
#include "tst_remote_run.moc"
