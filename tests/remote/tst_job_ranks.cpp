// Jobs on several hosts (the real sshd on 127.0.0.1 under two names, each with its
// own work folder): one job trains with a rank on each host, data-parallel, tensor-
// parallel or as a pipeline as the project says, and under each a rank killed
// mid-run fails the job with a Failed event that names it, leaving no process behind.
#include <signal.h>
#include <unistd.h>

#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "../common/cli.h"
#include "../common/wait.h"
#include "../common/weights.h"
#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "job_helpers.h"
#include "remote/follow.h"
#include "remote/hosts.h"
#include "sshd_fixture.h"

using namespace netloom;
using namespace netloom::remote;
using namespace netloom::testing;

class TestJobRanks : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  SshdFixture m_sshd;
  QString m_skip;

 private:
  remotepb::Host host() const {
    return m_sshd.savedHost(m_dir.filePath("known_hosts"), "loop", NETLOOM_TRAIN_EXE,
                            m_dir.filePath("work"));
  }

  std::unique_ptr<SshSession> session(const remotepb::Host& h) { return testSession(h); }
  std::unique_ptr<SshSession> session() { return session(host()); }

  // Whether any process of the group lives (a zombie does not: whoever reaps
  // orphans here may take its time).
  static bool groupAlive(pid_t group) {
    for (const QString& pid : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      QFile f("/proc/" + pid + "/stat");
      if (!f.open(QIODevice::ReadOnly)) continue;
      const QByteArray stat = f.readAll();
      // pid (comm) state ppid pgrp ...: comm may hold spaces, so after the last ')'.
      const QList<QByteArray> rest = stat.mid(stat.lastIndexOf(')') + 2).split(' ');
      if (rest.size() > 2 && rest[2].toLongLong() == group && rest[0] != "Z") return true;
    }
    return false;
  }

 private slots:
  void initTestCase() {
    m_skip = m_sshd.start(m_dir.path());
    QVERIFY(writeHeldTrainer(m_dir.filePath("held3-train"), 3).ok());
  }

  // One job on two hosts (the loopback sshd under two names, each with its own work
  // folder), data-parallel, or with the project's strategy: the model split over the
  // two (tensor parallelism) or cut into two pipeline stages. A host named twice is
  // refused; rank 0's stream is the job's and ends Finished, both ranks trained every
  // step, fetch brings rank 1's log, and the weights are those of one rank trained
  // with the step's whole batch. With --ranks-per-host 2, four ranks (two tensor
  // groups of two, one on each host) train as one.
  void twoHostsTrainOneJob_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("perHost");
    QTest::newRow("data parallel") << "data" << 1;
    QTest::newRow("tensor parallel") << "tensor" << 1;
    QTest::newRow("pipeline") << "pipeline" << 1;
    QTest::newRow("hybrid, two ranks per host") << "hybrid" << 2;
  }
  void twoHostsTrainOneJob() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    QFETCH(QString, strategy);
    QFETCH(int, perHost);
    const QString tag = strategy == "data" ? QString() : "-" + strategy;
    const QProcessEnvironment env =
        jobCliEnvironment(m_dir.filePath("ranks-config" + tag), m_dir.filePath("ranks-data" + tag));
    remotepb::HostList list;
    for (const char* name : {"first", "second"}) {
      remotepb::Host h = host();
      h.set_name(name);
      h.set_known_hosts(m_dir.filePath("ranks_known_hosts" + tag).toStdString());
      h.set_work_dir(m_dir.filePath(QString("ranks-") + name + tag).toStdString());
      *list.add_hosts() = h;
    }
    QVERIFY(
        saveHosts(m_dir.filePath("ranks-config" + tag + "/netloom/hosts.txtpb").toStdString(), list)
            .ok());
    auto job = [&](const QStringList& args, const QByteArray& input = {}) {
      return runJobCli(this, env, args, input, 240000);
    };
    proto::Project project = spirals(3);
    project.mutable_train()->set_threads(1);
    proto::Distributed* d = project.mutable_train()->mutable_distributed();
    if (strategy == "tensor" || strategy == "hybrid") d->set_tensor_parallel(2);
    if (strategy == "pipeline") d->set_pipeline_stages(2);
    const QString path = m_dir.filePath("ranks" + tag + ".nlproj");
    QVERIFY(saveProject(path.toStdString(), project).ok());
    QProcess* twice = job({"submit", "--hosts", "first,first", path}, "yes\n");
    QCOMPARE(twice->exitCode(), 1);
    QVERIFY(twice->readAllStandardError().contains("twice"));
    if (perHost > 1) {  // a GPU each: the loopback host has none
      QProcess* gpus =
          job({"submit", "--hosts", "first", "--ranks-per-host", "2", "--devices", "cuda", path},
              "yes\n");
      QCOMPARE(gpus->exitCode(), 1);
      const QString err = QString::fromUtf8(gpus->readAllStandardError());
      QVERIFY2(err.contains(") has 0 GPUs; --ranks-per-host 2 needs one for each rank"),
               qPrintable(err));
    }
    QProcess* p = job({"submit", "--wait", "--hosts", "first,second", "--ranks-per-host",
                       QString::number(perHost), path},
                      "yes\nyes\n");
    const QString out = QString::fromUtf8(p->readAllStandardOutput());
    QVERIFY2(p->exitCode() == 0, qPrintable(QString::fromUtf8(p->readAllStandardError())));
    const QStringList idAndDir = out.trimmed().split(' ');
    QCOMPARE(idAndDir.size(), 2);
    QVERIFY(idAndDir[1].startsWith(m_dir.filePath("ranks-first" + tag)));
    auto events = readEvents((idAndDir[1] + "/events.pb").toStdString());
    QVERIFY(events.ok() && !events->events.empty());
    QVERIFY(events->events.back().has_finished());
    const int64_t steps = events->events.back().finished().steps();
    QVERIFY(steps > 0);
    bool twoRanks = false;
    for (const auto& e : events->events)
      twoRanks = twoRanks ||
                 (e.has_log() && e.log().text().find("rank 0 of " + std::to_string(2 * perHost)) !=
                                     std::string::npos);
    QVERIFY(twoRanks);
    // The second host's ranks trained every step, each in its own folder.
    const QStringList secondJobs = QDir(m_dir.filePath("ranks-second" + tag + "/jobs"))
                                       .entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    QCOMPARE(secondJobs.size(), perHost);
    QDir second(m_dir.filePath("ranks-second" + tag + "/jobs/" + secondJobs[0]));
    QFile summary(second.filePath("summary.json"));
    QVERIFY2(summary.open(QIODevice::ReadOnly), qPrintable(second.path()));
    QCOMPARE(int64_t(QJsonDocument::fromJson(summary.readAll()).object()["steps"].toDouble()),
             steps);
    const QString fetched = m_dir.filePath("ranks-fetch" + tag);
    QProcess* fetch = job({"fetch", idAndDir[0], "--to", fetched});
    QVERIFY2(fetch->exitCode() == 0, qPrintable(QString::fromUtf8(fetch->readAllStandardError())));
    QVERIFY(QFile::exists(fetched + "/weights.safetensors"));
    QVERIFY(QFile::exists(fetched + "/rank-1/train.log"));
    // The job trained as one rank with the step's batch (a pipeline's ranks read the
    // same one): the same weights (within 1e-5 of each tensor's largest, the sums'
    // order aside).
    const int perRank = project.train().batch_size();
    QVERIFY(perRank > 0);
    const int step = strategy == "pipeline" ? perRank : 2 * perHost * perRank;
    proto::Project single = project;
    single.mutable_train()->clear_distributed();
    const QString singlePath = m_dir.filePath("ranks-alone" + tag + ".nlproj");
    QVERIFY(saveProject(singlePath.toStdString(), single).ok());
    const QString alone = m_dir.filePath("ranks-alone" + tag + ".safetensors");
    testing::Outcome one =
        testing::runTrain({singlePath, "--quiet", "--threads", "1", "--batch-size",
                           QString::number(step), "--save-weights", alone});
    QVERIFY2(one.code == 0, qPrintable(one.err));
    const double differ = testing::weightsDiffer(fetched + "/weights.safetensors", alone);
    qInfo("two hosts (%s) against one rank: weights differ by %g of each tensor's largest",
          qPrintable(strategy), differ);
    QVERIFY2(differ >= 0 && differ <= 1e-5, qPrintable(QString::number(differ)));
  }

  // Rank 1 of a job on two hosts is killed while both ranks hold at step 3: rank 0
  // fails on its next collective, and following the job names rank 1, its host
  // and its log in the Failed event the job's stream ends with; nothing is left.
  // The same where the two ranks split the model (a tensor group, a pipeline), so that
  // rank 0 waits on rank 1 inside its step: it fails too, and the job names rank 1.
  void aKilledRankFailsTheJobOnTwoHosts_data() {
    QTest::addColumn<QString>("strategy");
    for (const char* s : {"data", "tensor", "pipeline"}) QTest::newRow(s) << QString(s);
  }
  void aKilledRankFailsTheJobOnTwoHosts() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    QFETCH(QString, strategy);
    proto::Project project = spirals(3);
    proto::Distributed* d = project.mutable_train()->mutable_distributed();
    if (strategy == "tensor") d->set_tensor_parallel(2);
    if (strategy == "pipeline") d->set_pipeline_stages(2);
    std::vector<remotepb::Host> hosts;
    std::vector<std::unique_ptr<SshSession>> owned;
    std::vector<SshSession*> sessions;
    for (const char* name : {"first", "second"}) {
      remotepb::Host h = host();
      h.set_name(name);
      h.set_trainer(m_dir.filePath("held3-train").toStdString());
      h.set_work_dir(m_dir.filePath(QString("killed-") + name + "-" + strategy).toStdString());
      hosts.push_back(h);
      owned.push_back(session(h));
      QVERIFY(owned.back());
      sessions.push_back(owned.back().get());
    }
    auto job = submitRanks(sessions, hosts, project, options(), 30);
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    QCOMPARE(job->ranks_size(), 1);
    const pid_t group1 = pid_t(job->ranks(0).pid());
    const int hold1 = testing::waitForHold(QString::fromStdString(job->ranks(0).dir()) + "/hold");
    QVERIFY(hold1 >= 0);
    QCOMPARE(::kill(-group1, SIGKILL), 0);
    ::close(hold1);
    const int hold0 = testing::waitForHold(QString::fromStdString(job->dir()) + "/hold");
    QVERIFY(hold0 >= 0);
    QCOMPARE(::write(hold0, "\n", 1), ssize_t(1));
    ::close(hold0);
    FollowEnd end;
    followToEnd(*job, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Failed));
    const QString why = QString::fromStdString(end.message);
    QVERIFY2(why.startsWith("rank 1 (pid " + QString::number(group1) + " on second"),
             qPrintable(why));
    QVERIFY2(why.contains(") was killed; its log"), qPrintable(why));
    QVERIFY2(why.contains("rank 0 said:"), qPrintable(why));
    auto events = readEvents(job->dir() + "/events.pb");
    QVERIFY(events.ok() && !events->events.empty());
    QVERIFY(events->events.back().has_failed());
    QCOMPARE(events->events.back().failed().message(), end.message);
    QCOMPARE(jobStatus(*sessions[0], *job)->exitCode, 75);
    QVERIFY(!groupAlive(pid_t(job->pid())));
    QVERIFY(!groupAlive(group1));
  }
};

QTEST_GUILESS_MAIN(TestJobRanks)
#include "tst_job_ranks.moc"
