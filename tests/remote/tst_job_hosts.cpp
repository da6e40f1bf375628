// Hosts as users set them up, against a real sshd on 127.0.0.1: through a jump host,
// an alias of ssh_config's, saved hosts and the job registry (private files, refused
// names), environment lines that run before each command, and netloom-job, the
// terminal's client.
#include <sys/stat.h>

#include <QProcess>
#include <QProcessEnvironment>
#include <QtTest>

#include "engine/io/project_file.h"
#include "loopback_host.h"
#include "remote/hosts.h"

using namespace netloom;
using namespace netloom::remote;
using namespace netloom::testing;

class TestJobHosts : public QObject, LoopbackHost {
  Q_OBJECT

 private slots:
  void initTestCase() { m_skip = m_sshd.start(m_dir.path()); }

  void throughAJumpHost() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    if (!QFile::exists("/usr/bin/ssh")) QSKIP("no OpenSSH client (openssh-client)");
    QVERIFY(session());  // the key is known by now
    remotepb::Host h = host();
    h.set_jump(SshdFixture::userName().toStdString() +
               "@127.0.0.1:" + std::to_string(m_sshd.port()));
    auto s = session(h);
    QVERIFY(s);
    auto info = probeHost(*s, h);
    QVERIFY(info.ok() && info->trainerVersion == trainerVersionLine());
    remotepb::Host bad = host();
    bad.set_jump("nobody-here@127.0.0.1:1");
    QVERIFY(!session(bad));
  }

  // An alias of ~/.ssh/config's: its HostName, Port, User and IdentityFile apply.
  void sshConfigIsHonoured() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    QVERIFY(session());  // the key is known by now
    QFile cfg(m_dir.filePath("ssh_config"));
    QVERIFY(cfg.open(QIODevice::WriteOnly));
    cfg.write(
        QString("Host trainbox\n  HostName 127.0.0.1\n  Port %1\n  User %2\n  IdentityFile %3\n")
            .arg(m_sshd.port())
            .arg(SshdFixture::userName(), m_sshd.userKey())
            .toUtf8());
    cfg.close();
    HostSpec spec;
    spec.address = "trainbox";
    spec.knownHosts = m_dir.filePath("known_hosts").toStdString();
    spec.sshConfig = cfg.fileName().toStdString();
    auto s = openSession(spec, nullptr);
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
    auto r = (*s)->run({"printf", "%s", "via config"});
    QVERIFY(r.ok() && r->out == "via config");
  }

  void savedHostsAndTheJobRegistry() {
    const std::string path = m_dir.filePath("config/netloom/hosts.txtpb").toStdString();
    remotepb::HostList list;
    *list.add_hosts() = host();
    list.mutable_hosts(0)->add_env("export NETLOOM_TEST_ENV=1");
    QVERIFY2(saveHosts(path, list).ok(), errorOf(saveHosts(path, list)).c_str());
    struct stat st;
    QCOMPARE(::stat(path.c_str(), &st), 0);
    QCOMPARE(int(st.st_mode & 0777), 0600);
    auto back = loadHosts(path);
    QVERIFY(back.ok());
    QCOMPARE(back->hosts(0).SerializeAsString(), list.hosts(0).SerializeAsString());
    QCOMPARE(resolveHost("loop", *back)->port(), m_sshd.port());
    auto direct = resolveHost("ann@10.0.0.7:2200", *back);
    QVERIFY(direct.ok() && direct->user() == "ann" && direct->port() == 2200);
    QVERIFY(!resolveHost("-oProxyCommand=x", *back).ok());
    QVERIFY(!resolveHost("a b", *back).ok());
    remotepb::HostList twice = list;
    *twice.add_hosts() = host();
    QVERIFY(!saveHosts(path, twice).ok());  // two hosts of one name
    QFile broken(QString::fromStdString(path));
    QVERIFY(broken.open(QIODevice::WriteOnly));
    broken.write("hosts {\n  name: \"x\"\n  bogus: 1\n}\n");
    broken.close();
    auto bad = loadHosts(path);
    QVERIFY(!bad.ok());
    QVERIFY2(bad.error().message.find("line 3") != std::string::npos, bad.error().message.c_str());
    // The registry: one private file per job.
    remotepb::JobRecord rec;
    rec.set_id(newJobId());
    rec.set_dir("/w/jobs/" + rec.id());
    const std::string jobs = m_dir.filePath("data/netloom/jobs").toStdString();
    QVERIFY(saveJobRecord(jobs, rec).ok());
    QCOMPARE(::stat((jobs + "/" + rec.id() + ".txtpb").c_str(), &st), 0);
    QCOMPARE(int(st.st_mode & 0777), 0600);
    QCOMPARE(loadJobRecord(jobs, rec.id())->dir(), rec.dir());
    QVERIFY(!loadJobRecord(jobs, "../../etc/passwd").ok());
    rec.set_id("x/../y");
    QVERIFY(!saveJobRecord(jobs, rec).ok());
  }

  void environmentLinesRunFirst() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    remotepb::Host h = host();
    h.add_env("export NETLOOM_ENV_CHECK=from-env-line");
    h.add_env("echo this goes to stderr");
    auto s = session(h);
    QVERIFY(s);
    auto r = s->run({"sh", "-c", "printf %s \"$NETLOOM_ENV_CHECK\""});
    QVERIFY(r.ok());
    QCOMPARE(r->out, std::string("from-env-line"));
    QVERIFY(r->err.find("this goes to stderr") != std::string::npos);
  }

  // netloom-job, the terminal's client, with a saved host and the job registry in
  // private folders of the test: submit --wait, list, attach ID, fetch ID; an
  // unknown host key is refused unless the user types yes.
  void netloomJobCommands() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    const QProcessEnvironment env =
        jobCliEnvironment(m_dir.filePath("cli-config"), m_dir.filePath("cli-data"));
    remotepb::HostList list;
    remotepb::Host h = host();
    h.set_known_hosts(m_dir.filePath("cli_known_hosts").toStdString());
    h.set_work_dir(m_dir.filePath("cli").toStdString());
    *list.add_hosts() = h;
    QVERIFY(saveHosts(m_dir.filePath("cli-config/netloom/hosts.txtpb").toStdString(), list).ok());
    auto job = [&](const QStringList& args, const QByteArray& input = {}) {
      return runJobCli(this, env, args, input, 120000);
    };
    const QString project = NETLOOM_SOURCE_DIR "/projects/spirals.nlproj";
    QProcess* no = job({"submit", "--host", "loop", project}, "no\n");
    QCOMPARE(no->exitCode(), 1);
    QVERIFY(no->readAllStandardError().contains("not accepted"));
    QProcess* p = job({"submit", "--wait", "--host", "loop", project}, "yes\n");
    QString out = QString::fromUtf8(p->readAllStandardOutput());
    QVERIFY2(p->exitCode() == 0, qPrintable(QString::fromUtf8(p->readAllStandardError())));
    QString id = out.section(' ', 0, 0);
    QVERIFY2(isJobId(id.toStdString()), qPrintable(out));
    // Both lists have a state, a host and a project column.
    const QString listed = QString::fromUtf8(job({"list"})->readAllStandardOutput());
    QVERIFY2(listed.startsWith("JOB ") && listed.contains("STATE") &&
                 listed.contains(QRegularExpression(id + " +finished +\\S+ +loop .* Spirals")),
             qPrintable(listed));
    const QString onHost =
        QString::fromUtf8(job({"list", "--host", "loop"})->readAllStandardOutput());
    QVERIFY2(onHost.contains(QRegularExpression(id + " +finished .* loop .* Spirals")),
             qPrintable(onHost));
    // Attached to a job that ended: where it got to and how it ended, not every step.
    QProcess* attach = job({"attach", id});
    QCOMPARE(attach->exitCode(), 0);
    const QString attached = QString::fromUtf8(attach->readAllStandardError());
    QVERIFY2(attached.contains("now at epoch") && attached.contains("finished:") &&
                 !attached.contains("epoch 1/"),
             qPrintable(attached));
    // Stopped from here once it trains: the host's list says where it stopped.
    const QString longPath = m_dir.filePath("cli-long.nlproj");
    // It never ends on its own: only the stop below ends it.
    QVERIFY(saveProject(longPath.toStdString(), spirals(testing::kEndlessEpochs)).ok());
    QProcess* submitted = job({"submit", "--host", "loop", longPath});
    QVERIFY2(submitted->exitCode() == 0,
             qPrintable(QString::fromUtf8(submitted->readAllStandardError())));
    const QStringList idAndDir = QString::fromUtf8(submitted->readAllStandardOutput()).split(' ');
    QCOMPARE(idAndDir.size(), 2);
    const QString longEvents = idAndDir[1].trimmed() + "/events.pb";
    QVERIFY(waitUntil([&] { return QFileInfo(longEvents).size() > 2000; }));
    QProcess* stop = job({"stop", idAndDir[0]});
    QCOMPARE(stop->exitCode(), 0);
    QVERIFY(stop->readAllStandardOutput().contains("asked to stop"));
    QCOMPARE(job({"attach", idAndDir[0]})->exitCode(), 0);  // follows it to its end
    QString hostList = QString::fromUtf8(job({"list", "--host", "loop"})->readAllStandardOutput());
    QVERIFY2(hostList.contains(QRegularExpression(idAndDir[0] + " +stopped at step [1-9][0-9]* ")),
             qPrintable(hostList));
    QProcess* fetch = job({"fetch", id, "--to", m_dir.filePath("cli-fetch")});
    QCOMPARE(fetch->exitCode(), 0);
    QVERIFY(QFile::exists(m_dir.filePath("cli-fetch/weights.safetensors")));
    QProcess* test = job({"test", "--host", "loop"});
    QCOMPARE(test->exitCode(), 0);
    QVERIFY(test->readAllStandardOutput().contains("CPUs"));
    QProcess* bad =
        job({"submit", "--wait", "--host", "loop", "--trainer", "/nowhere/netloom-train", project});
    QCOMPARE(bad->exitCode(), 1);
    QVERIFY(bad->readAllStandardError().contains("was not found on the host"));
    QProcess* unknown = job({"attach", "j20000101-000000-00000000"});
    QCOMPARE(unknown->exitCode(), 1);
    QVERIFY(unknown->readAllStandardError().contains("no job"));
  }
};

QTEST_GUILESS_MAIN(TestJobHosts)
#include "tst_job_hosts.moc"
