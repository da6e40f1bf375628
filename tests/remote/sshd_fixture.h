// A real OpenSSH server for tests: Debian's sshd on 127.0.0.1 at a free port, with
// its own host key, a user key allowed to log in as the current user, and a
// config of its own (no PAM, no strict modes, so keys may live under /tmp).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QString>
#include <csignal>

#include "../common/wait.h"
#include "remote/remote.pb.h"
#include "remote/ssh.h"

class SshdFixture {
 public:
  ~SshdFixture() { stop(); }

  // Empty when sshd runs; else why it cannot (the tests then skip, saying so).
  QString start(const QString& dir) {
    m_dir = dir;
    if (!QFile::exists("/usr/sbin/sshd")) return "no /usr/sbin/sshd (Debian's openssh-server)";
    if (!QDir("/run/sshd").exists() && !QDir().mkpath("/run/sshd"))
      return "/run/sshd does not exist and cannot be made";
    if (QString why = keygen(hostKey()); !why.isEmpty()) return why;
    if (QString why = keygen(userKey()); !why.isEmpty()) return why;
    QFile::remove(dir + "/authorized_keys");
    if (!QFile::copy(userKey() + ".pub", dir + "/authorized_keys")) return "cannot write keys";
    m_port = freePort();
    QFile cfg(dir + "/sshd_config");
    if (!cfg.open(QIODevice::WriteOnly)) return "cannot write sshd_config";
    cfg.write(QString("Port %1\nListenAddress 127.0.0.1\nHostKey %2\nPidFile %3/sshd.pid\n"
                      "AuthorizedKeysFile %3/authorized_keys\nUsePAM no\nStrictModes no\n"
                      "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                      "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
                      "LogLevel FATAL\nSubsystem sftp internal-sftp\n")
                  .arg(m_port)
                  .arg(hostKey(), dir)
                  .toUtf8());
    // sshd starts sessions with an environment of its own: a sanitized build's
    // options reach the jobs it runs only this way. One line: sshd keeps the first
    // SetEnv it reads.
    QString setEnv;
    for (const char* var : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
      if (qEnvironmentVariableIsSet(var))
        setEnv += QString(" \"%1=%2\"").arg(var, qEnvironmentVariable(var));
    if (!setEnv.isEmpty()) cfg.write(("SetEnv" + setEnv + "\n").toUtf8());
    cfg.close();
    return launch();
  }

  // A new host key and a restart: what a reinstalled (or impersonated) host shows.
  QString changeHostKey() {
    stop();
    QFile::remove(hostKey());
    QFile::remove(hostKey() + ".pub");
    if (QString why = keygen(hostKey()); !why.isEmpty()) return why;
    return launch();
  }

  void stop() {
    if (m_sshd) {
      m_sshd->terminate();
      if (!m_sshd->waitForFinished(5000)) m_sshd->kill(), m_sshd->waitForFinished(2000);
      delete m_sshd;
      m_sshd = nullptr;
    }
  }

  // Kills every per-connection sshd (the children of the listener): every client
  // connection drops, as on a network cut.
  void dropConnections() {
    if (!m_sshd) return;
    QProcess::execute("pkill", {"-KILL", "-P", QString::number(m_sshd->processId())});
  }

  int port() const { return m_port; }
  // How a client reaches this server as the current user, with `knownHosts`.
  netloom::remote::HostSpec host(const QString& knownHosts) const {
    netloom::remote::HostSpec h;
    h.address = "127.0.0.1";
    h.port = m_port;
    h.user = userName().toStdString();
    h.identity = userKey().toStdString();
    h.knownHosts = knownHosts.toStdString();
    h.readSshConfig = false;
    return h;
  }
  // The same as a saved host named `name` that runs `trainer` with jobs under `workDir`.
  netloom::remotepb::Host savedHost(const QString& knownHosts, const std::string& name,
                                    const std::string& trainer, const QString& workDir) const {
    netloom::remote::HostSpec s = host(knownHosts);
    netloom::remotepb::Host h;
    h.set_name(name);
    h.set_address(s.address);
    h.set_port(s.port);
    h.set_user(s.user);
    h.set_identity(s.identity);
    h.set_known_hosts(s.knownHosts);
    h.set_trainer(trainer);
    h.set_work_dir(workDir.toStdString());
    return h;
  }
  QString hostKey() const { return m_dir + "/host_key"; }
  QString userKey() const { return m_dir + "/user_key"; }
  static QString userName() {
    const passwd* pw = getpwuid(getuid());
    return pw ? QString(pw->pw_name) : QString();
  }
  // The host key's SHA-256 fingerprint as ssh-keygen prints it.
  QString fingerprint() const {
    QProcess p;
    p.start("ssh-keygen", {"-l", "-E", "sha256", "-f", hostKey() + ".pub"});
    p.waitForFinished(netloom::testing::kHangMs);
    return QString::fromUtf8(p.readAllStandardOutput()).section(' ', 1, 1);
  }

 private:
  static QString keygen(const QString& path) {
    QProcess p;
    p.start("ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-f", path});
    if (!p.waitForFinished(netloom::testing::kHangMs) || p.exitCode() != 0)
      return "ssh-keygen failed: " + QString::fromUtf8(p.readAllStandardError());
    return {};
  }

  // A port nothing listens on now (for a server about to start).
 public:
  static int freePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  }

 private:
  static bool accepts(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

  QString launch() {
    m_sshd = new QProcess;
    m_sshd->setProcessChannelMode(QProcess::ForwardedErrorChannel);
    // A test that crashes takes its sshd with it.
    m_sshd->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
    m_sshd->start("/usr/sbin/sshd", {"-D", "-e", "-f", m_dir + "/sshd_config"});
    if (!m_sshd->waitForStarted(netloom::testing::kHangMs)) return "sshd did not start";
    netloom::testing::waitUntil(
        [&] { return accepts(m_port) || m_sshd->state() == QProcess::NotRunning; });
    if (accepts(m_port)) return {};
    if (m_sshd->state() == QProcess::NotRunning) return "sshd exited at once";
    return "sshd does not accept connections";
  }

  QString m_dir;
  int m_port = 0;
  QProcess* m_sshd = nullptr;
};
