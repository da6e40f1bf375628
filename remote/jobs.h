// Training jobs on a remote host: a job folder <workdir>/jobs/<id>/ with the
// project, netloom-train started there detached from the SSH session (it keeps
// running when the connection drops) writing events.pb, and its PID beside it.
// The IDE and netloom-job read the stream from the last byte they hold, so a
// dropped connection resumes with no event lost or shown twice.
#pragma once

#include <string>
#include <vector>

#include "engine/io/event_stream.h"
#include "engine/proto/project.pb.h"
#include "remote/ssh.h"

namespace netloom::remote {

// A job id made here, never from user text: "j" + UTC time + random hex.
std::string newJobId();

struct JobSpec {
  std::string workDir;                    // on the host; empty: $HOME/netloom
  std::string trainer = "netloom-train";  // the remote netloom-train (PATH or a path)
  std::vector<std::string> extraArgs;     // passed to netloom-train (e.g. --devices cpu)
};

struct Job {
  std::string id;
  std::string dir;  // absolute, on the host
  long pid = 0;
};

// Uploads the project and starts netloom-train in a new job folder.
Result<Job> submitJob(SshSession& s, const proto::Project& project, const JobSpec& spec);

// The job's events from byte `offset` of its stream: whole records only, with the
// raw bytes they came from.
struct StreamChunk {
  EventReadResult events;
  std::string bytes;
};
Result<StreamChunk> readJobEvents(SshSession& s, const Job& job, int64_t offset);

// Whether the job's process is alive.
Result<bool> jobRunning(SshSession& s, const Job& job);
// Signals the job's process group (SIGTERM stops after the step; SIGKILL cancels).
Status signalJob(SshSession& s, const Job& job, const std::string& signal);

}  // namespace netloom::remote
