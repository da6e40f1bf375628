// A sweep whose trials are remote jobs (remote/sweep_trials.h): the spirals sweep over
// two hosts at once, the loopback sshd and a real Slurm cluster reached through it
// (sshd_fixture.h, slurm_fixture.h). Every trial ends, each with its events followed
// back; trials ran on both; pruned ones were asked to stop and ended at their rung.
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

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
};

QTEST_GUILESS_MAIN(TestSweepHosts)
#include "tst_sweep_hosts.moc"
