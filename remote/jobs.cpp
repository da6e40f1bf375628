#include "remote/jobs.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "engine/io/project_file.h"

namespace netloom::remote {

namespace {

// Fixed scripts take every value as a positional parameter: nothing a user wrote
// is ever parsed by the remote shell.
const char* kHome = "printf %s \"$HOME\"";
const char* kStart =
    "set -e; mkdir -p \"$1\"; cd \"$1\"; cat > project.nlproj; "
    "trainer=\"$2\"; shift 2; "
    "command -v \"$trainer\" >/dev/null 2>&1 || { echo \"netloom-train not found: $trainer\" >&2; "
    "exit 127; }; "
    "setsid nohup \"$trainer\" project.nlproj --events events.pb --checkpoint-dir checkpoints "
    "--save-weights weights.safetensors --quiet \"$@\" > train.log 2>&1 < /dev/null & "
    "echo $! > pid; date -u +%Y-%m-%dT%H:%M:%SZ > started; cat pid";
const char* kTail = "if [ -f \"$1\" ]; then tail -c +\"$2\" \"$1\"; fi";

}  // namespace

std::string newJobId() {
  std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&t));
  std::random_device rd;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", rd());
  return std::string("j") + stamp + "-" + hex;
}

Result<Job> submitJob(SshSession& s, const proto::Project& project, const JobSpec& spec) {
  std::string work = spec.workDir;
  if (work.empty()) {
    auto home = s.run({"sh", "-c", kHome});
    if (!home || home->exitStatus != 0 || home->out.empty())
      return makeError(s.host().label() + ": cannot find the remote home folder");
    work = home->out + "/netloom";
  }
  Job job;
  job.id = newJobId();
  job.dir = work + "/jobs/" + job.id;
  std::vector<std::string> argv{"sh", "-c", kStart, "sh", job.dir, spec.trainer};
  argv.insert(argv.end(), spec.extraArgs.begin(), spec.extraArgs.end());
  auto r = s.run(argv, projectToText(project));
  if (!r) return r.error();
  if (r->exitStatus == 127)
    return makeError(s.host().label() + ": " + spec.trainer +
                     " was not found on the host: install it there with `git clone` of "
                     "NetLoom and `scripts/setup.sh node` (no Qt needed), then give "
                     "build-node/engine/netloom-train as the host's netloom-train");
  if (r->exitStatus != 0) return makeError(s.host().label() + ": the job did not start: " + r->err);
  job.pid = std::atol(r->out.c_str());
  if (job.pid <= 0) return makeError(s.host().label() + ": the job did not report its process");
  return job;
}

Result<StreamChunk> readJobEvents(SshSession& s, const Job& job, int64_t offset) {
  auto r = s.run({"sh", "-c", kTail, "sh", job.dir + "/events.pb", std::to_string(offset + 1)});
  if (!r) return r.error();
  if (r->exitStatus != 0) return makeError(s.host().label() + ": cannot read the job's events");
  auto parsed = parseEvents(r->out, offset);
  if (!parsed) return makeError(job.dir + "/events.pb: " + parsed.error().message);
  StreamChunk c;
  c.bytes = r->out.substr(0, size_t(parsed->nextOffset - offset));
  c.events = std::move(*parsed);
  return c;
}

Result<bool> jobRunning(SshSession& s, const Job& job) {
  auto r = s.run({"kill", "-0", std::to_string(job.pid)});
  if (!r) return r.error();
  return r->exitStatus == 0;
}

Status signalJob(SshSession& s, const Job& job, const std::string& signal) {
  if (signal != "TERM" && signal != "KILL" && signal != "STOP" && signal != "CONT")
    return makeError("unknown signal " + signal);
  // setsid made the job its process group's leader: the group is -pid.
  auto r = s.run({"kill", "-s", signal, "--", "-" + std::to_string(job.pid)});
  if (!r) return r.error();
  if (r->exitStatus != 0) return makeError(s.host().label() + ": " + r->err);
  return {};
}

}  // namespace netloom::remote
