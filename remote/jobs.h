// Training jobs on a remote host.
//
// A job is a folder <workdir>/jobs/<id>/ holding its bundle (project.nlproj and
// job.txtpb, sent by SFTP), and what the run leaves there: events.pb, train.log,
// checkpoints/, weights.safetensors, and beside them pid, started and, once the
// trainer returns, exit. netloom-train starts detached from the SSH session, so
// it keeps running when the connection drops. Dataset files go once into
// <workdir>/data/<sha256>/<name> and every later job that names the same bytes
// reuses them. The IDE and netloom-job read the stream from the last byte they
// hold, so a dropped connection resumes with no event lost or shown twice.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/io/event_stream.h"
#include "engine/proto/project.pb.h"
#include "remote/remote.pb.h"
#include "remote/ssh.h"

namespace netloom::remote {

// A job id made here, never from user text: "j" + UTC time + random hex.
std::string newJobId();
bool isJobId(const std::string& id);
// The version this build's netloom-train reports ("netloom-train 0.1.0").
std::string trainerVersionLine();

// `relative` as a path inside `dir`: refused when empty, absolute, or when it
// climbs out with "..". Every file of a bundle goes through it.
Result<std::string> bundlePath(const std::string& dir, const std::string& relative);

// What "Test connection" reports.
struct HostInfo {
  std::string trainer;         // the command looked for
  std::string trainerVersion;  // "netloom-train 0.1.0"; empty: not found
  int cpus = 0;
  uint64_t memoryBytes = 0;
  std::string workDir;               // absolute
  uint64_t diskFreeBytes = 0;        // in the work directory (or the nearest folder above it)
  std::vector<std::string> gpus;     // nvidia-smi's CSV rows: name, memory.total, memory.used
  std::vector<std::string> devices;  // the trainer's --list-devices lines
  std::string problem;               // empty when jobs can run; else what is wrong and what to do
  std::string summary() const;
};
Result<HostInfo> probeHost(SshSession& s, const remotepb::Host& host);

struct SubmitOptions {
  std::string projectDir;         // relative data paths resolve against it
  std::vector<std::string> args;  // more netloom-train arguments (--devices cpu, --max-steps 5)
  std::string localRun;           // the IDE's run folder, recorded in the job
  // Upload progress: what is being sent, bytes so far, bytes in all.
  std::function<void(const std::string&, uint64_t, uint64_t)> progress;
  bool anyVersion = false;  // run even when the host's netloom-train is another version
  // Start netloom-train at once; false: only send the bundle, and launchJob
  // starts it (after a follower is listening, so no event waits for it).
  bool launch = true;
  // submitRanks: ranks started on each host, each in its own job folder. Each takes
  // its share of the host's cores (unless the project or --threads sets them), and
  // on a GPU job its own GPU (cuda:0, cuda:1, ...); a host with fewer GPUs than
  // ranks is refused.
  int ranksPerHost = 1;
};

// Checks the host's netloom-train, sends the dataset (or reuses it), the bundle,
// and starts the run. The record says where everything went.
Result<remotepb::JobRecord> submitJob(SshSession& s, const remotepb::Host& host,
                                      const proto::Project& project, const SubmitOptions& o);

// Starts netloom-train in a job folder submitJob prepared; records its pid. A rank
// of a job on several hosts reads the job's `secret` from its standard input.
Status launchJob(SshSession& s, remotepb::JobRecord& job, const std::string& secret = {});

// A job on several hosts (remote/rank_jobs.cpp), o.ranksPerHost ranks on each (a process per rank,
// ranks k·N .. k·N+N−1 on host k, which train as the project's strategy says: data, tensor or
// pipeline parallel): the bundle goes to every rank's folder, rank 0 starts first and serves the
// rendezvous on a free port, then the others join it with the job's secret (random, given to each
// rank on its standard input, never written down). The record is rank 0's, with the others in
// `ranks`. `sessions` and `hosts` pair up, in host order.
Result<remotepb::JobRecord> submitRanks(const std::vector<SshSession*>& sessions,
                                        const std::vector<remotepb::Host>& hosts,
                                        const proto::Project& project, const SubmitOptions& o,
                                        double timeoutSeconds = 60);

// Where a job is, from its folder on the host.
struct JobStatus {
  std::string id;
  // "running", "paused", "finished", "stopped" (by a stop request, cleanly),
  // "failed", "killed", "unknown"; on Slurm also "pending", "cancelled", "requeued"
  std::string state;
  // Slurm's word on it: why a job is pending ("Priority", "Resources"), or why it
  // failed ("time limit", "node failure", "out of memory", "exit status 1").
  std::string reason;
  std::string started;
  std::string project;  // the project's name (listJobs)
  int exitCode = -1;
  int64_t stoppedAtStep = -1;  // for "stopped": the steps it made, when known
  // "stopped at step 120", "failed (exit status 1)", "failed: time limit",
  // "pending (Priority)", or the state.
  std::string describe() const;
};
Result<JobStatus> jobStatus(SshSession& s, const remotepb::JobRecord& job);
// Every job folder under the host's work directory.
Result<std::vector<JobStatus>> listJobs(SshSession& s, const remotepb::Host& host);

// Signals the job's process group: TERM stops after the step with a checkpoint,
// KILL cancels, STOP and CONT pause and resume.
Status signalJob(SshSession& s, const remotepb::JobRecord& job, const std::string& signal);
// The command line signalJob runs (`signal` must be one of those four).
std::string signalCommand(const remotepb::JobRecord& job, const std::string& signal);

// When the job's process is gone without a Finished or Failed event (killed, or
// the host rebooted), appends a Failed event to its stream after the last whole
// record, so every reader sees why it ended. True when it appended one.
Result<bool> markJobFailed(SshSession& s, const remotepb::JobRecord& job, int64_t wholeBytes,
                           const std::string& why);

// Why a job on several hosts ended, once rank 0 exited after a failed collective
// (netloom-train's exit status 75, with no Failed event): asks every other rank's
// host how its rank ended, stops any still running (hung, or waiting on the ones
// gone), and names the rank at fault (the first killed, else the first that failed
// on its own, else one that could not be reached, else one that hung; rank 0 itself
// when none of those), its pid and host, and its log's last lines.
std::string rankFailure(SshSession& first, const remotepb::JobRecord& job,
                        const std::function<std::string(const std::string&)>& passphrase);

// Downloads what a run produced (weights.safetensors, checkpoints/, train.log,
// and unless `skipEvents`, events.pb and the bundle) into `localDir`.
Status fetchJob(SshSession& s, const remotepb::JobRecord& job, const std::string& localDir,
                bool skipEvents = false);

// Removes a job's folder on the host; refused while it runs.
Status deleteJob(SshSession& s, const remotepb::JobRecord& job);

}  // namespace netloom::remote
