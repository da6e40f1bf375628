// Jobs on a real Slurm cluster (slurm_fixture.h) reached through a real sshd as its
// login node: queued, followed, stopped, cancelled, out of time, requeued, refused;
// and the mapping of Slurm's states and the checks on every setting, which need no
// cluster.
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "../common/cli.h"
#include "../common/wait.h"
#include "../common/weights.h"
#include "engine/io/project_file.h"
#include "job_helpers.h"
#include "remote/follow.h"
#include "remote/hosts.h"
#include "remote/slurm.h"
#include "slurm_fixture.h"

using namespace netloom;
using namespace netloom::remote;
using namespace netloom::testing;

class TestSlurm : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  SshdFixture m_sshd;
  SlurmFixture m_slurm;
  QString m_skip;

  // The login node: the sshd, with Slurm's commands pointed at the test cluster.
  remotepb::Host host(const char* trainer = NETLOOM_TRAIN_EXE) const {
    remotepb::Host h =
        m_sshd.savedHost(m_dir.filePath("known_hosts"), "cluster", trainer, m_dir.filePath("work"));
    h.add_env(m_slurm.env());
    h.mutable_slurm();
    return h;
  }
  std::unique_ptr<SshSession> session() { return testSession(host()); }
  JobStatus status(const remotepb::JobRecord& job) {
    auto s = session();
    auto st = s ? jobStatus(*s, job) : Result<JobStatus>(makeError("no session"));
    return st ? *st : JobStatus{};
  }
  // A trainer that holds every run after step 3 until the FIFO `hold` in the job's
  // folder is written to (or the run is asked to stop).
  QString heldTrainer() const { return m_dir.filePath("held-train"); }

  // A job of the held trainer, queued and now holding at step 3, with the write end
  // of its hold (closed by the caller); an error when it did not get there.
  Result<std::pair<remotepb::JobRecord, int>> heldJob(SshSession& s, int epochs) {
    auto job = submitSlurm(s, host(qPrintable(heldTrainer())), spirals(epochs), options());
    if (!job) return job.error();
    const int hold =
        testing::waitForHold(QString::fromStdString(job->dir()) + "/hold", testing::kHangMs);
    if (hold < 0) return makeError("the job never held at step 3");
    return std::make_pair(*job, hold);
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(writeHeldTrainer(heldTrainer(), 3).ok());
    m_skip = m_sshd.start(m_dir.path());
    if (m_skip.isEmpty()) m_skip = m_slurm.start(m_dir.filePath("slurm"));
    if (!m_skip.isEmpty()) qWarning("Slurm tests skip: %s", qPrintable(m_skip));
  }
  void cleanupTestCase() { m_slurm.stop(); }

  void slurmStatesMapOntoNetLooms() {
    struct Case {
      const char *state, *reason, *exit;
      bool stopped;
      const char* shown;
    };
    const Case cases[] = {
        {"PENDING", "Priority", "0:0", false, "pending (Priority)"},
        {"PENDING", "Resources", "0:0", false, "pending (Resources)"},
        {"RUNNING", "None", "0:0", false, "running"},
        {"COMPLETED", "None", "0:0", false, "finished"},
        {"COMPLETED", "None", "0:0", true, "stopped"},
        {"FAILED", "NonZeroExitCode", "1:0", false, "failed: exit status 1"},
        {"FAILED", "NonZeroExitCode", "143:0", false, "stopped"},
        {"CANCELLED", "None", "0:0", false, "cancelled"},
        {"CANCELLED by 0", "None", "0:15", false, "cancelled"},
        {"TIMEOUT", "TimeLimit", "0:15", false, "failed: time limit"},
        {"NODE_FAIL", "None", "0:0", false, "failed: node failure"},
        {"OUT_OF_MEMORY", "None", "0:125", false, "failed: out of memory"},
        {"PREEMPTED", "None", "0:0", false, "requeued"},
        {"REQUEUED", "None", "0:0", false, "requeued"},
    };
    for (const Case& c : cases)
      QCOMPARE(
          QString::fromStdString(slurmJobStatus(c.state, c.reason, c.exit, c.stopped).describe()),
          QString(c.shown));
  }

  void everySettingIsChecked() {
    auto refused = [](auto&& set, const char* field) {
      remotepb::SlurmSettings s;
      set(s);
      Status st = validateSlurm(s);
      return !st.ok() && st.message().find(field) != std::string::npos;
    };
    for (const char* bad : {"a'b", "x$(touch PWNED)", "p\nq", "with space", "-x", ""}) {
      if (!*bad) continue;
      QVERIFY(refused([&](auto& s) { s.set_partition(bad); }, "slurm.partition"));
      QVERIFY(refused([&](auto& s) { s.set_account(bad); }, "slurm.account"));
      QVERIFY(refused([&](auto& s) { s.set_qos(bad); }, "slurm.qos"));
    }
    for (const char* bad : {"1h", "1:2:3:4", "-1", "$(date)", "1\n#SBATCH --x"})
      QVERIFY(refused([&](auto& s) { s.set_time_limit(bad); }, "slurm.time_limit"));
    for (const char* bad : {"--mem=1G --x", "-N 2", "--mem='1G'", "--x=$(id)", "--output=x",
                            "--job-name=y", "--mem=1\n#SBATCH --x"})
      QVERIFY(refused([&](auto& s) { s.add_extra(bad); }, "slurm.extra[0]"));
    QVERIFY(refused([](auto& s) { s.set_nodes(-1); }, "slurm.nodes"));
    QVERIFY(refused(
        [](auto& s) {
          s.set_gpus_per_node(2);
          s.set_tasks_per_node(2);
        },
        "slurm.tasks_per_node"));
    remotepb::SlurmSettings good;
    good.set_partition("gpu.a100-x_1");
    good.set_time_limit("1-12:00:00");
    good.add_extra("--mem=16G");
    good.add_extra("--exclusive");
    QVERIFY(validateSlurm(good).ok());
    // The job name keeps only what is safe, whatever the project is called.
    const std::string name = slurmJobName("x'; touch PWNED; '$(touch PWNED2)\n`id`");
    QVERIFY2(name.find_first_of("'$();`\n \"") == std::string::npos, name.c_str());
    QVERIFY(name.rfind("netloom-", 0) == 0);
    auto script = slurmScript(good, name);
    QVERIFY(script.ok());
    QVERIFY(script->find("#SBATCH --partition=gpu.a100-x_1\n") != std::string::npos);
    QVERIFY(script->find("#SBATCH --mem=16G\n") != std::string::npos);
  }

  // Held at submission, the job reads pending; released, it runs and finishes, and
  // the stream followed through the login node is the file on the shared filesystem.
  void aJobGoesFromPendingToRunningToFinished() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto s = session();
    QVERIFY(s);
    remotepb::Host h = host();
    h.mutable_slurm()->add_extra("--hold");
    auto job = submitSlurm(*s, h, spirals(2), options());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    QVERIFY(!job->slurm_job_id().empty());
    JobStatus st = status(*job);
    QCOMPARE(QString::fromStdString(st.describe()), QString("pending (JobHeldUser)"));
    m_slurm.run("scontrol", {"release", QString::fromStdString(job->slurm_job_id())});
    FollowEnd end;
    const std::string bytes = followToEnd(*job, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Finished));
    QCOMPARE(QByteArray::fromStdString(bytes), remoteEvents(*job));
    QVERIFY(testing::waitUntil([&] { return status(*job).state == "finished"; }));
    auto listed = listJobs(*s, h);
    QVERIFY(listed.ok());
    bool found = false;
    for (const JobStatus& j : *listed)
      found = found || (j.id == job->id() && j.state == "finished");
    QVERIFY(found);
  }

  // Two tasks as two ranks: data-parallel, or with the project's strategy (the model
  // split over the two, or two pipeline stages); each trains as one rank does.
  void twoTasksTrainAsTwoRanks_data() {
    QTest::addColumn<QString>("strategy");
    QTest::newRow("data parallel") << "data";
    QTest::newRow("tensor parallel") << "tensor";
    QTest::newRow("pipeline") << "pipeline";
  }
  void twoTasksTrainAsTwoRanks() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    if (QThread::idealThreadCount() < 2) QSKIP("two ranks need two CPUs");
    QFETCH(QString, strategy);
    auto s = session();
    QVERIFY(s);
    remotepb::Host h = host();
    h.mutable_slurm()->set_tasks_per_node(2);
    h.mutable_slurm()->set_cpus_per_task(1);
    proto::Project split = spirals(1);
    proto::Distributed* d = split.mutable_train()->mutable_distributed();
    if (strategy == "tensor") d->set_tensor_parallel(2);
    if (strategy == "pipeline") d->set_pipeline_stages(2);
    auto job = submitSlurm(*s, h, split, options());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    FollowEnd end;
    const std::string bytes = followToEnd(*job, &end);
    QVERIFY2(end.how == FollowEnd::How::Finished, end.message.c_str());
    auto events = readEvents(job->dir() + "/events.pb");
    QVERIFY(events.ok());
    bool twoRanks = false;
    for (const auto& e : events->events)
      twoRanks = twoRanks || (e.has_run_started() && e.run_started().ranks() == 2);
    QVERIFY(twoRanks);
    QVERIFY(QFile::exists(QString::fromStdString(job->dir() + "/logs/rank-1.json")));
    // The weights are those of one rank trained with both tasks' batch (within 1e-5 of
    // each tensor's largest, the sums' order aside).
    const proto::Project project = spirals(1);
    const QString path = m_dir.filePath("slurm-alone.nlproj");
    QVERIFY(saveProject(path.toStdString(), project).ok());
    const QString alone = m_dir.filePath("slurm-alone-" + strategy + ".safetensors");
    // A pipeline's two ranks read the same batch; the others each their own.
    const int step = (strategy == "pipeline" ? 1 : 2) * project.train().batch_size();
    testing::Outcome one = testing::runTrain({path, "--quiet", "--threads", "1", "--batch-size",
                                              QString::number(step), "--save-weights", alone});
    QVERIFY2(one.code == 0, qPrintable(one.err));
    const double differ =
        testing::weightsDiffer(QString::fromStdString(job->dir() + "/weights.safetensors"), alone);
    qInfo("two Slurm tasks (%s) against one rank: weights differ by %g of each tensor's largest",
          qPrintable(strategy), differ);
    QVERIFY2(differ >= 0 && differ <= 1e-5, qPrintable(QString::number(differ)));
  }

  void scancelEndsTheJobAsCancelled() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto s = session();
    QVERIFY(s);
    auto held = heldJob(*s, 3);
    QVERIFY2(held.ok(), held.ok() ? "" : held.error().message.c_str());
    const remotepb::JobRecord job = held->first;
    const int hold = held->second;
    QVERIFY(signalJob(*s, job, "KILL").ok());
    FollowEnd end;
    followToEnd(job, &end);
    ::close(hold);
    QVERIFY(testing::waitUntil([&] { return status(job).state == "cancelled"; }));
    // Pause is not offered.
    QVERIFY(!signalJob(*s, job, "STOP").ok());
  }

  void stopEndsTheJobWithACheckpoint() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto s = session();
    QVERIFY(s);
    auto held = heldJob(*s, 3);
    QVERIFY2(held.ok(), held.ok() ? "" : held.error().message.c_str());
    const remotepb::JobRecord job = held->first;
    const int hold = held->second;
    QVERIFY(signalJob(*s, job, "TERM").ok());
    FollowEnd end;
    followToEnd(job, &end);
    ::close(hold);
    QVERIFY2(end.how == FollowEnd::How::Finished, end.message.c_str());
    QVERIFY(testing::waitUntil([&] { return status(job).state == "stopped"; }));
    QVERIFY(!QDir(QString::fromStdString(job.dir() + "/checkpoints")).isEmpty());
  }

  // Requeued while it runs, the job runs again from its checkpoint: the stream has
  // every step once.
  void aRequeuedJobResumesFromItsCheckpoint() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto s = session();
    QVERIFY(s);
    auto held = heldJob(*s, 2);
    QVERIFY2(held.ok(), held.ok() ? "" : held.error().message.c_str());
    const remotepb::JobRecord job = held->first;
    const int hold = held->second;
    m_slurm.run("scontrol", {"requeue", QString::fromStdString(job.slurm_job_id())});
    FollowEnd end;
    followToEnd(job, &end);
    ::close(hold);
    QVERIFY2(end.how == FollowEnd::How::Finished, end.message.c_str());
    auto events = readEvents(job.dir() + "/events.pb");
    QVERIFY(events.ok());
    std::vector<int64_t> steps;
    int runs = 0;
    for (const auto& e : events->events) {
      if (e.has_step()) steps.push_back(e.step().step());
      if (e.has_run_started()) ++runs;
    }
    QCOMPARE(runs, 2);
    QVERIFY(!steps.empty());
    for (size_t i = 0; i < steps.size(); ++i) QCOMPARE(steps[i], int64_t(i + 1));
    QVERIFY(events->events.back().has_finished());
    QCOMPARE(events->events.back().finished().steps(), int64_t(steps.size()));
  }

  void aRefusedSubmissionShowsSbatchsMessage() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto s = session();
    QVERIFY(s);
    remotepb::Host h = host();
    h.mutable_slurm()->set_partition("nosuchpartition");
    auto job = submitSlurm(*s, h, spirals(1), options());
    QVERIFY(!job.ok());
    QVERIFY2(job.error().message.find("sbatch refused the job") != std::string::npos &&
                 job.error().message.find("partition") != std::string::npos,
             job.error().message.c_str());
    h = host();
    h.mutable_slurm()->set_partition("short");
    h.mutable_slurm()->set_time_limit("5");
    job = submitSlurm(*s, h, spirals(1), options());
    QVERIFY(!job.ok());
    QVERIFY2(job.error().message.find("time limit") != std::string::npos,
             job.error().message.c_str());
  }

  // Held past the short partition's minute, the job ends as out of time, and the
  // Failed event that ends its stream says so.
  void aJobOverItsTimeLimitFails() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto s = session();
    QVERIFY(s);
    remotepb::Host h = host(qPrintable(heldTrainer()));
    h.mutable_slurm()->set_partition("short");
    h.mutable_slurm()->set_time_limit("1");
    auto job = submitSlurm(*s, h, spirals(3), options());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    FollowEnd end;
    followToEnd(*job, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Failed));
    QVERIFY2(end.message.find("time limit") != std::string::npos, end.message.c_str());
    QCOMPARE(QString::fromStdString(status(*job).describe()), QString("failed: time limit"));
  }

  // netloom-job, as a person types it: a saved host made a Slurm login node on the
  // command line; a bad partition refused naming the field; submit --wait to the end;
  // list --host with the job's state; fetch.
  void netloomJobRunsAProjectOnTheCluster() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    const QProcessEnvironment env =
        jobCliEnvironment(m_dir.filePath("cli-config"), m_dir.filePath("cli-data"));
    remotepb::HostList list;
    remotepb::Host h = host();
    h.clear_slurm();  // the command line says it is a Slurm cluster
    *list.add_hosts() = h;
    QVERIFY(saveHosts(m_dir.filePath("cli-config/netloom/hosts.txtpb").toStdString(), list).ok());
    const QString path = m_dir.filePath("cli.nlproj");
    QVERIFY(saveProject(path.toStdString(), spirals(1)).ok());
    auto job = [&](const QStringList& args) {  // "yes": the login node's key, when new
      return runJobCli(this, env, args, "yes\n");
    };
    QProcess* bad = job({"submit", "--host", "cluster", "--slurm", "--partition", "a'b", path});
    QCOMPARE(bad->exitCode(), 1);
    QVERIFY(bad->readAllStandardError().contains("slurm.partition"));
    QProcess* p = job({"submit", "--host", "cluster", "--slurm", "--partition", "main", "--time",
                       "10", "--cpus-per-task", "1", "--wait", path});
    const QString err = QString::fromUtf8(p->readAllStandardError());
    QVERIFY2(p->exitCode() == 0, qPrintable(err));
    QVERIFY2(err.contains("Slurm job "), qPrintable(err));
    const QString id = QString::fromUtf8(p->readAllStandardOutput()).section(' ', 0, 0);
    QVERIFY(isJobId(id.toStdString()));
    QVERIFY(testing::waitUntil([&] {
      QProcess* l = job({"list", "--host", "cluster", "--slurm"});
      return QString::fromUtf8(l->readAllStandardOutput())
          .contains(QRegularExpression(id + " +finished"));
    }));
    QProcess* fetch = job({"fetch", id, "--to", m_dir.filePath("cli-fetch")});
    QVERIFY2(fetch->exitCode() == 0, qPrintable(QString::fromUtf8(fetch->readAllStandardError())));
    QVERIFY(QFile::exists(m_dir.filePath("cli-fetch/weights.safetensors")));
  }

  void hostileNamesExecuteNothing() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    auto s = session();
    QVERIFY(s);
    proto::Project p = spirals(1);
    p.set_name("x'; touch PWNED; '$(touch PWNED2)\n#SBATCH --wrap=id");
    remotepb::Host h = host();
    h.set_work_dir(m_dir.filePath("work'; touch PWNED3; '$(touch PWNED4)").toStdString());
    auto job = submitSlurm(*s, h, p, options());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    FollowEnd end;
    followToEnd(*job, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Finished));
    h.mutable_slurm()->set_account("a'; touch PWNED5; '");
    QVERIFY(!submitSlurm(*s, h, p, options()).ok());
    for (const char* f : {"PWNED", "PWNED2", "PWNED3", "PWNED4", "PWNED5"}) {
      QVERIFY(!QFile::exists(m_dir.filePath(f)));
      QVERIFY(!QFile::exists(QDir::home().filePath(f)));
      QVERIFY(!QFile::exists(QString::fromStdString(job->dir()) + "/" + f));
    }
  }
};

QTEST_GUILESS_MAIN(TestSlurm)
#include "tst_slurm.moc"
