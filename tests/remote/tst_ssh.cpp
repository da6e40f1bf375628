// SSH against a real OpenSSH server on 127.0.0.1: an unknown host key is shown
// and asked about before anything is sent, a changed one is refused, the right
// key logs in and a wrong one is refused by name, remote commands are built from
// quoted arguments (hostile names reach no shell), and netloom-train is found, or
// its absence reported.
#include <QTemporaryDir>
#include <QtTest>

#include "remote/shell.h"
#include "remote/ssh.h"
#include "sshd_fixture.h"

using namespace netloom;
using namespace netloom::remote;

namespace {

const std::string kHostile = "x'; touch PWNED; '$(touch PWNED2)`touch PWNED3`";

}  // namespace

class TestSsh : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  SshdFixture m_sshd;
  QString m_skip;

  HostSpec host() const { return m_sshd.host(m_dir.filePath("known_hosts")); }

 private slots:
  void initTestCase() { m_skip = m_sshd.start(m_dir.path()); }

  void quotingKeepsBytes() {
    QCOMPARE(shellQuote("plain"), std::string("'plain'"));
    QCOMPARE(shellQuote("it's"), std::string("'it'\\''s'"));
    QCOMPARE(shellCommand({"a b", "", "$x"}), std::string("'a b' '' '$x'"));
    // Through a real local shell: the argument arrives as it was.
    QProcess sh;
    sh.setWorkingDirectory(m_dir.path());
    sh.start("sh", {"-c", QString::fromStdString(shellCommand({"printf", "%s", kHostile}))});
    QVERIFY(sh.waitForFinished(testing::kHangMs));
    QCOMPARE(sh.readAllStandardOutput().toStdString(), kHostile);
    QVERIFY(!QFile::exists(m_dir.filePath("PWNED")));
    QVERIFY(!QFile::exists(m_dir.filePath("PWNED2")));
    QVERIFY(!QFile::exists(m_dir.filePath("PWNED3")));
  }

  void unknownHostKeyIsAskedAboutFirst() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    QFile::remove(m_dir.filePath("known_hosts"));
    int asked = 0;
    HostKey seen;
    auto refuse = [&](const HostKey& k) { return ++asked, seen = k, false; };
    auto s = openSession(host(), refuse);
    QVERIFY(!s.ok());
    QCOMPARE(asked, 1);
    QCOMPARE(QString::fromStdString(seen.fingerprint), m_sshd.fingerprint());
    QVERIFY(seen.fingerprint.rfind("SHA256:", 0) == 0);
    QVERIFY2(s.error().message.find("nothing was sent") != std::string::npos,
             s.error().message.c_str());
    QVERIFY(!QFile::exists(m_dir.filePath("known_hosts")) ||
            QFile(m_dir.filePath("known_hosts")).size() == 0);
    // Accepted once: written to known_hosts, and not asked again.
    auto accept = [&](const HostKey&) { return ++asked, true; };
    auto ok = openSession(host(), accept);
    QVERIFY2(ok.ok(), ok.ok() ? "" : ok.error().message.c_str());
    QCOMPARE(asked, 2);
    auto again = openSession(host(), accept);
    QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
    QCOMPARE(asked, 2);
  }

  void commandsAreQuotedArguments() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = openSession(host(), [](const HostKey&) { return true; });
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
    std::string dir = m_dir.path().toStdString();
    auto r = (*s)->run({"sh", "-c", "cd \"$1\" && printf %s \"$2\"", "sh", dir, kHostile});
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    QCOMPARE(r->exitStatus, 0);
    QCOMPARE(r->out, kHostile);
    auto echoed = (*s)->run({"printf", "%s", kHostile});
    QVERIFY(echoed.ok());
    QCOMPARE(echoed->out, kHostile);
    for (const char* f : {"PWNED", "PWNED2", "PWNED3"}) {
      QVERIFY(!QFile::exists(m_dir.filePath(f)));
      QVERIFY(!QFile::exists(QDir::home().filePath(f)));
    }
    // Standard input reaches the command.
    auto cat = (*s)->run({"cat"}, "through stdin\n");
    QVERIFY(cat.ok());
    QCOMPARE(cat->out, std::string("through stdin\n"));
    // A sanitized build's options reach what the host runs (the fixture's SetEnv).
    for (const char* var : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
      if (!qEnvironmentVariableIsSet(var)) continue;
      auto env = (*s)->run({"printenv", var});
      QVERIFY(env.ok());
      QVERIFY2(env->out == qEnvironmentVariable(var).toStdString() + "\n", env->out.c_str());
    }
  }

  void netloomTrainIsFoundOrItsAbsenceSaid() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = openSession(host(), [](const HostKey&) { return true; });
    QVERIFY(s.ok());
    auto v = (*s)->run({NETLOOM_TRAIN_EXE, "--version"});
    QVERIFY(v.ok());
    QCOMPARE(v->exitStatus, 0);
    QVERIFY2(v->out.find("netloom-train") != std::string::npos, v->out.c_str());
    auto missing = (*s)->run({m_dir.filePath("nowhere/netloom-train").toStdString(), "--version"});
    QVERIFY(missing.ok());
    QCOMPARE(missing->exitStatus, 127);
  }

  void wrongKeyIsRefusedByName() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    QProcess gen;
    QString other = m_dir.filePath("other_key");
    gen.start("ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-f", other});
    QVERIFY(gen.waitForFinished(testing::kHangMs));
    HostSpec h = host();
    h.identity = other.toStdString();
    auto s = openSession(h, [](const HostKey&) { return true; });
    QVERIFY(!s.ok());
    QVERIFY2(s.error().message.find(other.toStdString()) != std::string::npos,
             s.error().message.c_str());
    HostSpec nowhere = host();
    nowhere.port = 1;  // nothing listens there
    auto down = openSession(nowhere, [](const HostKey&) { return true; });
    QVERIFY(!down.ok());
    QVERIFY2(down.error().message.find("cannot connect") != std::string::npos,
             down.error().message.c_str());
  }

  // An encrypted key: its passphrase is asked for, once, naming the key; a wrong
  // one is said to be wrong.
  void encryptedKeyAsksForItsPassphrase() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    QString locked = m_dir.filePath("locked_key");
    QProcess gen;
    gen.start("ssh-keygen", {"-q", "-t", "ed25519", "-N", "s3cret phrase", "-f", locked});
    QVERIFY(gen.waitForFinished(testing::kHangMs) && gen.exitCode() == 0);
    QFile auth(m_dir.filePath("authorized_keys"));
    QFile pub(locked + ".pub");
    QVERIFY(auth.open(QIODevice::Append) && pub.open(QIODevice::ReadOnly));
    auth.write(pub.readAll());
    auth.close();
    HostSpec h = host();
    h.identity = locked.toStdString();
    QStringList asked;
    auto answer = [&](const std::string& what) {
      asked << QString::fromStdString(what);
      return std::string("s3cret phrase");
    };
    auto s = openSession(
        h, [](const HostKey&) { return true; }, answer);
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
    QCOMPARE(asked, QStringList{"passphrase of " + locked});
    auto wrong = openSession(
        h, [](const HostKey&) { return true; },
        [](const std::string&) { return std::string("nope"); });
    QVERIFY(!wrong.ok());
    QVERIFY2(wrong.error().message.find("wrong passphrase") != std::string::npos,
             wrong.error().message.c_str());
  }

  // Last: it replaces the server's key.
  void changedHostKeyIsRefused() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto first = openSession(host(), [](const HostKey&) { return true; });
    QVERIFY(first.ok());
    QString why = m_sshd.changeHostKey();
    QVERIFY2(why.isEmpty(), qPrintable(why));
    bool asked = false;
    auto s = openSession(host(), [&](const HostKey&) { return asked = true; });
    QVERIFY(!s.ok());
    QVERIFY(!asked);  // never offered for acceptance
    QVERIFY2(s.error().message.find("CHANGED") != std::string::npos, s.error().message.c_str());
    QVERIFY(s.error().message.find(m_sshd.fingerprint().toStdString()) != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestSsh)
#include "tst_ssh.moc"
