// netloom-job: remote training jobs from a terminal, on the same library as the IDE.
//   netloom-job test   --host H                 connect and report the host
//   netloom-job submit --host H [--wait] [--devices D] PROJECT.nlproj
//   netloom-job submit --hosts A,B,... [--ranks-per-host N] [--wait] PROJECT.nlproj
//                                               N ranks on each host (1: one each)
//   netloom-job submit --host H --slurm [--partition P ...] PROJECT.nlproj  through sbatch
//   netloom-job list   [--host H]               jobs submitted from here, or on H
//   netloom-job attach ID                       progress until the job ends
//   netloom-job stop|cancel ID                  SIGTERM (clean, with a checkpoint) | SIGKILL
//   netloom-job fetch  ID [--to DIR]            checkpoints, weights, events, log
//   netloom-job delete ID                       remove a finished job's folder on the host
// H is a saved host's name (the IDE's Hosts dialog, ~/.config/netloom/hosts.txtpb)
// or [user@]address[:port]. Keys come from --identity FILE, ssh-agent, ~/.ssh/config
// or ~/.ssh's keys; host keys from ~/.ssh/known_hosts (or --known-hosts FILE). An
// unknown host key is shown with its fingerprint and accepted only when the user
// types "yes"; a changed one is refused.
#include <termios.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/io/output_file.h"
#include "engine/io/progress.h"
#include "engine/io/project_file.h"
#include "remote/follow.h"
#include "remote/hosts.h"
#include "remote/slurm.h"
#include "remote/sweep_trials.h"

using namespace netloom;
using namespace netloom::remote;

namespace {

int usage() {
  std::fprintf(
      stderr,
      "usage: netloom-job test --host H\n"
      "       netloom-job submit --host H [--wait] [--devices D] [--max-steps N] PROJECT.nlproj\n"
      "       netloom-job list [--host H]\n"
      "       netloom-job attach|stop|cancel|delete ID\n"
      "       netloom-job fetch ID [--to DIR]\n"
      "       netloom-job sweep PROJECT.nlproj --hosts A,B,... [--per-host N] [--sweep-json F]\n"
      "H: a saved host's name or [user@]address[:port]\n"
      "options: --identity FILE  --known-hosts FILE  --trainer PATH  --workdir DIR\n"
      "         --hosts-file FILE (saved hosts)  --any-version\n"
      "Slurm (the host is a cluster's login node; over a saved host's settings):\n"
      "         --slurm  --partition P  --account A  --qos Q  --time LIMIT  --nodes N\n"
      "         --gpus-per-node G  --tasks-per-node T  --cpus-per-task C  --sbatch --OPT=V\n"
      "submit --hosts A,B,... [--ranks-per-host N]: N ranks on each host (default 1; rank 0\n"
      "         on the first, whose stream is the job's), parallel as the project's\n"
      "         train.distributed says; stop, cancel and fetch reach every rank\n");
  return 2;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "netloom-job: %s\n", message.c_str());
  return 1;
}

bool askUnknown(const HostKey& k, const HostSpec& h) {
  std::fprintf(stderr,
               "The authenticity of host %s can't be established.\n%s key fingerprint is %s.\n"
               "Type 'yes' to trust it and continue: ",
               h.label().c_str(), k.type.c_str(), k.fingerprint.c_str());
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "yes";
}

// Asked on the terminal without echo; kept only in memory.
std::string askPassphrase(const std::string& what) {
  std::fprintf(stderr, "Enter the %s: ", what.c_str());
  termios old{};
  const bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
  if (tty) {
    termios quiet = old;
    quiet.c_lflag &= tcflag_t(~ECHO);
    tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  std::string secret;
  std::getline(std::cin, secret);
  if (tty) tcsetattr(STDIN_FILENO, TCSANOW, &old);
  std::fprintf(stderr, "\n");
  return secret;
}

Result<std::unique_ptr<SshSession>> connectTo(const remotepb::Host& host) {
  HostSpec spec = hostSpec(host);
  return openSession(
      spec, [&](const HostKey& k) { return askUnknown(k, spec); }, askPassphrase);
}

// Streams a job's events to the progress printer until it ends; 0 when it
// finished, 1 when it failed.
int follow(const remotepb::JobRecord& job, std::unique_ptr<SshSession> s,
           std::function<Status(SshSession&, remotepb::JobRecord&)> launch = nullptr,
           bool attaching = false) {
  ProgressPrinter progress(stderr);
  // Attaching, what was written before is taken in quietly: the progress starts
  // where the run is now, not from its first step.
  int64_t backlog = 0;
  if (attaching && s) {
    auto size = s->run(
        {"sh", "-c", "wc -c < \"$1\" 2>/dev/null || echo 0", "sh", job.dir() + "/events.pb"});
    if (size) backlog = std::atoll(size->out.c_str());
    progress.setCatchingUp(backlog > 0);
  }
  FollowHooks hooks;
  hooks.onEvents = [&](int64_t at, const std::string& bytes,
                       const std::vector<proto::TrainEvent>& events) {
    for (const auto& e : events) progress.onEvent(e);
    if (at + int64_t(bytes.size()) >= backlog) progress.caughtUp();
  };
  hooks.onNotice = [](const std::string& text) {
    std::fprintf(stderr, "netloom-job: %s\n", text.c_str());
  };
  hooks.passphrase = askPassphrase;
  hooks.launch = std::move(launch);
  auto end = followJob(job, 0, std::move(s), hooks);
  if (!end) return fail(end.error().message);
  if (end->how == FollowEnd::How::Failed) return fail("the job failed: " + end->message);
  return 0;
}

// What the command line says.
struct JobArgs {
  std::string verb, hostText, hostsPath = defaultHostsPath(), fetchTo, target;
  std::string rankHosts;     // --hosts a,b: one data-parallel rank on each
  remotepb::Host overrides;  // over a saved host's settings
  SubmitOptions submit;
  bool wait = false;
  std::string error;  // a value the option cannot take (exit status 1)
  int perHost = 0;    // sweep: trials at once on each host (0: a GPU each, else one)
  std::string sweepJson, sweepDir;
};

// "--sbatch --exclusive": the value is the next word even where it starts with a dash.
std::vector<std::string> joinSbatchValues(int argc, char** argv) {
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sbatch" && i + 1 < argc) a += std::string("=") + argv[++i];
    words.push_back(a);
  }
  return words;
}

// The options every verb takes (each ignores what it has no use for).
void addOptions(CLI::App& verb, JobArgs& a) {
  verb.add_option("target", a.target, "PROJECT.nlproj (submit) or a job's ID");
  verb.add_option("--host", a.hostText, "a saved host's name or [user@]address[:port]");
  verb.add_option("--hosts", a.rankHosts,
                  "submit: the job's ranks on A,B,... (--ranks-per-host each)");
  verb.add_option("--ranks-per-host", a.submit.ranksPerHost,
                  "submit --hosts: ranks on each host, a GPU or a share of the cores each")
      ->check(CLI::Range(1, 4096));
  verb.add_option("--hosts-file", a.hostsPath, "the saved hosts");
  verb.add_option("--per-host", a.perHost,
                  "sweep: trials at once on each host (default: one on each of its GPUs, "
                  "else one)")
      ->check(CLI::Range(1, 4096));
  verb.add_option("--sweep-json", a.sweepJson, "sweep: write {\"trials\": [...]} to FILE");
  verb.add_option("--sweep-dir", a.sweepDir,
                  "sweep: the trials' folders and sweep.json (default: runs/sweep-<project>/)");
  verb.add_option("--to", a.fetchTo, "fetch: the folder to fetch into");
  verb.add_flag("--wait", a.wait, "submit: follow the job to its end");
  verb.add_flag("--any-version", a.submit.anyVersion, "accept another netloom-train version");
  const std::pair<const char*, std::function<void(const std::string&)>> host[] = {
      {"--identity", [&a](const std::string& v) { a.overrides.set_identity(v); }},
      {"--known-hosts", [&a](const std::string& v) { a.overrides.set_known_hosts(v); }},
      {"--trainer", [&a](const std::string& v) { a.overrides.set_trainer(v); }},
      {"--workdir", [&a](const std::string& v) { a.overrides.set_work_dir(v); }},
      {"--partition",
       [&a](const std::string& v) { a.overrides.mutable_slurm()->set_partition(v); }},
      {"--account", [&a](const std::string& v) { a.overrides.mutable_slurm()->set_account(v); }},
      {"--qos", [&a](const std::string& v) { a.overrides.mutable_slurm()->set_qos(v); }},
      {"--time", [&a](const std::string& v) { a.overrides.mutable_slurm()->set_time_limit(v); }},
  };
  for (const auto& [name, set] : host) verb.add_option_function<std::string>(name, set);
  verb.add_option_function<std::vector<std::string>>(
      "--sbatch",
      [&a](const std::vector<std::string>& extra) {
        for (const std::string& e : extra) a.overrides.mutable_slurm()->add_extra(e);
      },
      "an sbatch option, --OPT=V (repeatable)");
  verb.add_flag_callback(
      "--slurm", [&a] { a.overrides.mutable_slurm(); }, "the host is a Slurm cluster's login node");
  // Slurm's counts: the host becomes (or stays) a Slurm cluster's login node.
  using Count = void (remotepb::SlurmSettings::*)(int32_t);
  const std::pair<const char*, Count> counts[] = {
      {"--nodes", &remotepb::SlurmSettings::set_nodes},
      {"--gpus-per-node", &remotepb::SlurmSettings::set_gpus_per_node},
      {"--tasks-per-node", &remotepb::SlurmSettings::set_tasks_per_node},
      {"--cpus-per-task", &remotepb::SlurmSettings::set_cpus_per_task}};
  for (const auto& [name, set] : counts)
    verb.add_option_function<std::string>(
        name, [&a, name = std::string(name), set = set](const std::string& v) {
          char* end = nullptr;
          long n = std::strtol(v.c_str(), &end, 10);
          if (v.empty() || *end || n < 0 || n > 100000)
            a.error = name + " needs a whole number, not '" + v + "'";
          else
            (a.overrides.mutable_slurm()->*set)(int32_t(n));
        });
  // Passed on to netloom-train.
  for (const char* name : {"--devices", "--max-steps", "--epochs", "--seed"})
    verb.add_option_function<std::string>(
        name,
        [&a, name](const std::string& v) {
          a.submit.args.insert(a.submit.args.end(), {name, v});
        },
        "passed on to netloom-train");
}

// Parses the command line into `a`; an exit status where it ends there (help, or a
// command line it cannot read).
std::optional<int> parseJobArgs(int argc, char** argv, JobArgs& a) {
  CLI::App app{"netloom-job: remote training jobs from a terminal", "netloom-job"};
  app.require_subcommand(1);
  app.footer(
      "H: a saved host's name or [user@]address[:port]\n"
      "Slurm (the host is a cluster's login node; over a saved host's settings):\n"
      "  --slurm --partition P --account A --qos Q --time LIMIT --nodes N\n"
      "  --gpus-per-node G --tasks-per-node T --cpus-per-task C --sbatch --OPT=V");
  const std::pair<const char*, const char*> verbs[] = {
      {"test", "connect to --host H and report the host"},
      {"submit", "send PROJECT.nlproj to --host H (or one rank to each of --hosts A,B,...)"},
      {"list", "jobs submitted from here, or on --host H"},
      {"attach", "follow job ID's progress until it ends"},
      {"stop", "stop job ID after its current step, with a checkpoint (SIGTERM)"},
      {"cancel", "end job ID now (SIGKILL)"},
      {"fetch", "fetch job ID's checkpoints, weights, events and log [--to DIR]"},
      {"delete", "remove a finished job's folder on its host"},
      {"sweep", "run PROJECT.nlproj's sweep with its trials on --hosts A,B,... (or --host H)"}};
  for (const auto& [name, what] : verbs) {
    CLI::App* verb = app.add_subcommand(name, what);
    addOptions(*verb, a);
    verb->callback([&a, name = std::string(name)] { a.verb = name; });
  }
  std::vector<std::string> words = joinSbatchValues(argc, argv);
  std::reverse(words.begin(), words.end());  // CLI11 reads them from the back
  try {
    app.parse(words);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "netloom-job: %s\n", e.what());
    return usage();
  }
  if (!a.error.empty()) return fail(a.error);
  return std::nullopt;
}

// submit --hosts A,B,... [--ranks-per-host N]: N ranks on each host.
int submitToRanks(JobArgs& a, const remotepb::HostList& saved) {
  if (!a.hostText.empty() && !a.rankHosts.empty()) return fail("give --host or --hosts, not both");
  if (a.rankHosts.empty()) a.rankHosts = a.hostText;  // --host H --ranks-per-host N
  if (a.target.empty()) return usage();
  std::vector<remotepb::Host> hosts;
  std::vector<std::unique_ptr<SshSession>> sessions;
  std::vector<SshSession*> raw;
  std::stringstream names(a.rankHosts);
  for (std::string name; std::getline(names, name, ',');) {
    if (name.empty()) return fail("--hosts " + a.rankHosts + ": an empty host name");
    auto h = resolveHost(name, saved);
    if (!h) return fail(h.error().message);
    h->MergeFrom(a.overrides);
    auto session = connectTo(*h);
    if (!session) return fail(session.error().message);
    hosts.push_back(*h);
    raw.push_back(session->get());
    sessions.push_back(std::move(*session));
  }
  auto project = loadProject(a.target);
  if (!project) return fail(project.error().message);
  a.submit.projectDir = std::filesystem::absolute(a.target).parent_path().string();
  double timeout = project->train().distributed().timeout_s() > 0
                       ? project->train().distributed().timeout_s()
                       : 60.0;
  auto job = submitRanks(raw, hosts, *project, a.submit, timeout);
  if (!job) return fail(job.error().message);
  if (Status st = saveJobRecord(defaultJobsDir(), *job); !st) return fail(st.message());
  std::printf("%s %s\n", job->id().c_str(), job->dir().c_str());
  std::fflush(stdout);
  if (!a.wait) return 0;
  // Rank 0's session follows the job; the others are not needed any more.
  std::unique_ptr<SshSession> first = std::move(sessions[0]);
  sessions.clear();
  return follow(*job, std::move(first));
}

// sweep PROJECT --hosts A,B,... [--per-host N]: the project's sweep, its trials jobs on
// the hosts (SSH hosts, or Slurm clusters' login nodes), a row printed as each ends.
int sweepOnHosts(JobArgs& a, const remotepb::HostList& saved) {
  const std::string list = !a.rankHosts.empty() ? a.rankHosts : a.hostText;
  if (list.empty() || a.target.empty()) return usage();
  std::vector<remotepb::Host> hosts;
  std::stringstream names(list);
  for (std::string name; std::getline(names, name, ',');) {
    auto h = resolveHost(name, saved);
    if (!h) return fail(h.error().message);
    h->MergeFrom(a.overrides);
    if (h->has_slurm())
      if (Status st = validateSlurm(h->slurm()); !st) return fail(st.message());
    hosts.push_back(*h);
  }
  auto project = loadProject(a.target);
  if (!project) return fail(project.error().message);
  auto plan = sweep::planSweep(*project);
  if (!plan) return fail(a.target + ": " + plan.error().message), 2;
  namespace fs = std::filesystem;
  a.submit.projectDir = fs::absolute(a.target).parent_path().string();
  // Without --per-host: as many trials on each host as the fewest GPUs any has, each on
  // its own; hosts without GPUs take one trial each.
  int gpus = a.perHost > 0 ? 0 : INT32_MAX;
  for (const remotepb::Host& h : hosts) {
    if (gpus == 0) break;
    auto session =
        h.has_slurm() ? Result<std::unique_ptr<SshSession>>(makeError("Slurm")) : connectTo(h);
    auto info = session ? probeHost(**session, h) : Result<HostInfo>(session.error());
    gpus = info ? std::min(gpus, int(info->gpus.size())) : 0;
  }
  std::mutex asking;  // trials connect from threads of their own; one question at a time
  remote::RemoteTrials trials(hosts, a.perHost > 0 ? a.perHost : std::max(gpus, 1), a.submit,
                              [&](const remotepb::Host& h) {
                                std::lock_guard<std::mutex> lock(asking);
                                return connectTo(h);
                              });
  trials.setGpuEach(gpus > 0);
  sweep::SweepOptions o;
  o.folder = !a.sweepDir.empty() ? a.sweepDir
                                 : (fs::path(a.submit.projectDir) / "runs" /
                                    ("sweep-" + fs::path(a.target).stem().string()))
                                       .string();
  o.launcher = &trials;
  o.onTrial = [&](const sweep::TrialRecord& t) {
    if (t.ended()) std::printf("%s\n", sweep::trialRow(*plan, t).c_str()), std::fflush(stdout);
  };
  std::printf("sweep: %d trials, %d at once on %zu hosts; trials in %s\n%s\n", plan->trials,
              trials.capacity(), hosts.size(), o.folder.c_str(), sweep::trialHeader().c_str());
  auto result = sweep::runSweep(*project, *plan, o);
  if (!result) return fail(result.error().message);
  if (!a.sweepJson.empty())
    if (Status st = writeFileAtomic(a.sweepJson, sweep::sweepJson(*plan, *result).dump() + "\n");
        !st)
      return fail(st.message());
  if (result->best < 0) return fail("no trial of the sweep reported " + plan->objective.spec());
  std::printf("best: %s\n", sweep::trialRow(*plan, result->trials[size_t(result->best)]).c_str());
  return 0;
}

// test, submit and list on --host H.
int onHost(JobArgs& a, const remotepb::HostList& saved) {
  if (a.hostText.empty()) return usage();
  auto host = resolveHost(a.hostText, saved);
  if (host) host->MergeFrom(a.overrides);  // what the command line says wins
  if (!host) return fail(host.error().message);
  if (host->has_slurm())  // before anything connects
    if (Status st = validateSlurm(host->slurm()); !st) return fail(st.message());
  auto session = connectTo(*host);
  if (!session) return fail(session.error().message);
  if (a.verb == "test") {
    auto info = probeHost(**session, *host);
    if (!info) return fail(info.error().message);
    std::printf("%s: connected, host key known\n%s", hostSpec(*host).label().c_str(),
                info->summary().c_str());
    return info->problem.empty() ? 0 : 1;
  }
  if (a.verb == "list") {
    auto jobs = listJobs(**session, *host);
    if (!jobs) return fail(jobs.error().message);
    std::printf("%-28s  %-24s  %-20s  %-24s  %s\n", "JOB", "STATE", "STARTED", "HOST", "PROJECT");
    for (const auto& j : *jobs)
      std::printf("%-28s  %-24s  %-20s  %-24s  %s\n", j.id.c_str(), j.describe().c_str(),
                  j.started.c_str(), hostTitle(*host).c_str(), j.project.c_str());
    return 0;
  }
  if (a.target.empty()) return usage();
  auto project = loadProject(a.target);
  if (!project) return fail(project.error().message);
  a.submit.projectDir = std::filesystem::absolute(a.target).parent_path().string();
  a.submit.progress = [](const std::string& name, uint64_t done, uint64_t total) {
    if (done == total || done % (8 << 20) < 32768)
      std::fprintf(stderr, "netloom-job: uploading %s: %llu of %llu MiB\n", name.c_str(),
                   (unsigned long long)(done >> 20), (unsigned long long)(total >> 20));
  };
  auto job = host->has_slurm() ? submitSlurm(**session, *host, *project, a.submit)
                               : submitJob(**session, *host, *project, a.submit);
  if (!job) return fail(job.error().message);
  if (!job->slurm_job_id().empty())
    std::fprintf(stderr, "netloom-job: Slurm job %s\n", job->slurm_job_id().c_str());
  for (const auto& d : job->data())
    std::fprintf(stderr, "netloom-job: %s -> %s (%s)\n", d.local_path().c_str(),
                 d.remote_path().c_str(),
                 d.uploaded()         ? "uploaded"
                 : d.sha256().empty() ? "the host's copy"
                                      : "reused");
  if (Status st = saveJobRecord(defaultJobsDir(), *job); !st) return fail(st.message());
  std::printf("%s %s\n", job->id().c_str(), job->dir().c_str());
  std::fflush(stdout);
  return a.wait ? follow(*job, std::move(*session)) : 0;
}

// Each job's state from its host, one connection per host; a host that cannot be
// reached (or whose key is not known) reads "unreachable".
int listHere() {
  const std::string jobsDir = defaultJobsDir();
  std::map<std::string, std::unique_ptr<SshSession>> sessions;
  std::printf("%-28s  %-24s  %-20s  %-24s  %s\n", "JOB", "STATE", "SUBMITTED", "HOST", "PROJECT");
  for (const auto& j : listJobRecords(jobsDir)) {
    const std::string title = hostTitle(j.host());
    if (!sessions.count(title)) {
      auto s = openSession(hostSpec(j.host()), nullptr, askPassphrase);
      sessions[title] = s ? std::move(*s) : nullptr;
    }
    std::string state = "unreachable";
    if (SshSession* s = sessions[title].get())
      if (auto st = jobStatus(*s, j)) state = st->describe();
    std::printf("%-28s  %-24s  %-20s  %-24s  %s\n", j.id().c_str(), state.c_str(),
                j.submitted().c_str(), title.c_str(), j.project_name().c_str());
  }
  return 0;
}

// attach, stop, cancel, fetch and delete of job ID.
int onJob(JobArgs& a) {
  const std::string jobsDir = defaultJobsDir();
  if (a.target.empty()) return usage();
  auto job = loadJobRecord(jobsDir, a.target);
  if (!job) return fail(job.error().message);
  job->mutable_host()->MergeFrom(a.overrides);
  auto session = connectTo(job->host());
  if (!session) return fail(session.error().message);
  if (a.verb == "attach") return follow(*job, std::move(*session), nullptr, true);
  if (a.verb == "cancel" || a.verb == "stop") {
    const std::string signal = a.verb == "cancel" ? "KILL" : "TERM";
    if (Status s = signalJob(**session, *job, signal); !s) return fail(s.message());
    std::printf("%s: %s\n", job->id().c_str(),
                a.verb == "stop"
                    ? "asked to stop; it stops after the current step, with a checkpoint"
                    : "cancelled");
    for (const remotepb::RankJob& rank : job->ranks()) {  // a job on several hosts
      remotepb::JobRecord other = *job;
      *other.mutable_host() = rank.host();
      other.mutable_host()->MergeFrom(a.overrides);
      other.set_dir(rank.dir());
      other.set_pid(rank.pid());
      auto there = connectTo(other.host());
      if (!there) return fail(there.error().message);
      if (Status s = signalJob(**there, other, signal); !s) return fail(s.message());
    }
    return 0;
  }
  if (a.verb == "fetch") {
    std::string to = a.fetchTo.empty() ? job->id() : a.fetchTo;
    if (Status s = fetchJob(**session, *job, to); !s) return fail(s.message());
    for (int r = 0; r < job->ranks_size(); ++r) {  // the other ranks' logs and results
      remotepb::JobRecord other = *job;
      *other.mutable_host() = job->ranks(r).host();
      other.mutable_host()->MergeFrom(a.overrides);
      other.set_dir(job->ranks(r).dir());
      auto there = connectTo(other.host());
      if (!there) return fail(there.error().message);
      std::string rankDir = to + "/rank-" + std::to_string(r + 1);
      if (Status s = fetchJob(**there, other, rankDir, true); !s) return fail(s.message());
    }
    std::printf("%s\n", to.c_str());
    return 0;
  }
  if (a.verb == "delete") {
    if (Status s = deleteJob(**session, *job); !s) return fail(s.message());
    return 0;
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  JobArgs a;
  if (std::optional<int> end = parseJobArgs(argc, argv, a)) return *end;
  auto saved = loadHosts(a.hostsPath);
  if (!saved) return fail(saved.error().message);
  if (a.verb == "sweep") return sweepOnHosts(a, *saved);
  if (a.verb == "submit" && (!a.rankHosts.empty() || a.submit.ranksPerHost > 1))
    return submitToRanks(a, *saved);
  if (a.verb == "test" || a.verb == "submit" || (a.verb == "list" && !a.hostText.empty()))
    return onHost(a, *saved);
  if (a.verb == "list") return listHere();
  return onJob(a);
}
