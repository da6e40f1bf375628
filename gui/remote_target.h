// A run on a remote host over SSH, as a RunTarget: the run folder's frozen project
// is submitted as a job, and the job's event stream is mirrored, record for
// record, into the run folder's events.pb, which the IDE tails like any other
// run. The mirror is the resume point: after a dropped connection or an IDE
// restart, following resumes from its size, so no event is lost or shown twice.
// The job is recorded in the run folder (remote.txtpb) and the local job registry,
// so the Runs panel can reattach and netloom-job can reach it too.
#pragma once

#include <QString>
#include <QThread>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "gui/runs.h"
#include "remote/follow.h"
#include "remote/remote.pb.h"

namespace netloom::remote {
struct HostKey;
class SshSession;
struct SubmitOptions;
}  // namespace netloom::remote

namespace netloom::gui {

// The job a run folder holds, if it was a remote run.
std::optional<remotepb::JobRecord> remoteJobOf(const QString& runDir);
// The newest of `runs` that has not ended and has a job (the one in `runDir` when
// given): a remote run the IDE can follow again.
struct FollowableRun {
  const RunRecord* run;
  remotepb::JobRecord job;
};
std::optional<FollowableRun> followableRun(const std::vector<RunRecord>& runs,
                                           const QString& runDir = {});

class RemoteTarget : public RunTarget {
  Q_OBJECT

 public:
  explicit RemoteTarget(const remotepb::Host& host, QObject* parent = nullptr);
  ~RemoteTarget() override;
  QString kind() const override;
  Status start(const RunRequest& r) override;
  // Follows a job submitted before (by an earlier session of the IDE).
  Status attach(const QString& runDir, const remotepb::JobRecord& job);
  void pause() override;
  void resume() override;
  void stop() override;
  void cancel() override;  // SIGKILL: the job ends at once, failed
  bool canDetach() const override { return true; }
  bool running() const override { return m_thread != nullptr; }
  bool paused() const override { return m_paused; }
  // Ends following (the job keeps running on the host) and waits for the thread.
  void detach() override;
  const remotepb::Host& host() const { return m_host; }
  // A run with `perHost` ranks on each of these hosts (the first is this target's
  // host, whose rank 0 stream the run mirrors); empty: one host, one rank.
  void setRankHosts(std::vector<remotepb::Host> hosts, int perHost = 1) {
    m_rankHosts = std::move(hosts);
    m_ranksPerHost = std::max(1, perHost);
  }
  // Removes a job's folder on its host (the local run folder, with what was fetched,
  // stays). Asks its questions on the GUI thread, which it blocks.
  Status deleteJob(const remotepb::JobRecord& job);
  // The checkpoints the job of `run` has written so far, into its run folder (for
  // Evaluate while it runs); blocks the GUI thread as deleteJob does.
  Status fetchCheckpoints(const RunRecord& run);

  // Asked on the GUI thread, blocking the worker: whether to trust an unknown
  // host key, and a key's passphrase. Unset: unknown keys are refused and no
  // passphrase is given.
  std::function<bool(const remote::HostKey&)> acceptHostKey;
  std::function<QString(const QString& keyFile)> askPassphrase;

  static QString jobsRegistry();  // where jobs are recorded (netloom-job reads it too)

 signals:
  void submitted(const QString& jobId);

 protected:
  // Sends the bundle and queues or starts the job (launch = false: follow() starts it).
  virtual Result<remotepb::JobRecord> submit(remote::SshSession& s, const proto::Project& project,
                                             const remote::SubmitOptions& o);

 private:
  void launch(std::function<Status()> work);
  Status startRanks(const proto::Project& project, const remote::SubmitOptions& o,
                    const QString& runDir);
  Status follow(const QString& runDir, const remotepb::JobRecord& job,
                std::unique_ptr<remote::SshSession> session);
  std::string takeSignal();
  // A session with `host`, asking acceptHostKey and askPassphrase on the GUI thread.
  Result<std::unique_ptr<remote::SshSession>> connectTo(const remotepb::Host& host);
  Status recordJob(const QString& runDir, const remotepb::JobRecord& job);
  // askPassphrase, asked on the GUI thread from the worker.
  std::function<std::string(const std::string&)> secretPrompt();

  remotepb::Host m_host;
  std::vector<remotepb::Host> m_rankHosts;
  int m_ranksPerHost = 1;
  QThread* m_thread = nullptr;
  std::atomic<bool> m_detach{false};
  std::mutex m_detachMutex;  // with m_detached: wakes a reconnection wait on detach
  std::condition_variable m_detached;
  void setDetach();
  // Queues a signal for the job and wakes the follower to send it.
  void queueSignal(const char* sig);
  std::atomic<bool> m_paused{false};
  std::deque<std::string> m_signals;
  remote::FollowWake m_wake;  // notified on a queued signal and on detach

 protected:
  mutable std::mutex m_mutex;
  QString m_schedulerState;  // guarded by m_mutex
};

// A Slurm cluster's login node (remote/slurm.h): the job is queued with sbatch and
// followed as any remote job; stop and cancel go through scancel. Slurm has no
// pause to offer (a suspended job keeps its nodes).
class SlurmTarget : public RemoteTarget {
  Q_OBJECT

 public:
  using RemoteTarget::RemoteTarget;
  QString kind() const override;
  bool canPause() const override { return false; }
  void pause() override {}
  void resume() override {}
  QString schedulerState() const override;

 protected:
  Result<remotepb::JobRecord> submit(remote::SshSession& s, const proto::Project& project,
                                     const remote::SubmitOptions& o) override;
};

// The target for runs on `host`: a Slurm cluster's, or a plain SSH host's.
std::unique_ptr<RemoteTarget> makeHostTarget(const remotepb::Host& host);

}  // namespace netloom::gui
