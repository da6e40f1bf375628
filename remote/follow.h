// Following a remote job's event stream as it grows.
//
// One long-lived command per connection (`tail -F` of events.pb from the first
// byte not yet held) delivers records as soon as the trainer flushes them. When
// the connection drops, the follower reconnects with back-off (0.2 s doubling to
// 10 s) and resumes from the same byte, so no record is lost or delivered twice.
// Signals asked for meanwhile (pause, stop, cancel) go over the same session.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "remote/jobs.h"

namespace netloom::remote {

// Ends a follower's wait from another thread, when a signal is queued for the job or
// following is cancelled: an eventfd the follower waits on beside the connection.
class FollowWake {
 public:
  FollowWake();
  ~FollowWake();
  FollowWake(const FollowWake&) = delete;
  FollowWake& operator=(const FollowWake&) = delete;
  void notify() const;  // from any thread
  int fd() const { return m_fd; }
  void clear() const;  // by the follower, once woken

 private:
  int m_fd = -1;
};

struct FollowHooks {
  // Whole records, with the bytes they came from; `offset` is where they start.
  std::function<void(int64_t offset, const std::string& bytes,
                     const std::vector<proto::TrainEvent>& events)>
      onEvents;
  // Connection news for a status line ("connection lost: …; retrying in 0.4 s").
  std::function<void(const std::string&)> onNotice;
  // Asked whenever the follower wakes; true ends following (the job keeps running).
  std::function<bool()> cancelled;
  // Notified by whoever queues a signal or cancels. Unset: the follower wakes at
  // least once a second to ask (a caller that only ever stops it by a deadline).
  const FollowWake* wake = nullptr;
  // Waits up to the time given, ending early when following is cancelled; true when
  // it is. Between reconnection attempts. Unset: the attempt waits the time out.
  std::function<bool(std::chrono::milliseconds)> waitCancelled;
  // The next signal to send to the job ("STOP", "CONT", "TERM", "KILL"), or "".
  std::function<std::string()> nextSignal;
  // For a job submitted with launch = false: starts it (launchJob) once the
  // stream is open, so the first records arrive as they are written.
  std::function<Status(SshSession&, remotepb::JobRecord&)> launch;
  // How to authenticate again after a drop (the passphrase prompt, if any).
  std::function<std::string(const std::string& keyFile)> passphrase;
  // A Slurm job's state as the scheduler gives it ("pending (Priority)", "running",
  // "requeued"), asked every two seconds while following; called when it changes.
  std::function<void(const JobStatus&)> onStatus;
};

struct FollowEnd {
  enum class How { Finished, Failed, Detached } how = How::Detached;
  std::string message;  // why it failed
  int64_t offset = 0;   // bytes of the stream held
};

// Follows `job` from byte `offset` until its stream ends (Finished, or Failed,
// which the follower appends itself when the process died without one) or
// hooks.cancelled(). `session` may be null: it connects. The host key must be
// known by now: an unknown or changed one ends following with an error.
Result<FollowEnd> followJob(remotepb::JobRecord job, int64_t offset,
                            std::unique_ptr<SshSession> session, const FollowHooks& hooks);

}  // namespace netloom::remote
