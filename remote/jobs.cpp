#include "remote/jobs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "engine/io/project_file.h"
#include "remote/hosts.h"
#include "remote/sha256.h"
#include "remote/shell.h"
#include "remote/slurm.h"

namespace netloom::remote {

namespace fs = std::filesystem;

namespace {

// Fixed scripts take every value as a positional parameter: nothing a user wrote
// is ever parsed by the remote shell.
const char* kHome = "printf %s \"$HOME\"";
// $1 trainer, $2 work dir. Prints key=value lines.
const char* kProbe =
    "t=\"$1\"; w=\"$2\"; "
    "if command -v \"$t\" >/dev/null 2>&1; then echo \"version=$(\"$t\" --version 2>&1 | head -n "
    "1)\"; \"$t\" --list-devices 2>/dev/null | sed 's/^/device=/'; fi; "
    "echo \"cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null)\"; "
    "echo \"mem=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo 2>/dev/null)\"; "
    "d=\"$w\"; while [ ! -d \"$d\" ] && [ \"$d\" != / ]; do d=$(dirname \"$d\"); done; "
    "echo \"disk=$(df -Pk \"$d\" 2>/dev/null | awk 'NR==2 {print $4}')\"; "
    "if command -v nvidia-smi >/dev/null 2>&1; then "
    "nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>/dev/null | "
    "sed 's/^/gpu=/'; fi";
// $1 job folder, $2 trainer, then netloom-train's extra arguments. The trainer
// runs under a small shell that records its exit status in `exit`; setsid makes
// that shell the leader of the job's process group. Stop signals the whole group,
// so the shell traps TERM: it waits for the trainer, which stops cleanly, and
// records how that went. (A trap, not an ignored signal, which the trainer would
// inherit.) Only a KILL of the group leaves no `exit`, and that reads as killed.
const char* kStart =
    "set -e; cd \"$1\"; trainer=\"$2\"; shift 2; "
    "command -v \"$trainer\" >/dev/null 2>&1 || { echo \"netloom-train not found: $trainer\" >&2; "
    "exit 127; }; "
    "setsid nohup sh -c 'trap : TERM; t=\"$1\"; shift; \"$t\" project.nlproj --events events.pb "
    "--checkpoint-dir checkpoints --save-weights weights.safetensors --summary-json summary.json "
    "--quiet \"$@\"; echo $? > exit' sh \"$trainer\" \"$@\" > train.log 2>&1 < /dev/null & "
    "echo $! > pid; date -u +%Y-%m-%dT%H:%M:%SZ > started; cat pid";
// $1 job folder. One line: state, exit code, start time, and for a stopped job the
// steps it made (from netloom-train's summary: {"steps":N,...,"stopped":true}).
// A trainer killed by KILL alone leaves its shell to record 137.
const char* kStatus =
    "cd \"$1\" 2>/dev/null || { echo missing; exit 0; }; pid=$(cat pid 2>/dev/null); "
    "st=$(cat started 2>/dev/null); "
    "if [ -n \"$pid\" ] && kill -0 \"$pid\" 2>/dev/null; then "
    "if grep -q '^[^)]*) T' \"/proc/$pid/stat\" 2>/dev/null; then s=paused; else s=running; fi; "
    "echo \"$s - $st\"; "
    "elif [ -f exit ]; then e=$(cat exit); n=-; "
    "if [ \"$e\" = 0 ] && grep -q '\"stopped\":true' summary.json 2>/dev/null; then s=stopped; "
    "n=$(sed -n 's/.*\"steps\":\\([0-9]*\\).*/\\1/p' summary.json); "
    "elif [ \"$e\" = 0 ]; then s=finished; elif [ \"$e\" = 137 ]; then s=killed; else s=failed; "
    "fi; "
    "echo \"$s $e $st ${n:--}\"; else echo \"killed - $st\"; fi";
// $1 folder holding job folders: one kStatus line per job, after its name.
// Each line: the job's folder, a tab, its project's name as its record quotes it, a
// tab, then the status line.
const char* kList =
    "cd \"$1\" 2>/dev/null || exit 0; for d in j*; do [ -d \"$d\" ] || continue; "
    "printf '%s\\t%s\\t' \"$d\" \"$(sed -n 's/^project_name: //p' \"$d/job.txtpb\" 2>/dev/null "
    "| head -n 1)\"; sh -c \"$2\" sh \"$d\"; done";
// $1 events.pb, $2 bytes of whole records, $3 pid. Appends stdin when the
// process is gone, after cutting a torn last record.
const char* kMarkFailed =
    "if [ \"$3\" != 0 ] && kill -0 \"$3\" 2>/dev/null; then echo alive; exit 0; fi; "
    "[ -f \"$1\" ] || : > \"$1\"; "
    "n=$(wc -c < \"$1\"); if [ \"$n\" -gt \"$2\" ]; then truncate -s \"$2\" \"$1\"; fi; "
    "if [ \"$n\" -lt \"$2\" ]; then echo short; exit 0; fi; "
    "if cat >> \"$1\"; then echo appended; else truncate -s \"$2\" \"$1\"; "
    "echo \"full $(df -Pk . | awk 'NR==2 {print $4}')\"; fi";
const char* kDelete =
    "if [ -f \"$1/pid\" ] && kill -0 \"$(cat \"$1/pid\")\" 2>/dev/null; then echo running; exit 3; "
    "fi; "
    "rm -rf -- \"$1\"";

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return stamp;
}

Result<std::string> workDirOf(SshSession& s, const remotepb::Host& host) {
  if (!host.work_dir().empty()) return host.work_dir();
  auto home = s.run({"sh", "-c", kHome});
  if (!home || home->exitStatus != 0 || home->out.empty())
    return makeError(s.host().label() + ": cannot find the remote home folder");
  return home->out + "/netloom";
}

std::string trainerOf(const remotepb::Host& host) {
  return host.trainer().empty() ? "netloom-train" : host.trainer();
}

std::string installHint(const std::string& label, const std::string& trainer) {
  return label + ": " + trainer +
         " was not found on the host. Install it there (no Qt needed) with\n"
         "  git clone <NetLoom> netloom && netloom/scripts/setup.sh node\n"
         "and set the host's netloom-train to <that folder>/build-node/engine/netloom-train";
}

std::string mib(uint64_t bytes) {
  return std::to_string((bytes + (1 << 19)) >> 20) + " MiB";
}

// Every data file a project names, by where it sits in the project.
std::vector<std::pair<std::string, std::string*>> dataPaths(proto::Project& p) {
  std::vector<std::pair<std::string, std::string*>> out;
  auto add = [&](const char* field, std::string* v) {
    if (!v->empty()) out.emplace_back(field, v);
  };
  if (p.data().has_idx()) {
    auto* idx = p.mutable_data()->mutable_idx();
    add("data.idx.train_images", idx->mutable_train_images());
    add("data.idx.train_labels", idx->mutable_train_labels());
    add("data.idx.test_images", idx->mutable_test_images());
    add("data.idx.test_labels", idx->mutable_test_labels());
  } else if (p.data().has_csv()) {
    auto* csv = p.mutable_data()->mutable_csv();
    add("data.csv.train_path", csv->mutable_train_path());
    add("data.csv.test_path", csv->mutable_test_path());
  }
  add("train.init_weights", p.mutable_train()->mutable_init_weights());
  return out;
}

// The folders and lists of images a project names, which a job does not upload.
std::vector<std::pair<std::string, std::string*>> imagePaths(proto::Project& p) {
  std::vector<std::pair<std::string, std::string*>> out;
  const bool folder = p.data().has_image_folder();
  if (!folder && !p.data().has_image_list()) return out;
  proto::ImageSource* src =
      folder ? p.mutable_data()->mutable_image_folder() : p.mutable_data()->mutable_image_list();
  const std::string field = folder ? "data.image_folder." : "data.image_list.";
  for (auto [which, v] : {std::pair{"train", src->mutable_train()},
                          {"test", src->mutable_test()},
                          {"validation", src->mutable_validation()}})
    if (!v->empty()) out.emplace_back(field + which, v);
  return out;
}

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

bool isJobId(const std::string& id) {
  return id.size() > 1 && id.size() < 64 && id[0] == 'j' &&
         id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}

std::string trainerVersionLine() {
  return std::string("netloom-train ") + NETLOOM_VERSION;
}

Result<std::string> bundlePath(const std::string& dir, const std::string& relative) {
  if (relative.empty() || relative[0] == '/' || relative.find('\0') != std::string::npos)
    return makeError("bundle file '" + relative + "': not a relative path");
  for (const auto& part : fs::path(relative))
    if (part == ".." || part == ".")
      return makeError("bundle file '" + relative + "': leaves the job folder");
  return dir + "/" + relative;
}

std::string HostInfo::summary() const {
  std::ostringstream s;
  s << (trainerVersion.empty() ? "netloom-train: not found (" + trainer + ")" : trainerVersion)
    << "\n"
    << cpus << " CPUs, " << mib(memoryBytes) << " memory\n"
    << mib(diskFreeBytes) << " free in " << workDir << "\n";
  if (gpus.empty()) s << "no NVIDIA GPUs (nvidia-smi not found or none listed)\n";
  for (const auto& g : gpus) s << "GPU: " << g << "\n";
  if (!devices.empty()) s << "netloom-train trains on:\n";
  for (const auto& d : devices) s << "  " << d << "\n";
  if (!problem.empty()) s << problem << "\n";
  return s.str();
}

Result<HostInfo> probeHost(SshSession& s, const remotepb::Host& host) {
  HostInfo info;
  info.trainer = trainerOf(host);
  auto work = workDirOf(s, host);
  if (!work) return work.error();
  info.workDir = *work;
  auto r = s.run({"sh", "-c", kProbe, "sh", info.trainer, info.workDir});
  if (!r) return r.error();
  std::istringstream lines(r->out);
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "version") info.trainerVersion = v;
    if (k == "cpus") info.cpus = std::atoi(v.c_str());
    if (k == "mem") info.memoryBytes = std::strtoull(v.c_str(), nullptr, 10) * 1024;
    if (k == "disk") info.diskFreeBytes = std::strtoull(v.c_str(), nullptr, 10) * 1024;
    if (k == "gpu") info.gpus.push_back(v);
    if (k == "device") info.devices.push_back(v);
  }
  if (info.trainerVersion.empty())
    info.problem = installHint(s.host().label(), info.trainer);
  else if (info.trainerVersion != trainerVersionLine())
    info.problem = s.host().label() + ": the host's " + info.trainer + " is \"" +
                   info.trainerVersion + "\", this NetLoom is \"" + trainerVersionLine() +
                   "\": update it there with `git pull && scripts/setup.sh node`";
  return info;
}

namespace {

// Images stay where they are: a folder of them (or a list naming them) is not
// uploaded, so the host must hold it, at the path given (absolute, as a shared file
// system or a copy made beforehand has it).
Status checkImagesThere(SshSession& s, proto::Project& project, const SubmitOptions& o) {
  for (auto& [field, path] : imagePaths(project)) {
    fs::path local = *path;
    if (local.is_relative() && !o.projectDir.empty()) local = fs::path(o.projectDir) / local;
    auto there = s.stat(local.string());
    if (!there) return there.error();
    if (!there->exists)
      return makeError(field + ": " + local.string() + " is not on " + s.host().label() +
                       ": images are not uploaded with a job; copy them to the host and "
                       "give their path there");
    *path = local.string();
  }
  return {};
}

// A data file of the job, `local` here: the host's own copy where asked and present
// (set in `df`, true), else nothing (false).
Result<bool> useHostCopy(SshSession& s, const remotepb::Host& host, const fs::path& local,
                         remotepb::DataFile& df) {
  if (!local.is_absolute() || (!host.prefer_host_data() && fs::is_regular_file(local)))
    return false;
  auto there = s.stat(local.string());
  if (!there) return there.error();
  if (!there->exists || there->isDir) return false;
  df.set_remote_path(local.string());
  df.set_bytes(int64_t(there->size));
  return true;
}

// Uploads `local` once under its checksum, reused by every later job; its path on
// the host.
Result<std::string> uploadData(SshSession& s, const HostInfo& probe, const fs::path& local,
                               const SubmitOptions& o, remotepb::DataFile& df) {
  const std::string label = s.host().label();
  auto sum = sha256File(local.string());
  if (!sum) return sum.error();
  const uint64_t bytes = fs::file_size(local);
  const std::string dir = probe.workDir + "/data/" + *sum;
  auto target = bundlePath(dir, local.filename().string());
  if (!target) return target.error();
  auto there = s.stat(*target);
  if (!there) return there.error();
  if (!there->exists || there->size != bytes) {
    if (probe.diskFreeBytes > 0 && probe.diskFreeBytes < bytes)
      return makeError(label + ": the host's disk is full: " + mib(probe.diskFreeBytes) +
                       " free in " + probe.workDir + ", " + local.string() + " needs " +
                       mib(bytes));
    if (Status st = s.makeDirs(dir); !st) return st.error();
    auto progress = [&](uint64_t done, uint64_t total) {
      if (o.progress) o.progress(local.filename().string(), done, total);
    };
    if (Status st = s.uploadFile(local.string(), *target, progress); !st) return st.error();
    df.set_uploaded(true);
  }
  df.set_remote_path(*target);
  df.set_sha256(*sum);
  df.set_bytes(int64_t(bytes));
  return *target;
}

// The dataset: the host's own copy where asked and present, else uploaded; the
// project then names the files where they are on the host.
Status placeData(SshSession& s, const remotepb::Host& host, const HostInfo& probe,
                 proto::Project& project, const SubmitOptions& o, remotepb::JobRecord& job) {
  for (auto& [field, path] : dataPaths(project)) {
    remotepb::DataFile* df = job.add_data();
    fs::path local = *path;
    if (local.is_relative() && !o.projectDir.empty()) local = fs::path(o.projectDir) / local;
    df->set_local_path(local.string());
    auto hostCopy = useHostCopy(s, host, local, *df);
    if (!hostCopy) return hostCopy.error();
    if (*hostCopy) {
      *path = local.string();
      continue;
    }
    if (!fs::is_regular_file(local))
      return makeError(field + ": " + local.string() + " is neither here nor on " +
                       s.host().label());
    auto target = uploadData(s, probe, local, o, *df);
    if (!target) return target.error();
    *path = *target;
  }
  return {};
}

}  // namespace

Result<remotepb::JobRecord> submitJob(SshSession& s, const remotepb::Host& host,
                                      const proto::Project& project, const SubmitOptions& o) {
  auto probe = probeHost(s, host);
  if (!probe) return probe.error();
  if (probe->trainerVersion.empty() || (!o.anyVersion && !probe->problem.empty()))
    return makeError(probe->problem);

  remotepb::JobRecord job;
  job.set_id(newJobId());
  *job.mutable_host() = host;
  job.set_dir(probe->workDir + "/jobs/" + job.id());
  job.set_project_name(project.name());
  job.set_submitted(utcNow());
  job.set_client_version(NETLOOM_VERSION);
  job.set_trainer_version(probe->trainerVersion);
  job.set_local_run(o.localRun);
  for (const auto& a : o.args) job.add_args(a);

  proto::Project remoteProject = project;
  if (Status st = checkImagesThere(s, remoteProject, o); !st) return st.error();
  if (Status st = placeData(s, host, *probe, remoteProject, o, job); !st) return st.error();
  if (Status st = s.makeDirs(job.dir()); !st) return st.error();
  const std::pair<const char*, std::string> bundle[] = {
      {"project.nlproj", projectToText(remoteProject)}, {"job.txtpb", recordToText(job)}};
  for (const auto& [name, bytes] : bundle) {
    auto target = bundlePath(job.dir(), name);
    if (!target) return target.error();
    if (Status st = s.uploadBytes(bytes, *target); !st) return st.error();
  }
  if (o.launch)
    if (Status st = launchJob(s, job); !st) return st.error();
  return job;
}

Status launchJob(SshSession& s, remotepb::JobRecord& job, const std::string& secret) {
  const std::string trainer = trainerOf(job.host());
  // A rank's secret crosses on standard input into the environment the trainer
  // inherits: no command line or file holds it.
  const std::string script =
      secret.empty()
          ? std::string(kStart)
          : std::string("IFS= read -r NETLOOM_RANK_SECRET; export NETLOOM_RANK_SECRET; ") + kStart;
  std::vector<std::string> argv{"sh", "-c", script, "sh", job.dir(), trainer};
  argv.insert(argv.end(), job.args().begin(), job.args().end());
  auto r = s.run(argv, secret.empty() ? std::string() : secret + "\n");
  if (!r) return r.error();
  const std::string label = s.host().label();
  if (r->exitStatus == 127) return makeError(installHint(label, trainer));
  if (r->exitStatus != 0) return makeError(label + ": the job did not start: " + r->err);
  job.set_pid(std::atol(r->out.c_str()));
  if (job.pid() <= 0) return makeError(label + ": the job did not report its process");
  return {};
}

namespace {

JobStatus parseStatus(const std::string& id, const std::string& line) {
  JobStatus st;
  st.id = id;
  std::istringstream in(line);
  std::string code, steps;
  in >> st.state >> code >> st.started >> steps;
  if (st.state == "missing" || st.state.empty()) st.state = "unknown";
  if (code != "-" && !code.empty()) st.exitCode = std::atoi(code.c_str());
  if (st.state == "stopped" && !steps.empty() && steps != "-")
    st.stoppedAtStep = std::atoll(steps.c_str());
  return st;
}

}  // namespace

std::string JobStatus::describe() const {
  if (state == "stopped")
    return stoppedAtStep >= 0 ? "stopped at step " + std::to_string(stoppedAtStep) : "stopped";
  if (state == "failed" && !reason.empty()) return "failed: " + reason;
  if (state == "failed") return "failed (exit status " + std::to_string(exitCode) + ")";
  if ((state == "pending" || state == "requeued") && !reason.empty())
    return state + " (" + reason + ")";
  return state;
}

Result<JobStatus> jobStatus(SshSession& s, const remotepb::JobRecord& job) {
  if (!job.slurm_job_id().empty()) return slurmStatus(s, job);
  auto r = s.run({"sh", "-c", kStatus, "sh", job.dir()});
  if (!r) return r.error();
  return parseStatus(job.id(), r->out);
}

Result<std::vector<JobStatus>> listJobs(SshSession& s, const remotepb::Host& host) {
  auto work = workDirOf(s, host);
  if (!work) return work.error();
  auto r = s.run({"sh", "-c", kList, "sh", *work + "/jobs", kStatus});
  if (!r) return r.error();
  std::vector<JobStatus> jobs;
  std::istringstream lines(r->out);
  for (std::string line; std::getline(lines, line);) {
    auto tab = line.find('\t');
    if (tab == std::string::npos || !isJobId(line.substr(0, tab))) continue;
    const std::string id = line.substr(0, tab);
    auto tab2 = line.find('\t', tab + 1);
    if (tab2 == std::string::npos) continue;
    // The record's text-format string: quoted, with \" and \\ escaped.
    std::string project;
    remotepb::JobRecord named;
    if (recordFromText("project_name: " + line.substr(tab + 1, tab2 - tab - 1), id, named))
      project = named.project_name();
    const size_t sp = tab2;
    if (host.has_slurm()) {
      // A job queued through sbatch: Slurm knows where it is (its record names it).
      remotepb::JobRecord job;
      job.set_id(id);
      job.set_dir(*work + "/jobs/" + id);
      auto text = s.run({"cat", job.dir() + "/job.txtpb"});
      remotepb::JobRecord held;
      if (text && text->exitStatus == 0 && recordFromText(text->out, id, held).ok() &&
          !held.slurm_job_id().empty()) {
        job.set_slurm_job_id(held.slurm_job_id());
        if (auto st = slurmStatus(s, job)) {
          jobs.push_back(*st);
          jobs.back().project = project;
          continue;
        }
      }
    }
    jobs.push_back(parseStatus(id, line.substr(sp + 1)));
    jobs.back().project = project;
  }
  return jobs;
}

std::string signalCommand(const remotepb::JobRecord& job, const std::string& signal) {
  if (!job.slurm_job_id().empty()) {
    auto cmd = slurmSignalCommand(job, signal);
    return cmd ? *cmd : shellCommand({"echo", cmd.error().message}) + " >&2; false";
  }
  // setsid made the job's shell its process group's leader: the group is -pid. A
  // stopped group also needs CONT to act on TERM.
  const std::string group = "-" + std::to_string(job.pid());
  std::string cmd = shellCommand({"kill", "-s", signal, "--", group});
  // The job may end between the two (a step is short): TERM reaching it is what counts.
  if (signal == "TERM")
    cmd += " && { " + shellCommand({"kill", "-s", "CONT", "--", group}) + " 2>/dev/null || :; }";
  return cmd;
}

Status signalJob(SshSession& s, const remotepb::JobRecord& job, const std::string& signal) {
  if (signal != "TERM" && signal != "KILL" && signal != "STOP" && signal != "CONT")
    return makeError("unknown signal " + signal);
  if (!job.slurm_job_id().empty()) {
    auto cmd = slurmSignalCommand(job, signal);
    if (!cmd) return cmd.error();
  } else if (job.pid() <= 0) {
    return makeError(job.id() + ": no process recorded");
  }
  auto r = s.runRaw(signalCommand(job, signal));
  if (!r) return r.error();
  if (r->exitStatus != 0) return makeError(s.host().label() + ": " + job.id() + ": " + r->err);
  return {};
}

Result<bool> markJobFailed(SshSession& s, const remotepb::JobRecord& job, int64_t wholeBytes,
                           const std::string& why) {
  // The script's folder is the job's, for df.
  proto::TrainEvent e;
  e.set_time(double(std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()) /
             1000.0);
  e.mutable_failed()->set_message(why);
  auto r =
      s.run({"sh", "-c", std::string("cd \"$4\" && ") + kMarkFailed, "sh", job.dir() + "/events.pb",
             std::to_string(wholeBytes), std::to_string(job.pid()), job.dir()},
            encodeEvent(e));
  if (!r) return r.error();
  if (r->out.rfind("short", 0) == 0)
    return makeError(job.dir() + "/events.pb is shorter than the " + std::to_string(wholeBytes) +
                     " bytes already read from it: it was replaced on the host");
  if (r->out.rfind("full", 0) == 0)
    return makeError(s.host().label() + ": the host's disk is full (" +
                     std::to_string(std::atoll(r->out.c_str() + 4) / 1024) + " MiB free in " +
                     job.dir() + "): " + why);
  return r->out.rfind("appended", 0) == 0;
}

Status fetchJob(SshSession& s, const remotepb::JobRecord& job, const std::string& localDir,
                bool skipEvents) {
  std::error_code ec;
  fs::create_directories(localDir, ec);
  if (ec) return makeError(localDir + ": cannot create: " + ec.message());
  auto entries = s.listDir(job.dir());
  if (!entries) return entries.error();
  for (const auto& e : *entries) {
    if (e.isDir) {
      if (e.name != "checkpoints") continue;
      auto steps = s.listDir(job.dir() + "/checkpoints");
      if (!steps) return steps.error();
      for (const auto& step : *steps) {
        if (step.name.find(".tmp") != std::string::npos) continue;
        const std::string from = job.dir() + "/checkpoints/" + step.name;
        const fs::path to = fs::path(localDir) / "checkpoints" / step.name;
        if (!step.isDir) {
          fs::create_directories(to.parent_path(), ec);
          if (Status st = s.downloadFile(from, to.string()); !st) return st;
          continue;
        }
        auto files = s.listDir(from);
        if (!files) return files.error();
        fs::create_directories(to, ec);
        for (const auto& f : *files)
          if (!f.isDir)
            if (Status st = s.downloadFile(from + "/" + f.name, (to / f.name).string()); !st)
              return st;
      }
      continue;
    }
    if (e.name.size() > 5 && e.name.substr(e.name.size() - 5) == ".part") continue;
    if (skipEvents && (e.name == "events.pb" || e.name == "project.nlproj")) continue;
    if (Status st = s.downloadFile(job.dir() + "/" + e.name, localDir + "/" + e.name); !st)
      return st;
  }
  return {};
}

Status deleteJob(SshSession& s, const remotepb::JobRecord& job) {
  // Only a folder named like a job under a jobs/ folder: never anything a record
  // edited by hand might point at.
  const fs::path dir = job.dir();
  if (!dir.is_absolute() || !isJobId(dir.filename().string()) ||
      dir.parent_path().filename() != "jobs" || dir.string().find("/../") != std::string::npos)
    return makeError(job.dir() + ": not a job folder; nothing was removed");
  if (!job.slurm_job_id().empty()) {
    // Queued or running, its nodes would write into the folder: it stays.
    auto st = slurmStatus(s, job);
    if (!st) return st.error();
    if (st->state == "pending" || st->state == "running" || st->state == "requeued" ||
        st->state == "paused")
      return makeError(job.id() + " is " + st->describe() + " in Slurm: cancel it first");
  }
  auto r = s.run({"sh", "-c", kDelete, "sh", job.dir()});
  if (!r) return r.error();
  if (r->exitStatus == 3) return makeError(job.id() + " is still running: cancel it first");
  if (r->exitStatus != 0)
    return makeError(s.host().label() + ": cannot remove " + job.dir() + ": " + r->err);
  return {};
}

}  // namespace netloom::remote
