#include "remote/sweep_trials.h"

#include <optional>

#include "remote/follow.h"
#include "remote/hosts.h"
#include "remote/slurm.h"

namespace netloom::remote {

RemoteTrials::RemoteTrials(std::vector<remotepb::Host> hosts, int perHost, SubmitOptions options,
                           Connect connect, std::string jobsDir)
    : m_hosts(std::move(hosts)),
      m_perHost(std::max(1, perHost)),
      m_options(std::move(options)),
      m_connect(std::move(connect)),
      m_jobsDir(std::move(jobsDir)) {}

std::string RemoteTrials::where(int slot) const {
  const remotepb::Host& h = m_hosts[size_t(slot) % m_hosts.size()];
  return hostTitle(h) + (h.has_slurm() ? " (Slurm)" : "") +
         (m_gpuEach ? ", cuda:" + std::to_string(slot / int(m_hosts.size())) : "");
}

std::string RemoteTrials::run(const proto::Project& project, const sweep::TrialRun& r) {
  // A job this trial started before, if its record is still here: followed again.
  std::optional<remotepb::JobRecord> job;
  if (!r.job.empty())
    if (auto held = loadJobRecord(m_jobsDir, r.job)) job = *held;
  const remotepb::Host host = job ? job->host() : m_hosts[size_t(r.slot) % m_hosts.size()];
  const std::string where = hostTitle(host);
  auto session = m_connect(host);
  if (!session) return session.error().message;  // it names the host
  FollowHooks hooks;
  const bool slurm = host.has_slurm();
  if (!job) {
    SubmitOptions o = m_options;
    if (m_gpuEach)
      o.args.insert(o.args.end(),
                    {"--devices", "cuda:" + std::to_string(r.slot / int(m_hosts.size()))});
    o.launch = slurm;  // an SSH job starts once its stream is followed: no event waits
    auto made =
        slurm ? submitSlurm(**session, host, project, o) : submitJob(**session, host, project, o);
    if (!made) return where + ": " + made.error().message;
    job = *made;
    if (Status st = saveJobRecord(m_jobsDir, *job); !st) return where + ": " + st.message();
    if (r.started) r.started(job->id());
    if (!slurm)
      hooks.launch = [](SshSession& s, remotepb::JobRecord& j) { return launchJob(s, j); };
  }
  hooks.onEvents = [&](int64_t, const std::string&, const std::vector<proto::TrainEvent>& events) {
    for (const proto::TrainEvent& e : events) r.onEvent(e);
  };
  // Leaving, the job runs on; stopping, it is asked once to end after its step.
  const auto leaving = [&] { return r.leave && r.leave->load(); };
  hooks.cancelled = leaving;
  bool asked = false;
  hooks.nextSignal = [&]() -> std::string {
    if (asked || leaving() || !r.stop || !r.stop->load()) return "";
    asked = true;
    return "TERM";
  };
  auto end = followJob(*job, 0, std::move(*session), hooks);
  if (!end) return where + ": " + end.error().message;
  if (end->how == FollowEnd::How::Failed && !asked) return where + ": " + end->message;
  return {};
}

}  // namespace netloom::remote
