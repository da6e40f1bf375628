// A real Slurm cluster for tests: Debian's munged, slurmctld and slurmd on
// 127.0.0.1 with a generated slurm.conf (one node with this machine's CPUs; a
// partition "main", the default, and "short" with a 1-minute time limit), every
// file (state, spool, logs, pid files, the munge key and socket) in one folder and
// ports of its own. The daemons run as root, as the cluster's users would not, and
// as this process's children, stopped by pid when it ends (or dies). Clients reach
// it with SLURM_CONF set (env()). Settings that make tests fast: KillWait=2,
// MinJobAge=10, munge credentials that expire in 10 s (a requeued job would wait
// 121 s otherwise), and no cgroups (proctrack/linuxproc, task/none).
#pragma once

#include <sys/prctl.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QString>
#include <QSysInfo>
#include <QThread>
#include <csignal>

#include "../common/wait.h"
#include "sshd_fixture.h"

class SlurmFixture {
 public:
  ~SlurmFixture() { stop(); }

  // Empty when the cluster is up with an idle node; else why it cannot be (the
  // tests then skip, saying so).
  QString start(const QString& dir) {
    m_dir = dir;
    for (const char* exe : {"/usr/sbin/munged", "/usr/sbin/mungekey", "/usr/sbin/slurmctld",
                            "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/bin/squeue"})
      if (!QFile::exists(exe))
        return QString("no %1 (Debian's slurm-wlm and munge; scripts/setup.sh installs them)")
            .arg(exe);
    if (::geteuid() != 0) return "the Slurm daemons need root, and this test runs as a user";
    QDir().mkpath(dir + "/state");
    QDir().mkpath(dir + "/spool");
    QFile::remove(dir + "/munge.key");
    if (QProcess::execute("/usr/sbin/mungekey", {"-c", "-k", dir + "/munge.key"}) != 0)
      return "mungekey could not make a key";
    QFile::setPermissions(dir + "/munge.key", QFile::ReadOwner | QFile::WriteOwner);
    m_munged = daemon("/usr/sbin/munged",
                      {"-F", "-f", "--key-file=" + dir + "/munge.key", "--socket=" + socket(),
                       "--pid-file=" + dir + "/munged.pid", "--log-file=" + dir + "/munged.log",
                       "--seed-file=" + dir + "/munge.seed"});
    netloom::testing::waitUntil(
        [&] { return QFile::exists(socket()) || m_munged->state() == QProcess::NotRunning; });
    if (!QFile::exists(socket())) return "munged did not start: " + log("munged.log");
    const int ctldPort = SshdFixture::freePort(), slurmdPort = SshdFixture::freePort();
    QFile conf(config());
    if (!conf.open(QIODevice::WriteOnly)) return "cannot write slurm.conf";
    conf.write(QString("ClusterName=netloom\nSlurmctldHost=localhost(127.0.0.1)\n"
                       "SlurmUser=root\nSlurmdUser=root\nSlurmctldPort=%1\nSlurmdPort=%2\n"
                       "StateSaveLocation=%3/state\nSlurmdSpoolDir=%3/spool\n"
                       "SlurmctldPidFile=%3/slurmctld.pid\nSlurmdPidFile=%3/slurmd.pid\n"
                       "SlurmctldLogFile=%3/slurmctld.log\nSlurmdLogFile=%3/slurmd.log\n"
                       "AuthType=auth/munge\nAuthInfo=socket=%4,cred_expire=10\n"
                       "CredType=cred/munge\nProctrackType=proctrack/linuxproc\n"
                       "TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
                       "AccountingStorageType=accounting_storage/none\n"
                       "JobCompType=jobcomp/filetxt\nJobCompLoc=%3/jobcomp.txt\n"
                       "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
                       "KillWait=2\nMinJobAge=10\nJobRequeue=1\nReturnToService=2\n"
                       "EnforcePartLimits=ALL\nMpiDefault=none\n"
                       "NodeName=netloom1 NodeHostname=%5 NodeAddr=127.0.0.1 CPUs=%6 "
                       "State=UNKNOWN\n"
                       "PartitionName=main Nodes=netloom1 Default=YES MaxTime=INFINITE State=UP\n"
                       "PartitionName=short Nodes=netloom1 MaxTime=1 State=UP\n")
                   .arg(ctldPort)
                   .arg(slurmdPort)
                   .arg(dir, socket(), QSysInfo::machineHostName())
                   .arg(QThread::idealThreadCount())
                   .toUtf8());
    conf.close();
    m_ctld = daemon("/usr/sbin/slurmctld", {"-D", "-i", "-f", config()});
    m_slurmd = daemon("/usr/sbin/slurmd", {"-D", "-f", config(), "-N", "netloom1"});
    netloom::testing::waitUntil([&] {
      return nodeState() == "idle" || m_ctld->state() == QProcess::NotRunning ||
             m_slurmd->state() == QProcess::NotRunning;
    });
    if (nodeState() != "idle")
      return "the Slurm node did not come up (" + nodeState() + "): " + log("slurmctld.log") +
             log("slurmd.log");
    return {};
  }

  // Cancels every job, waits for the queue to empty, then stops the daemons.
  void stop() {
    if (m_ctld && m_ctld->state() == QProcess::Running) {
      run("scancel", {"--full", "--user=root"});
      netloom::testing::waitUntil([&] { return run("squeue", {"-h"}).trimmed().isEmpty(); });
    }
    for (QProcess** p : {&m_slurmd, &m_ctld, &m_munged})
      if (*p) {
        (*p)->terminate();
        if (!(*p)->waitForFinished(10000)) (*p)->kill(), (*p)->waitForFinished(2000);
        delete *p;
        *p = nullptr;
      }
  }

  QString config() const { return m_dir + "/slurm.conf"; }
  // The line a host's env runs so that Slurm's commands find this cluster.
  std::string env() const { return "export SLURM_CONF='" + config().toStdString() + "'"; }

  // A Slurm command run here, against this cluster: its standard output.
  QString run(const QString& program, const QStringList& args) const {
    QProcess p;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("SLURM_CONF", config());
    p.setProcessEnvironment(e);
    p.start(program, args);
    p.waitForFinished(netloom::testing::kHangMs);
    return QString::fromUtf8(p.readAllStandardOutput());
  }

 private:
  QString socket() const { return m_dir + "/munge.sock"; }
  QString nodeState() const {
    return run("sinfo", {"-h", "-n", "netloom1", "-o", "%T"}).trimmed().section('\n', 0, 0);
  }
  QString log(const QString& name) const {
    QFile f(m_dir + "/" + name);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll().right(600)) : QString();
  }
  QProcess* daemon(const QString& program, const QStringList& args) {
    auto* p = new QProcess;
    p->setProcessChannelMode(QProcess::MergedChannels);
    p->setStandardOutputFile(m_dir + "/" + QFileInfo(program).fileName() + ".out");
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("SLURM_CONF", config());
    p->setProcessEnvironment(e);
    // A test that crashes takes its daemons with it.
    p->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
    p->start(program, args);
    p->waitForStarted(netloom::testing::kHangMs);
    return p;
  }

  QString m_dir;
  QProcess* m_munged = nullptr;
  QProcess* m_ctld = nullptr;
  QProcess* m_slurmd = nullptr;
};
