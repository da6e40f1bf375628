#include "remote/slurm.h"

#include <cctype>
#include <regex>
#include <sstream>

#include "remote/hosts.h"
#include "remote/shell.h"

namespace netloom::remote {

namespace {

bool matches(const std::string& s, const char* pattern) {
  return std::regex_match(s, std::regex(pattern));
}

// Names Slurm takes for partitions, accounts and QoS, and nothing a shell or an
// #SBATCH line would read as more than a word.
const char* kName = "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}";

// Options the script sets itself, which an extra line may not set again.
bool ownOption(const std::string& option) {
  static const char* own[] = {
      "--job-name",      "--partition", "--account",       "--qos",
      "--time",          "--nodes",     "--ntasks",        "--ntasks-per-node",
      "--gpus-per-node", "--gpus",      "--cpus-per-task", "--output",
      "--error",         "--open-mode", "--requeue",       "--no-requeue",
      "--chdir",         "--wrap",      "--array",         "--parsable"};
  for (const char* o : own)
    if (option == o) return true;
  return false;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

const char* const kSlurmFollow =
    "active() { case \"$(squeue -h -j \"$1\" -o %T 2>/dev/null)\" in "
    "PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUED|REQUEUE_FED|REQUEUE_HOLD|RESIZING|"
    "SUSPENDED|STOPPED|SIGNALING|STAGE_OUT|RESV_DEL_HOLD) return 0;; esac; return 1; }; "
    "if ! active \"$3\"; then exec tail -c +\"$2\" \"$1\" 2>/dev/null; fi; "
    "n=0; until [ -e \"$1\" ]; do n=$((n + 1)); "
    "if [ $((n % 20)) = 0 ] && ! active \"$3\"; then exec tail -c +\"$2\" \"$1\" 2>/dev/null; fi; "
    "sleep 0.05; done; "
    "tail -s 0.05 -c +\"$2\" -F \"$1\" 2>/dev/null & t=$!; "
    "trap 'kill $t 2>/dev/null' EXIT HUP INT TERM; "
    "while active \"$3\"; do sleep 1; done; sleep 1; exit 0";

Status validateSlurm(const remotepb::SlurmSettings& s) {
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"partition", &s.partition()},
        {"account", &s.account()},
        {"qos", &s.qos()}})
    if (!value->empty() && !matches(*value, kName))
      return makeError(std::string("slurm.") + field + ": '" + *value +
                       "' is not a Slurm name (letters, digits, '_', '.' and '-', at most 64)");
  // sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
  // days-hours:minutes, days-hours:minutes:seconds.
  if (!s.time_limit().empty() &&
      !matches(s.time_limit(),
               "[0-9]{1,6}(:[0-9]{1,2}){0,2}|[0-9]{1,4}-[0-9]{1,2}(:[0-9]{1,2}){0,2}"))
    return makeError("slurm.time_limit: '" + s.time_limit() +
                     "' is not a Slurm time limit (as in 30, 2:00:00 or 1-12)");
  if (s.nodes() < 0 || s.nodes() > 100000)
    return makeError("slurm.nodes must be between 1 and 100000 (0: 1)");
  if (s.gpus_per_node() < 0 || s.gpus_per_node() > 64)
    return makeError("slurm.gpus_per_node must be between 0 and 64");
  if (s.tasks_per_node() < 0 || s.tasks_per_node() > 4096)
    return makeError("slurm.tasks_per_node must be between 0 and 4096");
  if (s.cpus_per_task() < 0 || s.cpus_per_task() > 4096)
    return makeError("slurm.cpus_per_task must be between 0 and 4096");
  if (s.gpus_per_node() > 0 && s.tasks_per_node() > 0)
    return makeError(
        "slurm.tasks_per_node is for CPU ranks: with slurm.gpus_per_node each GPU is a rank");
  for (int i = 0; i < s.extra_size(); ++i) {
    const std::string& line = s.extra(i);
    const std::string field = "slurm.extra[" + std::to_string(i) + "]";
    if (!matches(line, "--[a-z][a-z0-9-]*(=[A-Za-z0-9_.,:/@%+=-]+)?"))
      return makeError(field + ": '" + line +
                       "' is not one sbatch option of the form --name or --name=value (letters, "
                       "digits and _.,:/@%+=- only)");
    const std::string option = line.substr(0, line.find('='));
    if (ownOption(option))
      return makeError(field + ": " + option + " is set by NetLoom (or by a field of its own)");
  }
  return {};
}

std::string slurmJobName(const std::string& projectName) {
  std::string name = "netloom-";
  for (char c : projectName) {
    if (name.size() >= 48) break;
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')
      name += c;
    else if (c == ' ' && name.back() != '-')
      name += '-';
  }
  while (name.back() == '-' && name.size() > 8) name.pop_back();
  return name.size() > 8 ? name : "netloom-job";
}

Result<std::string> slurmScript(const remotepb::SlurmSettings& s, const std::string& jobName) {
  if (Status st = validateSlurm(s); !st) return st.error();
  if (!matches(jobName, "[A-Za-z0-9_.-]{1,64}"))
    return makeError("'" + jobName + "' is not a Slurm job name");
  std::ostringstream o;
  o << "#!/bin/sh\n"
    << "#SBATCH --job-name=" << jobName << "\n";
  if (!s.partition().empty()) o << "#SBATCH --partition=" << s.partition() << "\n";
  if (!s.account().empty()) o << "#SBATCH --account=" << s.account() << "\n";
  if (!s.qos().empty()) o << "#SBATCH --qos=" << s.qos() << "\n";
  if (!s.time_limit().empty()) o << "#SBATCH --time=" << s.time_limit() << "\n";
  o << "#SBATCH --nodes=" << std::max(1, s.nodes()) << "\n";
  const bool gpus = s.gpus_per_node() > 0;
  o << "#SBATCH --ntasks-per-node=" << (gpus ? s.gpus_per_node() : std::max(1, s.tasks_per_node()))
    << "\n";
  if (gpus) o << "#SBATCH --gpus-per-node=" << s.gpus_per_node() << "\n";
  if (s.cpus_per_task() > 0) o << "#SBATCH --cpus-per-task=" << s.cpus_per_task() << "\n";
  // Requeued (preempted, or scontrol requeue) the script runs again and resumes; its
  // output is appended to, not replaced.
  o << "#SBATCH --requeue\n"
    << "#SBATCH --open-mode=append\n"
    << "#SBATCH --output=slurm-%j.out\n";
  for (const std::string& line : s.extra()) o << "#SBATCH " << line << "\n";
  // The job's folder is the working directory (sbatch --chdir). $1 is netloom-train,
  // the rest its arguments. A checkpoint there means this is a rerun: it resumes.
  o << "trainer=\"$1\"; shift\n"
    << "resume=\n"
    << "if [ -n \"$(ls -A checkpoints 2>/dev/null)\" ]; then resume=checkpoints; fi\n"
    << "mkdir -p logs\n"
    << "[ -f started ] || date -u +%Y-%m-%dT%H:%M:%SZ > started\n"
    << "export NETLOOM_RENDEZVOUS=\"rendezvous/$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}\"\n"
    << "mkdir -p \"$NETLOOM_RENDEZVOUS\"\n"
    << "export NETLOOM_RESUME=\"$resume\" NETLOOM_GPUS=" << (gpus ? 1 : 0)
    << "\n"
    // One step: scancel --signal=TERM reaches its tasks, which stop after the step
    // with a checkpoint. Rank 0 writes the job's stream, log and summary.
    << "exec srun --kill-on-bad-exit=1 sh -c '"
       "t=\"$1\"; shift; r=\"$SLURM_PROCID\"; n=\"$SLURM_NTASKS\"; "
       "if [ \"$r\" = 0 ]; then ev=events.pb; log=train.log; sum=summary.json; "
       "else ev=\"logs/rank-$r.events.pb\"; log=\"logs/rank-$r.log\"; sum=\"logs/rank-$r.json\"; "
       "fi; "
       "set -- project.nlproj --events \"$ev\" --checkpoint-dir checkpoints "
       "--save-weights weights.safetensors --summary-json \"$sum\" --quiet --checkpoint-on-stop "
       "\"$@\"; "
       "[ -n \"$NETLOOM_RESUME\" ] && set -- \"$@\" --resume \"$NETLOOM_RESUME\"; "
       "[ \"$NETLOOM_GPUS\" = 1 ] && set -- \"$@\" --devices \"cuda:$SLURM_LOCALID\"; "
       "[ -n \"$SLURM_CPUS_PER_TASK\" ] && set -- \"$@\" --threads \"$SLURM_CPUS_PER_TASK\"; "
       "[ \"$n\" -gt 1 ] && set -- \"$@\" --rank \"$r\" --world-size \"$n\" "
       "--rendezvous \"$NETLOOM_RENDEZVOUS\" --rank-address \"$(hostname)\" "
       "--collective-failures-exit; "
       "exec \"$t\" \"$@\" >> \"$log\" 2>&1' sh \"$trainer\" \"$@\"\n";
  return o.str();
}

Result<remotepb::JobRecord> submitSlurm(SshSession& s, const remotepb::Host& host,
                                        const proto::Project& project, const SubmitOptions& o) {
  if (Status st = validateSlurm(host.slurm()); !st) return st.error();
  auto script = slurmScript(host.slurm(), slurmJobName(project.name()));
  if (!script) return script.error();
  SubmitOptions bundle = o;
  bundle.launch = false;
  auto job = submitJob(s, host, project, bundle);
  if (!job) return job.error();
  const std::string path = job->dir() + "/job.sbatch";
  if (Status st = s.uploadBytes(*script, path); !st) return st.error();
  std::vector<std::string> argv{"sbatch", "--parsable", "--chdir=" + job->dir(), path,
                                host.trainer().empty() ? "netloom-train" : host.trainer()};
  argv.insert(argv.end(), job->args().begin(), job->args().end());
  auto r = s.run(argv);
  if (!r) return r.error();
  const std::string label = s.host().label();
  if (r->exitStatus == 127) return makeError(label + ": sbatch was not found on the login node");
  std::string id = trimmed(r->out);
  id = id.substr(0, id.find(';'));  // "id;cluster" on a federation
  if (r->exitStatus != 0 || !matches(id, "[0-9]+"))
    return makeError(label +
                     ": sbatch refused the job: " + trimmed(r->err.empty() ? r->out : r->err));
  job->set_slurm_job_id(id);
  if (Status st = s.uploadBytes(recordToText(*job), job->dir() + "/job.txtpb"); !st)
    return st.error();
  return *job;
}

JobStatus slurmJobStatus(const std::string& stateText, const std::string& reason,
                         const std::string& exitCode, bool stoppedOnRequest) {
  JobStatus st;
  const std::string state = stateText.substr(0, stateText.find(' '));  // "CANCELLED by 0"
  int code = std::atoi(exitCode.c_str());
  const size_t colon = exitCode.find(':');
  int signal = colon == std::string::npos ? 0 : std::atoi(exitCode.c_str() + colon + 1);
  st.exitCode = code;
  auto failed = [&](const std::string& why) {
    st.state = "failed";
    st.reason = why;
  };
  if (state == "PENDING") {
    st.state = "pending";
    if (reason != "None" && !reason.empty()) st.reason = reason;
  } else if (state == "RUNNING" || state == "CONFIGURING" || state == "COMPLETING" ||
             state == "SIGNALING" || state == "STAGE_OUT" || state == "RESIZING") {
    st.state = "running";
  } else if (state == "SUSPENDED" || state == "STOPPED") {
    st.state = "paused";
  } else if (state == "COMPLETED") {
    st.state = stoppedOnRequest ? "stopped" : "finished";
  } else if (state == "FAILED") {
    // A stop is SIGTERM to the ranks: a rank that died of it reads 143 (or signal 15).
    if (stoppedOnRequest || code == 143 || signal == 15)
      st.state = "stopped";
    else
      failed("exit status " + std::to_string(code));
  } else if (state == "CANCELLED") {
    st.state = "cancelled";
  } else if (state == "TIMEOUT") {
    failed("time limit");
  } else if (state == "NODE_FAIL") {
    failed("node failure");
  } else if (state == "OUT_OF_MEMORY") {
    failed("out of memory");
  } else if (state == "BOOT_FAIL") {
    failed("a node failed to boot");
  } else if (state == "DEADLINE") {
    failed("deadline");
  } else if (state == "PREEMPTED" || state == "REQUEUED" || state == "REQUEUE_HOLD" ||
             state == "REQUEUE_FED") {
    st.state = "requeued";
  } else {
    st.state = "unknown";
    st.reason = stateText;
  }
  return st;
}

Result<std::vector<std::string>> slurmStatusCommand(const remotepb::JobRecord& job) {
  if (!matches(job.slurm_job_id(), "[0-9]+"))
    return makeError(job.id() + ": '" + job.slurm_job_id() + "' is not a Slurm job id");
  // $1 the Slurm job id, $2 the job's folder. Line 1: scontrol's record, or once the
  // controller has forgotten the job, sacct's; line 2: whether the run stopped on request.
  const char* script =
      "if line=$(scontrol -o show job \"$1\" 2>/dev/null); then echo \"scontrol $line\"; "
      "else echo \"sacct $(sacct -c -n -P -j \"$1\" -o State,ExitCode 2>/dev/null | tail -n 1)\"; "
      "fi; grep -q '\"stopped\":true' \"$2/summary.json\" 2>/dev/null && echo stopped || echo -; "
      "cat \"$2/started\" 2>/dev/null || :";
  return std::vector<std::string>{"sh", "-c", script, "sh", job.slurm_job_id(), job.dir()};
}

Result<JobStatus> slurmStatus(SshSession& s, const remotepb::JobRecord& job) {
  auto command = slurmStatusCommand(job);
  if (!command) return command.error();
  auto r = s.run(*command);
  if (!r) return r.error();
  return parseSlurmStatus(s.host().label(), job, r->out);
}

Result<JobStatus> parseSlurmStatus(const std::string& hostLabel, const remotepb::JobRecord& job,
                                   const std::string& out) {
  std::istringstream in(out);
  std::string first, stopped, started;
  std::getline(in, first);
  std::getline(in, stopped);
  std::getline(in, started);
  std::string state, reason, exitCode;
  int restarts = 0;
  if (first.rfind("scontrol ", 0) == 0) {
    std::istringstream fields(first.substr(9));
    for (std::string kv; fields >> kv;) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
      if (k == "JobState") state = v;
      if (k == "Reason") reason = v;
      if (k == "ExitCode") exitCode = v;
      if (k == "Restarts") restarts = std::atoi(v.c_str());
    }
  } else if (first.rfind("sacct ", 0) == 0) {
    const std::string rest = first.substr(6);
    state = rest.substr(0, rest.find('|'));
    if (rest.find('|') != std::string::npos) exitCode = rest.substr(rest.find('|') + 1);
  }
  if (state.empty()) return makeError(hostLabel + ": Slurm knows no job " + job.slurm_job_id());
  JobStatus st = slurmJobStatus(state, reason, exitCode, stopped == "stopped");
  // Back in the queue after a requeue, waiting to run again.
  if (st.state == "pending" && restarts > 0) st.state = "requeued";
  st.id = job.id();
  st.started = trimmed(started);
  return st;
}

std::string slurmEnd(SshSession& s, const remotepb::JobRecord& job, const JobStatus& status) {
  std::string why =
      "Slurm job " + job.slurm_job_id() + " on " + s.host().label() + " " +
      (status.state == "cancelled" ? std::string("was cancelled") : "ended " + status.describe());
  auto tail = [&](const std::string& file) -> std::string {
    auto r = s.run({"tail", "-n", "3", job.dir() + "/" + file});
    if (!r || r->exitStatus != 0) return {};
    std::string out;
    std::istringstream in(r->out);
    for (std::string line; std::getline(in, line);)
      if (!trimmed(line).empty()) out += (out.empty() ? "" : " | ") + trimmed(line);
    return out;
  };
  if (std::string log = tail("train.log"); !log.empty()) why += "; rank 0's log ends: " + log;
  if (std::string out = tail("slurm-" + job.slurm_job_id() + ".out"); !out.empty())
    why += "; slurm-" + job.slurm_job_id() + ".out ends: " + out;
  return why;
}

Result<std::string> slurmSignalCommand(const remotepb::JobRecord& job, const std::string& signal) {
  if (!matches(job.slurm_job_id(), "[0-9]+"))
    return makeError(job.id() + ": '" + job.slurm_job_id() + "' is not a Slurm job id");
  if (signal == "TERM") return shellCommand({"scancel", "--signal=TERM", job.slurm_job_id()});
  if (signal == "KILL") return shellCommand({"scancel", job.slurm_job_id()});
  if (signal == "STOP" || signal == "CONT")
    return makeError("pause is not offered on Slurm: stop the job (it keeps a checkpoint) instead");
  return makeError("unknown signal " + signal);
}

}  // namespace netloom::remote
