// netloom-job: remote training jobs from a terminal, on the same library as the IDE.
//   netloom-job test   --host H                 connect and report the host
//   netloom-job submit --host H [--wait] [--devices D] PROJECT.nlproj
//   netloom-job submit --hosts A,B,... [--wait] PROJECT.nlproj  one data-parallel rank on each
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

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/io/progress.h"
#include "engine/io/project_file.h"
#include "remote/follow.h"
#include "remote/hosts.h"
#include "remote/slurm.h"

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
      "H: a saved host's name or [user@]address[:port]\n"
      "options: --identity FILE  --known-hosts FILE  --trainer PATH  --workdir DIR\n"
      "         --hosts-file FILE (saved hosts)  --any-version\n"
      "Slurm (the host is a cluster's login node; over a saved host's settings):\n"
      "         --slurm  --partition P  --account A  --qos Q  --time LIMIT  --nodes N\n"
      "         --gpus-per-node G  --tasks-per-node T  --cpus-per-task C  --sbatch --OPT=V\n"
      "submit --hosts A,B,...: one data-parallel rank on each host (rank 0 on the first,\n"
      "         whose stream is the job's); stop, cancel and fetch reach every rank\n");
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string verb = argv[1];
  std::string hostText, hostsPath = defaultHostsPath(), fetchTo;
  std::string rankHosts;  // --hosts a,b: one data-parallel rank on each
  remotepb::Host overrides;
  SubmitOptions submit;
  bool wait = false;
  std::string target;
  // Options that override a saved host's settings.
  auto hostOption = [&](const std::string& a) -> std::string* {
    if (a == "--identity") return overrides.mutable_identity();
    if (a == "--known-hosts") return overrides.mutable_known_hosts();
    if (a == "--trainer") return overrides.mutable_trainer();
    if (a == "--workdir") return overrides.mutable_work_dir();
    if (a == "--partition") return overrides.mutable_slurm()->mutable_partition();
    if (a == "--account") return overrides.mutable_slurm()->mutable_account();
    if (a == "--qos") return overrides.mutable_slurm()->mutable_qos();
    if (a == "--time") return overrides.mutable_slurm()->mutable_time_limit();
    return nullptr;
  };
  // Slurm's counts: the host becomes (or stays) a Slurm cluster's login node.
  auto slurmCount = [&](const std::string& a) -> std::function<void(int)> {
    remotepb::SlurmSettings* s = nullptr;
    auto slurm = [&] { return s ? s : (s = overrides.mutable_slurm()); };
    if (a == "--nodes") return [slurm](int n) { slurm()->set_nodes(n); };
    if (a == "--gpus-per-node") return [slurm](int n) { slurm()->set_gpus_per_node(n); };
    if (a == "--tasks-per-node") return [slurm](int n) { slurm()->set_tasks_per_node(n); };
    if (a == "--cpus-per-task") return [slurm](int n) { slurm()->set_cpus_per_task(n); };
    return nullptr;
  };
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--host") {
      if (!value(hostText)) return usage();
    } else if (std::string* field = hostOption(a)) {
      if (!value(*field)) return usage();
    } else if (auto count = slurmCount(a)) {
      if (!value(v)) return usage();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 0 || n > 100000)
        return fail(a + " needs a whole number, not '" + v + "'");
      count(int(n));
    } else if (a == "--sbatch") {
      if (!value(v)) return usage();
      overrides.mutable_slurm()->add_extra(v);
    } else if (a == "--slurm") {
      overrides.mutable_slurm();
    } else if (a == "--hosts-file") {
      if (!value(hostsPath)) return usage();
    } else if (a == "--hosts") {
      if (!value(rankHosts)) return usage();
    } else if (a == "--to") {
      if (!value(fetchTo)) return usage();
    } else if (a == "--devices" || a == "--max-steps" || a == "--epochs" || a == "--seed") {
      if (!value(v)) return usage();
      submit.args.insert(submit.args.end(), {a, v});
    } else if (a == "--any-version") {
      submit.anyVersion = true;
    } else if (a == "--wait") {
      wait = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "netloom-job: unknown option '%s'\n", a.c_str());
      return usage();
    } else {
      target = a;
    }
  }
  auto saved = loadHosts(hostsPath);
  if (!saved) return fail(saved.error().message);
  auto hostFor = [&]() -> Result<remotepb::Host> {
    auto h = resolveHost(hostText, *saved);
    if (!h) return h;
    // What the command line says wins over the saved host.
    h->MergeFrom(overrides);
    return h;
  };
  const std::string jobsDir = defaultJobsDir();

  if (verb == "submit" && !rankHosts.empty()) {
    if (!hostText.empty()) return fail("give --host or --hosts, not both");
    if (target.empty()) return usage();
    std::vector<remotepb::Host> hosts;
    std::vector<std::unique_ptr<SshSession>> sessions;
    std::vector<SshSession*> raw;
    std::stringstream names(rankHosts);
    for (std::string name; std::getline(names, name, ',');) {
      if (name.empty()) return fail("--hosts " + rankHosts + ": an empty host name");
      auto h = resolveHost(name, *saved);
      if (!h) return fail(h.error().message);
      h->MergeFrom(overrides);
      auto session = connectTo(*h);
      if (!session) return fail(session.error().message);
      hosts.push_back(*h);
      raw.push_back(session->get());
      sessions.push_back(std::move(*session));
    }
    auto project = loadProject(target);
    if (!project) return fail(project.error().message);
    submit.projectDir = std::filesystem::absolute(target).parent_path().string();
    double timeout = project->train().distributed().timeout_s() > 0
                         ? project->train().distributed().timeout_s()
                         : 60.0;
    auto job = submitRanks(raw, hosts, *project, submit, timeout);
    if (!job) return fail(job.error().message);
    if (Status st = saveJobRecord(jobsDir, *job); !st) return fail(st.message());
    std::printf("%s %s\n", job->id().c_str(), job->dir().c_str());
    std::fflush(stdout);
    if (!wait) return 0;
    // Rank 0's session follows the job; the others are not needed any more.
    std::unique_ptr<SshSession> first = std::move(sessions[0]);
    sessions.clear();
    return follow(*job, std::move(first));
  }
  if (verb == "test" || verb == "submit" || (verb == "list" && !hostText.empty())) {
    if (hostText.empty()) return usage();
    auto host = hostFor();
    if (!host) return fail(host.error().message);
    if (host->has_slurm())  // before anything connects
      if (Status st = validateSlurm(host->slurm()); !st) return fail(st.message());
    auto session = connectTo(*host);
    if (!session) return fail(session.error().message);
    if (verb == "test") {
      auto info = probeHost(**session, *host);
      if (!info) return fail(info.error().message);
      std::printf("%s: connected, host key known\n%s", hostSpec(*host).label().c_str(),
                  info->summary().c_str());
      return info->problem.empty() ? 0 : 1;
    }
    if (verb == "list") {
      auto jobs = listJobs(**session, *host);
      if (!jobs) return fail(jobs.error().message);
      std::printf("%-28s  %-24s  %-20s  %-24s  %s\n", "JOB", "STATE", "STARTED", "HOST", "PROJECT");
      for (const auto& j : *jobs)
        std::printf("%-28s  %-24s  %-20s  %-24s  %s\n", j.id.c_str(), j.describe().c_str(),
                    j.started.c_str(), hostTitle(*host).c_str(), j.project.c_str());
      return 0;
    }
    if (target.empty()) return usage();
    auto project = loadProject(target);
    if (!project) return fail(project.error().message);
    submit.projectDir = std::filesystem::absolute(target).parent_path().string();
    submit.progress = [](const std::string& name, uint64_t done, uint64_t total) {
      if (done == total || done % (8 << 20) < 32768)
        std::fprintf(stderr, "netloom-job: uploading %s: %llu of %llu MiB\n", name.c_str(),
                     (unsigned long long)(done >> 20), (unsigned long long)(total >> 20));
    };
    auto job = host->has_slurm() ? submitSlurm(**session, *host, *project, submit)
                                 : submitJob(**session, *host, *project, submit);
    if (!job) return fail(job.error().message);
    if (!job->slurm_job_id().empty())
      std::fprintf(stderr, "netloom-job: Slurm job %s\n", job->slurm_job_id().c_str());
    for (const auto& d : job->data())
      std::fprintf(stderr, "netloom-job: %s -> %s (%s)\n", d.local_path().c_str(),
                   d.remote_path().c_str(),
                   d.uploaded()         ? "uploaded"
                   : d.sha256().empty() ? "the host's copy"
                                        : "reused");
    if (Status st = saveJobRecord(jobsDir, *job); !st) return fail(st.message());
    std::printf("%s %s\n", job->id().c_str(), job->dir().c_str());
    std::fflush(stdout);
    return wait ? follow(*job, std::move(*session)) : 0;
  }
  if (verb == "list") {
    // Each job's state from its host, one connection per host; a host that cannot be
    // reached (or whose key is not known) reads "unreachable".
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
  if (target.empty()) return usage();
  auto job = loadJobRecord(jobsDir, target);
  if (!job) return fail(job.error().message);
  job->mutable_host()->MergeFrom(overrides);
  auto session = connectTo(job->host());
  if (!session) return fail(session.error().message);
  if (verb == "attach") return follow(*job, std::move(*session), nullptr, true);
  if (verb == "cancel" || verb == "stop") {
    const std::string signal = verb == "cancel" ? "KILL" : "TERM";
    if (Status s = signalJob(**session, *job, signal); !s) return fail(s.message());
    std::printf("%s: %s\n", job->id().c_str(),
                verb == "stop" ? "asked to stop; it stops after the current step, with a checkpoint"
                               : "cancelled");
    for (const remotepb::RankJob& rank : job->ranks()) {  // a job on several hosts
      remotepb::JobRecord other = *job;
      *other.mutable_host() = rank.host();
      other.mutable_host()->MergeFrom(overrides);
      other.set_dir(rank.dir());
      other.set_pid(rank.pid());
      auto there = connectTo(other.host());
      if (!there) return fail(there.error().message);
      if (Status s = signalJob(**there, other, signal); !s) return fail(s.message());
    }
    return 0;
  }
  if (verb == "fetch") {
    std::string to = fetchTo.empty() ? job->id() : fetchTo;
    if (Status s = fetchJob(**session, *job, to); !s) return fail(s.message());
    for (int r = 0; r < job->ranks_size(); ++r) {  // the other ranks' logs and results
      remotepb::JobRecord other = *job;
      *other.mutable_host() = job->ranks(r).host();
      other.mutable_host()->MergeFrom(overrides);
      other.set_dir(job->ranks(r).dir());
      auto there = connectTo(other.host());
      if (!there) return fail(there.error().message);
      std::string rankDir = to + "/rank-" + std::to_string(r + 1);
      if (Status s = fetchJob(**there, other, rankDir, true); !s) return fail(s.message());
    }
    std::printf("%s\n", to.c_str());
    return 0;
  }
  if (verb == "delete") {
    if (Status s = deleteJob(**session, *job); !s) return fail(s.message());
    return 0;
  }
  return usage();
}
