// Remote jobs against a real sshd on 127.0.0.1: submit the spirals project, stream
// its events to Finished and compare what arrived with the job's events.pb byte
// for byte, also while every SSH connection is cut three times mid-run; cancel;
// two jobs at once; a hostile project name creates no file; a missing remote
// netloom-train says so.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/io/project_file.h"
#include "remote/jobs.h"
#include "sshd_fixture.h"

using namespace netloom;
using namespace netloom::remote;

class TestJobs : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  SshdFixture m_sshd;
  QString m_skip;

  HostSpec host() const { return m_sshd.host(m_dir.filePath("known_hosts")); }

  std::unique_ptr<SshSession> session() {
    auto s = openSession(host(), [](const HostKey&) { return true; });
    return s ? std::move(*s) : nullptr;
  }

  JobSpec spec() const {
    JobSpec j;
    j.workDir = m_dir.filePath("work").toStdString();
    j.trainer = NETLOOM_TRAIN_EXE;
    j.extraArgs = {"--threads", "1"};
    return j;
  }

  static proto::Project spirals(int epochs) {
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
    p->mutable_train()->set_epochs(epochs);
    return *p;
  }

  // Streams a job to its end, reconnecting when the connection drops (`cuts`
  // times it is cut on purpose once events flow); returns every byte received.
  std::string stream(const Job& job, int cuts, int* reconnects) {
    std::string bytes;
    std::unique_ptr<SshSession> s = session();
    QElapsedTimer t;
    t.start();
    int64_t offset = 0;
    bool ended = false;
    while (!ended && t.elapsed() < 120000) {
      if (!s || !s->connected()) {
        QTest::qWait(100);  // back-off
        s = session();
        ++*reconnects;
        continue;
      }
      auto chunk = readJobEvents(*s, job, offset);
      if (!chunk) {
        s.reset();
        continue;
      }
      bytes += chunk->bytes;
      offset = chunk->events.nextOffset;
      for (const auto& e : chunk->events.events)
        ended = ended || e.has_finished() || e.has_failed();
      if (cuts > 0 && offset > 0 && !ended) {
        m_sshd.dropConnections();
        --cuts;
      }
      QTest::qWait(50);
    }
    return bytes;
  }

 private slots:
  void initTestCase() { m_skip = m_sshd.start(m_dir.path()); }

  void streamsToFinishedByteForByte() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    auto job = submitJob(*s, spirals(6), spec());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    QVERIFY(QString::fromStdString(job->id).startsWith("j"));
    QVERIFY(job->pid > 0);
    int reconnects = 0;
    std::string got = stream(*job, 0, &reconnects);
    QFile f(QString::fromStdString(job->dir + "/events.pb"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QByteArray remote = f.readAll();
    QCOMPARE(got.size(), size_t(remote.size()));
    QVERIFY(got == remote.toStdString());
    auto all = parseEvents(got, 0);
    QVERIFY(all.ok());
    QVERIFY(all->events.back().has_finished());
    QVERIFY(QFile::exists(QString::fromStdString(job->dir + "/pid")));
    QVERIFY(QFile::exists(QString::fromStdString(job->dir + "/started")));
  }

  void connectionCutThreeTimesLosesNothing() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    auto job = submitJob(*s, spirals(300), spec());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    s.reset();
    int reconnects = 0;
    std::string got = stream(*job, 3, &reconnects);
    QVERIFY2(reconnects >= 3, qPrintable(QString::number(reconnects)));
    QFile f(QString::fromStdString(job->dir + "/events.pb"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QByteArray remote = f.readAll();
    QCOMPARE(got.size(), size_t(remote.size()));
    QVERIFY(got == remote.toStdString());  // no gap, nothing twice
    auto all = parseEvents(got, 0);
    QVERIFY(all.ok() && all->events.back().has_finished());
  }

  void cancelAndTwoJobsAtOnce() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    auto a = submitJob(*s, spirals(3000), spec());
    auto b = submitJob(*s, spirals(3000), spec());
    QVERIFY(a.ok() && b.ok());
    QVERIFY(a->id != b->id && a->dir != b->dir);
    QTRY_VERIFY_WITH_TIMEOUT(QFile(QString::fromStdString(a->dir + "/events.pb")).size() > 2000,
                             30000);
    QTRY_VERIFY_WITH_TIMEOUT(QFile(QString::fromStdString(b->dir + "/events.pb")).size() > 2000,
                             30000);
    QVERIFY(*jobRunning(*s, *a) && *jobRunning(*s, *b));
    QVERIFY(signalJob(*s, *a, "KILL").ok());
    QTRY_VERIFY_WITH_TIMEOUT(!*jobRunning(*s, *a), 10000);
    QVERIFY(*jobRunning(*s, *b));  // the other job goes on
    auto events = readJobEvents(*s, *a, 0);
    QVERIFY(events.ok());
    QVERIFY(events->events.events.size() > 5);  // what it wrote before the kill stays readable
    QVERIFY(signalJob(*s, *b, "TERM").ok());    // stop: ends after the step, cleanly
    QTRY_VERIFY_WITH_TIMEOUT(!*jobRunning(*s, *b), 30000);
    auto rest = readJobEvents(*s, *b, 0);
    QVERIFY(rest.ok() && rest->events.events.back().has_finished());
    QVERIFY(!signalJob(*s, *a, "HUP; rm -rf /").ok());  // only known signals
  }

  // netloom-job, the terminal's client: submit --wait streams to the end and says
  // how it ended in its exit status; an unknown host key is refused unless the
  // user types yes.
  void netloomJobSubmitWait() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    QString hostArg = QString("%1@127.0.0.1:%2").arg(SshdFixture::userName()).arg(m_sshd.port());
    QString known = m_dir.filePath("job_known_hosts");
    QStringList common{
        "--host", hostArg,     "--identity",      m_sshd.userKey(), "--known-hosts",
        known,    "--trainer", NETLOOM_TRAIN_EXE, "--workdir",      m_dir.filePath("cli")};
    QProcess no;
    no.start(NETLOOM_JOB_EXE, QStringList{"submit"} + common +
                                  QStringList{NETLOOM_SOURCE_DIR "/projects/spirals.nlproj"});
    no.write("no\n");
    no.closeWriteChannel();
    QVERIFY(no.waitForFinished(60000));
    QCOMPARE(no.exitCode(), 1);
    QVERIFY(no.readAllStandardError().contains("not accepted"));
    QProcess p;
    p.start(NETLOOM_JOB_EXE, QStringList{"submit", "--wait"} + common +
                                 QStringList{NETLOOM_SOURCE_DIR "/projects/spirals.nlproj"});
    p.write("yes\n");
    p.closeWriteChannel();
    QVERIFY(p.waitForFinished(120000));
    QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(p.exitCode() == 0, qPrintable(QString::fromUtf8(p.readAllStandardError())));
    QVERIFY2(out.startsWith("j"), qPrintable(out));
    QString dir = out.section(' ', 1).trimmed();
    QVERIFY(QFile::exists(dir + "/events.pb"));
    QProcess bad;
    bad.start(NETLOOM_JOB_EXE, QStringList{"submit", "--wait"} + common.mid(0, 6) +
                                   QStringList{"--trainer", "/nowhere/netloom-train",
                                               NETLOOM_SOURCE_DIR "/projects/spirals.nlproj"});
    QVERIFY(bad.waitForFinished(60000));
    QCOMPARE(bad.exitCode(), 1);
    QVERIFY(bad.readAllStandardError().contains("was not found on the host"));
  }

  void hostileNamesAndMissingTrainer() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    proto::Project p = spirals(1);
    p.set_name("x'; touch PWNED; '$(touch PWNED2)");
    JobSpec j = spec();
    j.workDir = m_dir.filePath("work'; touch PWNED3; '").toStdString();
    auto job = submitJob(*s, p, j);
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    int reconnects = 0;
    std::string got = stream(*job, 0, &reconnects);
    QVERIFY(!got.empty());
    for (const char* f : {"PWNED", "PWNED2", "PWNED3"}) {
      QVERIFY(!QFile::exists(m_dir.filePath(f)));
      QVERIFY(!QFile::exists(QDir::home().filePath(f)));
    }
    JobSpec missing = spec();
    missing.trainer = m_dir.filePath("nowhere/netloom-train").toStdString();
    auto none = submitJob(*s, spirals(1), missing);
    QVERIFY(!none.ok());
    QVERIFY2(none.error().message.find("was not found on the host") != std::string::npos,
             none.error().message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestJobs)
#include "tst_jobs.moc"
