// A sweep's trials on remote hosts (engine/sweep/runner.h's TrialLauncher): each
// host, an SSH host or a Slurm cluster's login node, takes `perHost` trials at once;
// a trial is a job there (remote/jobs.h, remote/slurm.h), its events followed back
// as they are written, and asked to stop after its step when the sweep prunes it. A
// sweep that goes away leaves its jobs running (their records saved in `jobsDir`, as
// netloom-job keeps them), and follows them again when it goes on.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sweep/runner.h"
#include "remote/hosts.h"
#include "remote/jobs.h"

namespace netloom::remote {

class RemoteTrials : public sweep::TrialLauncher {
 public:
  // How to reach a host (the host key checked, as everywhere).
  using Connect = std::function<Result<std::unique_ptr<SshSession>>(const remotepb::Host&)>;
  // Slots go round the hosts: slot k on host k mod hosts.size().
  RemoteTrials(std::vector<remotepb::Host> hosts, int perHost, SubmitOptions options,
               Connect connect, std::string jobsDir = defaultJobsDir());
  // Each of a host's perHost slots trains on its own GPU (--devices cuda:0, cuda:1, …).
  void setGpuEach(bool on) { m_gpuEach = on; }

  int capacity() const override { return int(m_hosts.size()) * m_perHost; }
  std::string where(int slot) const override;
  std::string run(const proto::Project& project, const sweep::TrialRun& r) override;

 private:
  std::vector<remotepb::Host> m_hosts;
  int m_perHost;
  SubmitOptions m_options;
  Connect m_connect;
  std::string m_jobsDir;
  bool m_gpuEach = false;
};

}  // namespace netloom::remote
