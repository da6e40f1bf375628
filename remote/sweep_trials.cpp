#include "remote/sweep_trials.h"

#include "remote/follow.h"
#include "remote/hosts.h"
#include "remote/slurm.h"

namespace netloom::remote {

RemoteTrials::RemoteTrials(std::vector<remotepb::Host> hosts, int perHost, SubmitOptions options,
                           Connect connect)
    : m_hosts(std::move(hosts)),
      m_perHost(std::max(1, perHost)),
      m_options(std::move(options)),
      m_connect(std::move(connect)) {}

std::string RemoteTrials::where(int slot) const {
  const remotepb::Host& h = m_hosts[size_t(slot) % m_hosts.size()];
  return hostTitle(h) + (h.has_slurm() ? " (Slurm)" : "");
}

std::string RemoteTrials::run(int slot, const proto::Project& project,
                              const std::atomic<bool>& stop,
                              const std::function<void(const proto::TrainEvent&)>& onEvent) {
  const remotepb::Host& host = m_hosts[size_t(slot) % m_hosts.size()];
  auto session = m_connect(host);
  if (!session) return session.error().message;  // it names the host
  SubmitOptions o = m_options;
  const bool slurm = host.has_slurm();
  o.launch = slurm;  // an SSH job starts once its stream is followed: no event waits
  auto job =
      slurm ? submitSlurm(**session, host, project, o) : submitJob(**session, host, project, o);
  if (!job) return where(slot) + ": " + job.error().message;
  FollowHooks hooks;
  hooks.onEvents = [&](int64_t, const std::string&, const std::vector<proto::TrainEvent>& events) {
    for (const proto::TrainEvent& e : events) onEvent(e);
  };
  if (!slurm) hooks.launch = [](SshSession& s, remotepb::JobRecord& j) { return launchJob(s, j); };
  bool asked = false;  // the stop goes once; the job ends after its step
  hooks.nextSignal = [&]() -> std::string {
    if (asked || !stop.load()) return "";
    asked = true;
    return "TERM";
  };
  auto end = followJob(*job, 0, std::move(*session), hooks);
  if (!end) return where(slot) + ": " + end.error().message;
  if (end->how == FollowEnd::How::Failed && !asked) return where(slot) + ": " + end->message;
  return {};
}

}  // namespace netloom::remote
