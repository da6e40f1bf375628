#include "remote/follow.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "remote/hosts.h"
#include "remote/slurm.h"

namespace netloom::remote {

namespace {

// Follows the file by name, waiting for it to appear, and ends once the job's
// process is gone and everything it wrote was sent. GNU tail given a file that is
// not there yet polls it once a second for good, and so does it on file systems
// without inotify (NFS): the command waits for the file first, so that tail
// watches it with inotify, and tail's polling, where it polls, is every 50 ms.
// $1 events.pb, $2 first byte, $3 pid, $4 the job's folder. A pid of 0 is the job's
// pid file's, or else the first line of the command's input: the follower writes it
// there once it has launched the job (its end of input, when it has none to give,
// ends the command with status 3).
const char* kFollow =
    "p=\"$3\"; [ \"$p\" = 0 ] && [ -s \"$4/pid\" ] && p=$(cat \"$4/pid\"); "
    "[ \"$p\" = 0 ] && { read -r p || exit 3; }; "
    "while [ ! -e \"$1\" ] && kill -0 \"$p\" 2>/dev/null; do sleep 0.05; done; "
    "exec tail -s 0.05 -c +\"$2\" --pid=\"$p\" -F \"$1\" 2>/dev/null </dev/null";

// Without a wake descriptor, how long a wait lasts before the follower asks whether
// it was cancelled.
constexpr int kUnwokenWaitMs = 1000;
constexpr auto kSlurmStatusEvery = std::chrono::seconds(2);
// While the scheduler's answer is awaited: how often the follower looks for it.
constexpr int kStatusAnswerWaitMs = 20;

bool isEnd(const proto::TrainEvent& e) {
  return e.has_finished() || e.has_failed();
}

// One job followed to its end, over as many connections as it takes.
class Follower {
 public:
  Follower(remotepb::JobRecord job, int64_t offset, std::unique_ptr<SshSession> session,
           const FollowHooks& hooks)
      : m_job(std::move(job)),
        m_spec(hostSpec(m_job.host())),
        m_hooks(hooks),
        m_session(std::move(session)),
        m_slurm(!m_job.slurm_job_id().empty()),
        m_connectedOnce(m_session != nullptr) {
    m_end.offset = offset;
  }

  Result<FollowEnd> run();

 private:
  enum class Pass { Lost, Cancelled, Ended };

  bool cancelled() const { return m_hooks.cancelled && m_hooks.cancelled(); }
  void notice(const std::string& text) const {
    if (m_hooks.onNotice) m_hooks.onNotice(text);
  }
  // A session, reconnecting with back-off: false when cancelled meanwhile.
  Result<bool> connect();
  // Opens the stream and reads it until it ends, the connection drops, or following
  // is cancelled.
  Result<Pass> follow();
  Result<Pass> readUntilEnd(CommandStream& stream, CommandStream& control);
  // Whole records of `pending`, handed on and taken off it.
  Status deliver(std::string& pending);
  void sendSignals(CommandStream& control);
  void reportSlurmStatus();
  int waitMs() const;
  // The stream ended without a final event: the follower says why, in the stream.
  // The end, or nothing when following goes on (the record appended, or lost).
  Result<std::optional<FollowEnd>> explainEnd();
  std::string whyEnded(const Result<JobStatus>& status);

  remotepb::JobRecord m_job;
  const HostSpec m_spec;
  const FollowHooks& m_hooks;
  std::unique_ptr<SshSession> m_session;
  const bool m_slurm;
  // A Slurm job's stream ends when Slurm says the job is over; a requeued job's run
  // may say it ended (stopped by the requeue) and go on from its checkpoint. Once it
  // is over, one more pass reads what the last `tail -F` may not have sent.
  bool m_drained = false;
  bool m_connectedOnce;  // a connection held before: the next one says the stream resumed
  int m_backoffMs = 200;
  bool m_lastWasEnd = false;
  bool m_lastStopped = false;  // the last end event says the run was stopped (SIGTERM)
  FollowEnd m_end;
  std::chrono::steady_clock::time_point m_lastStatus{};
  std::string m_shownStatus;
  // The scheduler asked for the job's state, its answer not all read yet.
  std::unique_ptr<CommandStream> m_statusQuery;
  std::string m_statusAnswer;
};

Result<bool> Follower::connect() {
  if (cancelled()) return false;
  while (!m_session || !m_session->connected()) {
    m_session.reset();
    auto s = openSession(m_spec, nullptr, m_hooks.passphrase);
    if (!s) {
      // A key problem will not go away by retrying.
      if (s.error().message.find("host key") != std::string::npos) return s.error();
      notice(s.error().message + "; retrying in " +
             std::to_string(m_backoffMs / 1000.0).substr(0, 4) + " s");
      if (m_hooks.waitCancelled)
        m_hooks.waitCancelled(std::chrono::milliseconds(m_backoffMs));
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(m_backoffMs));
      m_backoffMs = std::min(m_backoffMs * 2, 10000);
      if (cancelled()) return false;
      continue;
    }
    m_session = std::move(*s);
    if (m_connectedOnce)
      notice("reconnected to " + m_spec.label() + "; the stream goes on from byte " +
             std::to_string(m_end.offset) + ", nothing lost");
    m_backoffMs = 200;
    m_connectedOnce = true;
  }
  return true;
}

Status Follower::deliver(std::string& pending) {
  auto parsed = parseEvents(pending, m_end.offset);
  if (!parsed) return makeError(m_job.dir() + "/events.pb: " + parsed.error().message);
  if (parsed->events.empty()) return {};
  const size_t used = size_t(parsed->nextOffset - m_end.offset);
  if (m_hooks.onEvents) m_hooks.onEvents(m_end.offset, pending.substr(0, used), parsed->events);
  m_lastWasEnd = isEnd(parsed->events.back());
  m_lastStopped =
      parsed->events.back().has_finished() && parsed->events.back().finished().stopped();
  for (const auto& e : parsed->events)
    if (isEnd(e)) {
      m_end.how = e.has_finished() ? FollowEnd::How::Finished : FollowEnd::How::Failed;
      m_end.message = e.has_failed() ? e.failed().message() : "";
    }
  pending.erase(0, used);
  m_end.offset = parsed->nextOffset;
  return {};
}

void Follower::sendSignals(CommandStream& control) {
  if (!m_hooks.nextSignal) return;
  for (std::string sig = m_hooks.nextSignal(); !sig.empty(); sig = m_hooks.nextSignal()) {
    if (sig != "TERM" && sig != "KILL" && sig != "STOP" && sig != "CONT") continue;
    if (Status st = control.write(signalCommand(m_job, sig) + "\n"); !st) notice(st.message());
  }
}

void Follower::reportSlurmStatus() {
  if (!m_slurm || !m_hooks.onStatus) return;
  if (m_statusQuery) {
    // The question asked last: read on without waiting, so the stream never waits on it.
    auto more = m_statusQuery->read(m_statusAnswer, 0);
    if (more && *more) return;
    m_statusQuery.reset();
    auto st = more ? parseSlurmStatus(m_spec.label(), m_job, m_statusAnswer)
                   : Result<JobStatus>(more.error());
    m_statusAnswer.clear();
    if (st && st->describe() != m_shownStatus) {
      m_shownStatus = st->describe();
      m_hooks.onStatus(*st);
    }
    return;
  }
  if (std::chrono::steady_clock::now() - m_lastStatus < kSlurmStatusEvery) return;
  m_lastStatus = std::chrono::steady_clock::now();
  auto command = slurmStatusCommand(m_job);
  if (!command) return;
  if (auto query = m_session->stream(*command)) m_statusQuery = std::move(*query);
}

int Follower::waitMs() const {
  int ms = m_hooks.wake ? -1 : kUnwokenWaitMs;
  // Its answer may already be held by the session, where the socket will not say so.
  if (m_statusQuery) return kStatusAnswerWaitMs;
  if (m_slurm && m_hooks.onStatus) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        m_lastStatus + kSlurmStatusEvery - std::chrono::steady_clock::now());
    int statusMs = int(std::max<int64_t>(0, left.count()) + 1);
    ms = ms < 0 ? statusMs : std::min(ms, statusMs);
  }
  return ms;
}

Result<Follower::Pass> Follower::readUntilEnd(CommandStream& stream, CommandStream& control) {
  std::string pending;
  const int wakeFd = m_hooks.wake ? m_hooks.wake->fd() : -1;
  while (!cancelled()) {
    reportSlurmStatus();
    sendSignals(control);
    auto more = stream.read(pending, waitMs(), wakeFd);
    if (m_hooks.wake) m_hooks.wake->clear();
    if (!more) {
      notice(more.error().message + "; reconnecting");
      return Pass::Lost;
    }
    if (!pending.empty())
      if (Status st = deliver(pending); !st) return st.error();
    if (!*more) return Pass::Ended;
  }
  return Pass::Cancelled;
}

Result<Follower::Pass> Follower::follow() {
  // A shell kept open for signals: starting a command per signal costs a shell
  // start on the host (100 ms and more where rc files are heavy), time the
  // stream would wait.
  auto control = m_session->stream({"sh"}, true);
  if (!control) {
    notice(control.error().message);
    return Pass::Lost;
  }
  const std::string first = std::to_string(m_end.offset + 1);
  auto stream = m_slurm
                    ? m_session->stream({"sh", "-c", kSlurmFollow, "sh", m_job.dir() + "/events.pb",
                                         first, m_job.slurm_job_id()})
                    : m_session->stream({"sh", "-c", kFollow, "sh", m_job.dir() + "/events.pb",
                                         first, std::to_string(m_job.pid()), m_job.dir()},
                                        true);
  if (!stream) {
    notice(stream.error().message);
    return Pass::Lost;
  }
  if (!m_slurm) {
    if (m_job.pid() <= 0 && m_hooks.launch)
      if (Status st = m_hooks.launch(*m_session, m_job); !st) return st.error();
    // The job's pid, where the stream waits for it; else its end of input.
    if (m_job.pid() > 0) (*stream)->write(std::to_string(m_job.pid()) + "\n");
    (*stream)->closeInput();
  }
  auto pass = readUntilEnd(**stream, **control);
  // Channels go before their session; an unanswered question is asked again.
  m_statusQuery.reset();
  m_statusAnswer.clear();
  return pass;
}

std::string Follower::whyEnded(const Result<JobStatus>& status) {
  const std::string label = m_spec.label();
  if (m_slurm && status) return slurmEnd(*m_session, m_job, *status);
  if (status && status->state == "killed") return "the job's process on " + label + " was killed";
  if (!status || status->state != "failed")
    return "the job's process on " + label + " ended without a final event";
  // Rank 0 of a job on several hosts whose collective failed: the rank at fault is
  // named, which only the hosts can say.
  if (m_job.ranks_size() > 0 && status->exitCode == 75)
    return rankFailure(*m_session, m_job, m_hooks.passphrase);
  std::string why =
      "netloom-train on " + label + " exited with status " + std::to_string(status->exitCode);
  // What it said last is the reason, most often.
  auto log = m_session->run({"tail", "-n", "2", m_job.dir() + "/train.log"});
  std::string said = log && log->exitStatus == 0 ? log->out : "";
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  return why + (said.empty() ? " (see " + m_job.dir() + "/train.log)" : ": " + said);
}

Result<std::optional<FollowEnd>> Follower::explainEnd() {
  auto marked =
      markJobFailed(*m_session, m_job, m_end.offset, whyEnded(jobStatus(*m_session, m_job)));
  if (!marked && m_session->connected()) {
    // The host answered but the stream cannot take the record (a full disk): the
    // job ended, and this is why.
    m_end.how = FollowEnd::How::Failed;
    m_end.message = marked.error().message;
    return std::optional<FollowEnd>(m_end);
  }
  if (!marked) m_session.reset();
  // Appended (or the process is alive after all, or someone else appended): read on.
  return std::optional<FollowEnd>();
}

Result<FollowEnd> Follower::run() {
  while (true) {
    auto connected = connect();
    if (!connected) return connected.error();
    if (!*connected) break;
    auto pass = follow();
    if (!pass) return pass.error();
    if (*pass == Pass::Lost) {
      m_session.reset();
      continue;
    }
    if (*pass == Pass::Cancelled) break;
    // tail ended: the process is gone. A run that ended on its own said so last;
    // one that was killed did not, and gets a Failed event saying so.
    if (m_lastWasEnd) {
      // Slurm stops a job at its time limit with SIGTERM, which the run takes as a
      // stop and ends cleanly: the job failed all the same, and Slurm says why.
      if (m_slurm && m_lastStopped)
        if (auto st = jobStatus(*m_session, m_job); st && st->state == "failed") {
          m_end.how = FollowEnd::How::Failed;
          m_end.message = slurmEnd(*m_session, m_job, *st);
        }
      return m_end;
    }
    if (m_slurm && !m_drained) {
      m_drained = true;
      continue;
    }
    auto end = explainEnd();
    if (!end) return end.error();
    if (*end) return **end;
  }
  m_end.how = FollowEnd::How::Detached;
  return m_end;
}

}  // namespace

FollowWake::FollowWake() : m_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

FollowWake::~FollowWake() {
  if (m_fd >= 0) ::close(m_fd);
}

void FollowWake::notify() const {
  const uint64_t one = 1;
  if (m_fd >= 0) [[maybe_unused]]
    auto n = ::write(m_fd, &one, sizeof one);
}

void FollowWake::clear() const {
  uint64_t count;
  if (m_fd >= 0) [[maybe_unused]]
    auto n = ::read(m_fd, &count, sizeof count);
}

Result<FollowEnd> followJob(remotepb::JobRecord job, int64_t offset,
                            std::unique_ptr<SshSession> session, const FollowHooks& hooks) {
  return Follower(std::move(job), offset, std::move(session), hooks).run();
}

}  // namespace netloom::remote
