#include "gui/remote_target.h"

#include <QCoreApplication>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QMetaObject>

#include "engine/io/output_file.h"
#include "engine/io/project_file.h"
#include "remote/follow.h"
#include "remote/hosts.h"
#include "remote/jobs.h"
#include "remote/slurm.h"

namespace netloom::gui {

using namespace netloom::remote;

namespace {

const char* kJobFile = "remote.txtpb";

// Runs `f` on `target`'s thread (the GUI thread) and waits for its answer.
template <typename T>
T askOnGuiThread(QObject* target, const std::function<T()>& f) {
  T answer{};
  if (QThread::currentThread() == target->thread()) return f();
  QMetaObject::invokeMethod(
      target, [&] { answer = f(); }, Qt::BlockingQueuedConnection);
  return answer;
}

}  // namespace

std::optional<remotepb::JobRecord> remoteJobOf(const QString& runDir) {
  QFile f(runDir + "/" + kJobFile);
  if (!f.open(QIODevice::ReadOnly)) return std::nullopt;
  remotepb::JobRecord job;
  if (!recordFromText(f.readAll().toStdString(), f.fileName().toStdString(), job))
    return std::nullopt;
  return job;
}

std::optional<FollowableRun> followableRun(const std::vector<RunRecord>& runs,
                                           const QString& runDir) {
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->state() != RunRecord::State::Running || (!runDir.isEmpty() && it->dir != runDir))
      continue;
    if (auto job = remoteJobOf(it->dir)) return FollowableRun{&*it, *job};
  }
  return std::nullopt;
}

QString RemoteTarget::jobsRegistry() {
  return QString::fromStdString(defaultJobsDir());
}

RemoteTarget::RemoteTarget(const remotepb::Host& host, QObject* parent)
    : RunTarget(parent), m_host(host) {}

RemoteTarget::~RemoteTarget() {
  detach();
}

QString RemoteTarget::kind() const {
  return tr("on %1").arg(QString::fromStdString(hostTitle(m_host)));
}

Result<remotepb::JobRecord> RemoteTarget::submit(SshSession& s, const proto::Project& project,
                                                 const SubmitOptions& o) {
  return submitJob(s, m_host, project, o);
}

QString SlurmTarget::schedulerState() const {
  std::lock_guard lock(m_mutex);
  return m_schedulerState;
}

QString SlurmTarget::kind() const {
  return tr("through Slurm on %1").arg(QString::fromStdString(hostTitle(host())));
}

Result<remotepb::JobRecord> SlurmTarget::submit(SshSession& s, const proto::Project& project,
                                                const SubmitOptions& o) {
  return submitSlurm(s, host(), project, o);
}

std::unique_ptr<RemoteTarget> makeHostTarget(const remotepb::Host& host) {
  if (host.has_slurm()) return std::make_unique<SlurmTarget>(host);
  return std::make_unique<RemoteTarget>(host);
}

void RemoteTarget::launch(std::function<Status()> work) {
  m_detach = false;
  m_paused = false;
  {
    std::lock_guard lock(m_mutex);
    m_signals.clear();
  }
  m_thread = QThread::create([this, work] {
    Status s = work();
    const bool ok = s.ok();
    const QString why = ok ? QString() : QString::fromStdString(s.message());
    QThread* self = QThread::currentThread();
    QMetaObject::invokeMethod(this, [this, ok, why, self] {
      // Detached meanwhile: detach() owns the thread, and nobody waits for an end.
      if (m_thread != self) return;
      m_thread->wait();
      delete m_thread;
      m_thread = nullptr;
      m_paused = false;
      emit ended(ok, why);
    });
  });
  m_thread->start();
}

Status RemoteTarget::start(const RunRequest& r) {
  if (m_thread) return makeError("a run is in progress");
  if (!r.resume.isEmpty())
    return makeError("resuming from a checkpoint runs on this computer; a remote run starts fresh");
  auto project = loadProject((r.runDir + "/project.nlproj").toStdString());
  if (!project) return project.error();
  SubmitOptions o;
  o.projectDir = r.projectDir.toStdString();
  o.localRun = r.runDir.toStdString();
  o.launch = false;  // follow() starts it once its stream listens
  // The device reaches the host's netloom-train as --devices.
  o.args = {"--norms", "--devices",
            project->train().device().empty() ? "cpu" : project->train().device()};
  if (r.maxSteps > 0) o.args.insert(o.args.end(), {"--max-steps", std::to_string(r.maxSteps)});
  if (r.threads > 0) o.args.insert(o.args.end(), {"--threads", std::to_string(r.threads)});
  const QString runDir = r.runDir;
  // At most every 1/200th of a file (and its start and end): a real bar, not a flood.
  o.progress = [this, shown = uint64_t(0)](const std::string& name, uint64_t done,
                                           uint64_t total) mutable {
    if (done != 0 && done != total && done - shown < std::max<uint64_t>(total / 200, 1)) return;
    shown = done;
    emit transfer(QString::fromStdString(name), qint64(done), qint64(total));
  };
  o.ranksPerHost = m_ranksPerHost;
  if (int(m_rankHosts.size()) * m_ranksPerHost > 1) return startRanks(*project, o, runDir);
  launch([this, project = *project, o, runDir]() -> Status {
    // A run that never started ends its stream saying why, so its history is honest.
    auto neverStarted = [&](const Error& e) {
      recordFailure(runDir + "/events.pb", QString::fromStdString(e.message));
      return Status(e);
    };
    emit notice(tr("Connecting to %1…").arg(QString::fromStdString(hostTitle(m_host))));
    auto session = connectTo(m_host);
    if (!session) return neverStarted(session.error());
    emit notice(tr("Submitting to %1…").arg(QString::fromStdString(hostTitle(m_host))));
    auto job = submit(**session, project, o);
    if (!job) return neverStarted(job.error());
    // Recorded before anything else happens, so a crash here still finds the job.
    if (Status s = recordJob(runDir, *job); !s) return neverStarted(s.error());
    emit submitted(QString::fromStdString(job->id()));
    return follow(runDir, *job, std::move(*session));
  });
  return {};
}

Status RemoteTarget::startRanks(const proto::Project& project, const SubmitOptions& o,
                                const QString& runDir) {
  launch([this, project, o, runDir]() -> Status {
    auto neverStarted = [&](const Error& e) {
      recordFailure(runDir + "/events.pb", QString::fromStdString(e.message));
      return Status(e);
    };
    std::vector<std::unique_ptr<SshSession>> sessions;
    std::vector<SshSession*> raw;
    for (const remotepb::Host& h : m_rankHosts) {
      emit notice(tr("Connecting to %1…").arg(QString::fromStdString(hostTitle(h))));
      auto session = connectTo(h);
      if (!session) return neverStarted(session.error());
      raw.push_back(session->get());
      sessions.push_back(std::move(*session));
    }
    emit notice(tr("Submitting %1 ranks…").arg(int(m_rankHosts.size()) * m_ranksPerHost));
    double timeout = project.train().distributed().timeout_s() > 0
                         ? project.train().distributed().timeout_s()
                         : 60.0;
    auto job = submitRanks(raw, m_rankHosts, project, o, timeout);
    if (!job) return neverStarted(job.error());
    if (Status s = recordJob(runDir, *job); !s) return neverStarted(s.error());
    emit submitted(QString::fromStdString(job->id()));
    std::unique_ptr<SshSession> first = std::move(sessions[0]);
    sessions.clear();  // rank 0's session follows the job
    return follow(runDir, *job, std::move(first));
  });
  return {};
}

Status RemoteTarget::attach(const QString& runDir, const remotepb::JobRecord& job) {
  if (m_thread) return makeError("a run is in progress");
  m_host = job.host();
  launch([this, runDir, job] { return follow(runDir, job, nullptr); });
  return {};
}

Status RemoteTarget::follow(const QString& runDir, const remotepb::JobRecord& job,
                            std::unique_ptr<remote::SshSession> session) {
  const std::string mirror = (runDir + "/events.pb").toStdString();
  // Only whole records are ever appended, so the file's size is where to resume.
  int64_t offset = 0;
  if (QFileInfo::exists(runDir + "/events.pb")) {
    auto held = readEvents(mirror);
    if (!held) return held.error();
    offset = held->nextOffset;
    if (QFileInfo(runDir + "/events.pb").size() != offset)
      QFile::resize(runDir + "/events.pb", offset);
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(mirror.c_str(), "ab"),
                                                      std::fclose);
  if (!out) return makeError(mirror + ": cannot write");
  FollowHooks hooks;
  Status writeError;
  hooks.onEvents = [&](int64_t, const std::string& bytes, const std::vector<proto::TrainEvent>&) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), out.get()) != bytes.size() ||
        std::fflush(out.get()) != 0)
      writeError = makeError(mirror + ": cannot write (disk full?)"), setDetach();
    else
      emit progressed();
  };
  hooks.onNotice = [this](const std::string& text) { emit notice(QString::fromStdString(text)); };
  hooks.launch = [this, runDir](SshSession& s, remotepb::JobRecord& j) -> Status {
    if (Status st = launchJob(s, j); !st) {
      recordFailure(runDir + "/events.pb", QString::fromStdString(st.message()));
      return st;
    }
    return recordJob(runDir, j);
  };
  hooks.cancelled = [this] { return m_detach.load(); };
  hooks.waitCancelled = [this](std::chrono::milliseconds limit) {
    std::unique_lock lock(m_detachMutex);
    return m_detached.wait_for(lock, limit, [this] { return m_detach.load(); });
  };
  hooks.nextSignal = [this] { return takeSignal(); };
  hooks.wake = &m_wake;
  hooks.passphrase = secretPrompt();
  hooks.onStatus = [this, job](const JobStatus& st) {
    const QString state = QString::fromStdString(st.describe());
    {
      std::lock_guard lock(m_mutex);
      m_schedulerState = state;
    }
    emit stateChanged();
    emit notice(tr("Slurm job %1: %2").arg(QString::fromStdString(job.slurm_job_id()), state));
  };
  auto end = followJob(job, offset, std::move(session), hooks);
  out.reset();
  if (!writeError) return writeError;
  if (!end) return end.error();
  if (end->how == FollowEnd::How::Detached) return {};
  // What the run produced comes home: the final weights and checkpoints, for
  // evaluation and resuming here.
  emit notice(
      tr("Downloading the weights and checkpoints of %1…").arg(QString::fromStdString(job.id())));
  auto again = openSession(hostSpec(job.host()), nullptr, hooks.passphrase);
  if (again) {
    if (Status s = fetchJob(**again, job, runDir.toStdString(), true); !s)
      emit notice(QString::fromStdString(s.message()));
  } else {
    emit notice(QString::fromStdString(again.error().message));
  }
  if (end->how == FollowEnd::How::Failed) return makeError(end->message);
  return {};
}

Result<std::unique_ptr<SshSession>> RemoteTarget::connectTo(const remotepb::Host& host) {
  return openSession(
      hostSpec(host),
      [this](const HostKey& k) {
        return acceptHostKey && askOnGuiThread<bool>(this, [&] { return acceptHostKey(k); });
      },
      secretPrompt());
}

Status RemoteTarget::deleteJob(const remotepb::JobRecord& job) {
  auto session = connectTo(job.host());
  if (!session) return session.error();
  return remote::deleteJob(**session, job);
}

Status RemoteTarget::fetchCheckpoints(const RunRecord& run) {
  auto job = remoteJobOf(run.dir);
  if (!job) return makeError("run " + run.name.toStdString() + " has no job record");
  auto session = connectTo(job->host());
  if (!session) return session.error();
  return fetchJob(**session, *job, run.dir.toStdString(), true);
}

std::function<std::string(const std::string&)> RemoteTarget::secretPrompt() {
  return [this](const std::string& what) {
    if (!askPassphrase) return std::string();
    return askOnGuiThread<QString>(this,
                                   [&] { return askPassphrase(QString::fromStdString(what)); })
        .toStdString();
  };
}

Status RemoteTarget::recordJob(const QString& runDir, const remotepb::JobRecord& job) {
  if (Status s = writeFileAtomic((runDir + "/" + kJobFile).toStdString(), recordToText(job)); !s)
    return s;
  if (Status s = saveJobRecord(defaultJobsDir(), job); !s)
    emit notice(QString::fromStdString(s.message()));
  return {};
}

std::string RemoteTarget::takeSignal() {
  std::lock_guard lock(m_mutex);
  if (m_signals.empty()) return {};
  std::string s = m_signals.front();
  m_signals.pop_front();
  return s;
}

void RemoteTarget::queueSignal(const char* sig) {
  {
    std::lock_guard lock(m_mutex);
    m_signals.push_back(sig);
  }
  m_wake.notify();  // the follower sends it now, not at its next record
}

void RemoteTarget::pause() {
  if (!m_thread || m_paused) return;
  queueSignal("STOP");
  m_paused = true;
}

void RemoteTarget::resume() {
  if (!m_thread || !m_paused) return;
  queueSignal("CONT");
  m_paused = false;
}

void RemoteTarget::stop() {
  if (!m_thread) return;
  queueSignal("TERM");  // signalJob continues a paused job too
  m_paused = false;
}

void RemoteTarget::cancel() {
  if (!m_thread) return;
  queueSignal("KILL");
}

void RemoteTarget::setDetach() {
  {
    std::lock_guard lock(m_detachMutex);
    m_detach = true;
  }
  m_detached.notify_all();
  m_wake.notify();
}

void RemoteTarget::detach() {
  if (!m_thread) return;
  setDetach();
  QThread* t = m_thread;
  m_thread = nullptr;
  // The worker may be waiting on a question for this thread: its events go on being
  // handled until the thread says it has finished.
  QEventLoop loop;
  connect(t, &QThread::finished, &loop, &QEventLoop::quit);
  if (!t->isFinished()) loop.exec();
  t->wait();
  delete t;
}

}  // namespace netloom::gui
