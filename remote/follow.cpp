#include "remote/follow.h"

#include <chrono>
#include <thread>

#include "remote/hosts.h"
#include "remote/slurm.h"

namespace netloom::remote {

namespace {

// Follows the file by name, waiting for it to appear, and ends once the job's
// process is gone and everything it wrote was sent.
// $1 events.pb, $2 first byte, $3 pid; a pid of 0 is read from the job's pid
// file once the job starts.
const char* kFollow =
    "p=\"$3\"; n=0; while [ \"$p\" = 0 ] && [ $n -lt 3000 ]; do n=$((n+1)); "
    "[ -s \"$4/pid\" ] && p=$(cat \"$4/pid\") || sleep 0.02; done; [ \"$p\" = 0 ] && exit 3; "
    "exec tail -c +\"$2\" --pid=\"$p\" -F \"$1\" 2>/dev/null";

bool isEnd(const proto::TrainEvent& e) {
  return e.has_finished() || e.has_failed();
}

}  // namespace

Result<FollowEnd> followJob(remotepb::JobRecord job, int64_t offset,
                            std::unique_ptr<SshSession> session, const FollowHooks& hooks) {
  const HostSpec spec = hostSpec(job.host());
  auto notice = [&](const std::string& text) {
    if (hooks.onNotice) hooks.onNotice(text);
  };
  auto cancelled = [&] { return hooks.cancelled && hooks.cancelled(); };
  FollowEnd end;
  int backoffMs = 200;
  bool lastWasEnd = false;
  // A Slurm job's stream ends when Slurm says the job is over; a requeued job's run
  // may say it ended (stopped by the requeue) and go on from its checkpoint. Once it
  // is over, one more pass reads what the last `tail -F` may not have sent.
  const bool slurm = !job.slurm_job_id().empty();
  bool drained = false;
  // A connection held before: the next one says the stream resumed.
  bool connectedOnce = session != nullptr;
  std::chrono::steady_clock::time_point lastStatus{};
  std::string shownStatus;
  while (!cancelled()) {
    if (!session || !session->connected()) {
      session.reset();
      auto s = openSession(spec, nullptr, hooks.passphrase);
      if (!s) {
        // A key problem will not go away by retrying.
        if (s.error().message.find("host key") != std::string::npos) return s.error();
        notice(s.error().message + "; retrying in " +
               std::to_string(backoffMs / 1000.0).substr(0, 4) + " s");
        if (hooks.waitCancelled)
          hooks.waitCancelled(std::chrono::milliseconds(backoffMs));
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
        backoffMs = std::min(backoffMs * 2, 10000);
        continue;
      }
      session = std::move(*s);
      if (connectedOnce)
        notice("reconnected to " + spec.label() + "; the stream goes on from byte " +
               std::to_string(offset) + ", nothing lost");
      backoffMs = 200;
      connectedOnce = true;
    }
    // A shell kept open for signals: starting a command per signal costs a shell
    // start on the host (100 ms and more where rc files are heavy), time the
    // stream would wait.
    auto control = session->stream({"sh"}, true);
    if (!control) {
      notice(control.error().message);
      session.reset();
      continue;
    }
    auto stream =
        slurm ? session->stream({"sh", "-c", kSlurmFollow, "sh", job.dir() + "/events.pb",
                                 std::to_string(offset + 1), job.slurm_job_id()})
              : session->stream({"sh", "-c", kFollow, "sh", job.dir() + "/events.pb",
                                 std::to_string(offset + 1), std::to_string(job.pid()), job.dir()});
    if (!stream) {
      notice(stream.error().message);
      session.reset();
      continue;
    }
    if (!slurm && job.pid() <= 0 && hooks.launch)
      if (Status st = hooks.launch(*session, job); !st) return st.error();
    std::string pending;
    bool lost = false, ended = false;
    while (!cancelled()) {
      if (slurm && hooks.onStatus &&
          std::chrono::steady_clock::now() - lastStatus >= std::chrono::seconds(2)) {
        lastStatus = std::chrono::steady_clock::now();
        if (auto st = jobStatus(*session, job); st && st->describe() != shownStatus) {
          shownStatus = st->describe();
          hooks.onStatus(*st);
        }
      }
      if (hooks.nextSignal) {
        for (std::string sig = hooks.nextSignal(); !sig.empty(); sig = hooks.nextSignal()) {
          if (sig != "TERM" && sig != "KILL" && sig != "STOP" && sig != "CONT") continue;
          if (Status st = (*control)->write(signalCommand(job, sig) + "\n"); !st)
            notice(st.message());
        }
      }
      auto more = (*stream)->read(pending, 50);
      if (!more) {
        notice(more.error().message + "; reconnecting");
        lost = true;
        break;
      }
      if (!pending.empty()) {
        auto parsed = parseEvents(pending, offset);
        if (!parsed) return makeError(job.dir() + "/events.pb: " + parsed.error().message);
        if (!parsed->events.empty()) {
          const size_t used = size_t(parsed->nextOffset - offset);
          if (hooks.onEvents) hooks.onEvents(offset, pending.substr(0, used), parsed->events);
          lastWasEnd = isEnd(parsed->events.back());
          for (const auto& e : parsed->events)
            if (isEnd(e)) {
              end.how = e.has_finished() ? FollowEnd::How::Finished : FollowEnd::How::Failed;
              end.message = e.has_failed() ? e.failed().message() : "";
            }
          pending.erase(0, used);
          offset = parsed->nextOffset;
        }
      }
      if (!*more) {
        ended = true;
        break;
      }
    }
    stream->reset();
    control->reset();
    if (lost) {
      session.reset();
      continue;
    }
    if (!ended) break;  // cancelled
    // tail ended: the process is gone. A run that ended on its own said so last;
    // one that was killed did not, and gets a Failed event saying so.
    if (lastWasEnd) {
      end.offset = offset;
      return end;
    }
    if (slurm && !drained) {
      drained = true;
      continue;
    }
    auto status = jobStatus(*session, job);
    std::string why = "the job's process on " + spec.label() + " ended without a final event";
    if (status && status->state == "killed")
      why = "the job's process on " + spec.label() + " was killed";
    if (status && status->state == "failed") {
      why = "netloom-train on " + spec.label() + " exited with status " +
            std::to_string(status->exitCode);
      // What it said last is the reason, most often.
      auto log = session->run({"tail", "-n", "2", job.dir() + "/train.log"});
      std::string said = log && log->exitStatus == 0 ? log->out : "";
      while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
      why += said.empty() ? " (see " + job.dir() + "/train.log)" : ": " + said;
      // Rank 0 of a job on several hosts whose collective failed: the rank at
      // fault is named, which only the hosts can say.
      if (job.ranks_size() > 0 && status->exitCode == 75)
        why = rankFailure(*session, job, hooks.passphrase);
    }
    if (slurm && status) why = slurmEnd(*session, job, *status);
    auto marked = markJobFailed(*session, job, offset, why);
    if (!marked && session->connected()) {
      // The host answered but the stream cannot take the record (a full disk):
      // the job ended, and this is why.
      end.how = FollowEnd::How::Failed;
      end.message = marked.error().message;
      end.offset = offset;
      return end;
    }
    if (!marked) {
      session.reset();
      continue;
    }
    // Appended (or the process is alive after all, or someone else appended): read on.
  }
  end.how = FollowEnd::How::Detached;
  end.offset = offset;
  return end;
}

}  // namespace netloom::remote
