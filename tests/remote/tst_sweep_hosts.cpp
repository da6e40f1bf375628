// A sweep whose trials are remote jobs (remote/sweep_trials.h): the spirals sweep over
// two hosts at once, the loopback sshd and a real Slurm cluster reached through it
// (sshd_fixture.h, slurm_fixture.h). Every trial ends, each with its events followed
// back; trials ran on both; pruned ones were asked to stop and ended at their rung.
#include <unistd.h>

#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "job_helpers.h"
#include "remote/sweep_trials.h"
#include "slurm_fixture.h"

using namespace netloom;
using namespace netloom::remote;
using namespace netloom::testing;

class TestSweepHosts : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  SshdFixture m_sshd;
  SlurmFixture m_slurm;
  QString m_skip;

  remotepb::Host ssh() const {
    return m_sshd.savedHost(m_dir.filePath("known_hosts"), "loop", NETLOOM_TRAIN_EXE,
                            m_dir.filePath("work-ssh"));
  }
  remotepb::Host cluster() const {
    remotepb::Host h = m_sshd.savedHost(m_dir.filePath("known_hosts"), "cluster", NETLOOM_TRAIN_EXE,
                                        m_dir.filePath("work-slurm"));
    h.add_env(m_slurm.env());
    h.mutable_slurm();
    return h;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_skip = m_sshd.start(m_dir.path());
    if (m_skip.isEmpty()) m_skip = m_slurm.start(m_dir.filePath("slurm"));
    if (!m_skip.isEmpty()) qWarning("remote sweeps skip: %s", qPrintable(m_skip));
  }
  void cleanupTestCase() { m_slurm.stop(); }

  void aSweepRunsOnAnSshHostAndASlurmCluster() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto project = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals-sweep.nlproj");
    QVERIFY(project.ok());
    project->mutable_sweep()->set_trials(6);
    project->mutable_train()->set_epochs(12);
    auto plan = sweep::planSweep(*project);
    QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
    RemoteTrials trials({ssh(), cluster()}, 1, options(), [](const remotepb::Host& h) {
      auto s = testSession(h);
      return s ? Result<std::unique_ptr<SshSession>>(std::move(s))
               : Result<std::unique_ptr<SshSession>>(makeError("cannot reach " + h.name()));
    });
    QCOMPARE(trials.capacity(), 2);
    sweep::SweepOptions o;
    o.folder = m_dir.filePath("sweep").toStdString();
    o.launcher = &trials;
    auto r = sweep::runSweep(*project, *plan, o);
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    QCOMPARE(r->trials.size(), size_t(6));
    int onSlurm = 0, onSsh = 0;
    for (const sweep::TrialRecord& t : r->trials) {
      QVERIFY2(t.status == "done" || t.status == "pruned", (t.status + ": " + t.error).c_str());
      QVERIFY(t.hasObjective);
      QVERIFY(QFileInfo(QString::fromStdString(t.folder + "/events.pb")).size() > 0);
      if (t.status == "pruned") QVERIFY(t.epochs < 12);
      (t.where.find("Slurm") != std::string::npos ? onSlurm : onSsh) += 1;
    }
    int pruned = 0;
    for (const sweep::TrialRecord& t : r->trials) pruned += t.status == "pruned";
    qInfo("%d trials on the Slurm cluster, %d on the SSH host, %d pruned", onSlurm, onSsh, pruned);
    QVERIFY(onSlurm >= 1);
    QVERIFY(onSsh >= 1);
    QVERIFY(r->best >= 0);
  }

  // A sweep that goes away while its trials run on the host leaves them running; the
  // sweep started again follows the same jobs to their ends, not new ones. The trainer
  // holds each job at step 3 until the test lets it go.
  void aSweepGoesOnWithTheSameJobs() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    const QString held = m_dir.filePath("held-train");
    QVERIFY(writeHeldTrainer(held, 3).ok());
    remotepb::Host host = ssh();
    host.set_trainer(held.toStdString());
    auto project = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals-sweep.nlproj");
    QVERIFY(project.ok());
    project->mutable_sweep()->set_trials(2);
    project->mutable_sweep()->set_strategy(proto::RANDOM);
    project->mutable_train()->set_epochs(2);
    auto plan = sweep::planSweep(*project);
    QVERIFY(plan.ok());
    const std::string jobs = m_dir.filePath("jobs").toStdString();
    auto connect = [](const remotepb::Host& h) {
      auto s = testSession(h);
      return s ? Result<std::unique_ptr<SshSession>>(std::move(s))
               : Result<std::unique_ptr<SshSession>>(makeError("cannot reach " + h.name()));
    };
    RemoteTrials trials({host}, 2, options(), connect, jobs);
    std::atomic<bool> stop{false};
    sweep::SweepOptions o;
    o.folder = m_dir.filePath("sweep-again").toStdString();
    o.launcher = &trials;
    o.stop = &stop;
    std::vector<std::string> ids;
    std::mutex seen;
    std::condition_variable started;  // a job's record saved and its id said
    o.onTrial = [&](const sweep::TrialRecord& t) {
      std::lock_guard<std::mutex> lock(seen);
      if (!t.job.empty() && std::find(ids.begin(), ids.end(), t.job) == ids.end()) {
        ids.push_back(t.job);
        started.notify_all();
      }
    };
    std::vector<int> holds;
    std::thread leave([&] {  // once both jobs hold at step 3, the sweep goes away
      for (size_t k = 0; k < 2; ++k) {
        std::string id;
        {
          std::unique_lock<std::mutex> lock(seen);
          if (!started.wait_for(lock, std::chrono::milliseconds(kHangMs),
                                [&] { return ids.size() > k; }))
            break;  // the check below fails, saying how many started
          id = ids[k];
        }
        auto job = loadJobRecord(jobs, id);
        holds.push_back(job ? waitForHold(QString::fromStdString(job->dir()) + "/hold", kHangMs)
                            : -1);
      }
      stop = true;
    });
    auto first = sweep::runSweep(*project, *plan, o);
    leave.join();
    QVERIFY(first.ok());
    QCOMPARE(ids.size(), size_t(2));
    for (int h : holds) QVERIFY(h >= 0);
    for (const auto& t : first->trials) {
      QCOMPARE(t.status, std::string("queued"));
      QVERIFY(!t.job.empty());
    }
    // The jobs still run, held: let them go, and go on with the sweep.
    for (int h : holds) {
      QVERIFY(::write(h, "go\n", 3) == 3);
      ::close(h);
    }
    sweep::SweepOptions again = o;
    again.stop = nullptr;
    again.onTrial = nullptr;
    auto second = sweep::runSweep(*project, *plan, again);
    QVERIFY(second.ok());
    std::vector<std::string> after;
    for (const auto& t : second->trials) {
      QVERIFY2(t.status == "done", (t.status + ": " + t.error).c_str());
      after.push_back(t.job);
      auto events = readEvents(t.folder + "/events.pb");
      QVERIFY(events.ok());
      int started = 0, steps = 0;
      for (const auto& e : events->events) started += e.has_run_started(), steps += e.has_step();
      QCOMPARE(started, 1);  // the same run, followed from its first event
      QVERIFY(steps > 3);
    }
    std::sort(after.begin(), after.end());
    std::sort(ids.begin(), ids.end());
    QCOMPARE(after, ids);
  }

  // A GPU each: the trials go to the host with --devices cuda:0 and cuda:1; this host
  // has none, and each trial fails naming the device it was given.
  void aTrialEachOnAHostsGpus() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto project = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals-sweep.nlproj");
    QVERIFY(project.ok());
    project->mutable_sweep()->set_trials(2);
    auto plan = sweep::planSweep(*project);
    QVERIFY(plan.ok());
    RemoteTrials trials(
        {ssh()}, 2, options(),
        [](const remotepb::Host& h) {
          auto s = testSession(h);
          return s ? Result<std::unique_ptr<SshSession>>(std::move(s))
                   : Result<std::unique_ptr<SshSession>>(makeError("cannot reach " + h.name()));
        },
        m_dir.filePath("jobs-gpus").toStdString());
    trials.setGpuEach(true);
    QVERIFY(QString::fromStdString(trials.where(1)).endsWith(", cuda:1"));
    sweep::SweepOptions o;
    o.folder = m_dir.filePath("sweep-gpus").toStdString();
    o.launcher = &trials;
    auto r = sweep::runSweep(*project, *plan, o);
    QVERIFY(r.ok());
    std::set<std::string> devices;
    for (const auto& t : r->trials) {
      QCOMPARE(t.status, std::string("failed"));
      for (const char* d : {"cuda:0", "cuda:1"})
        if (t.error.find(d) != std::string::npos) devices.insert(d);
    }
    QCOMPARE(devices.size(), size_t(2));
  }
};

QTEST_GUILESS_MAIN(TestSweepHosts)
#include "tst_sweep_hosts.moc"
