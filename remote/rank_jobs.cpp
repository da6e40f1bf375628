// Jobs on several hosts (remote/jobs.h's submitRanks and rankFailure): a job's ranks
// placed on the hosts, started around rank 0's rendezvous with the job's secret, and,
// when a rank fails, the rank at fault named from every host's account of its own.
#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "remote/hosts.h"
#include "remote/jobs.h"

namespace netloom::remote {

namespace {

// The port rank 0 of `job` serves the rendezvous on, read from its port file as soon
// as the file is there; an error saying why not (rank 0 ended, or the time ran out).
Result<std::string> rendezvousPort(SshSession& s, const remotepb::JobRecord& job,
                                   double timeoutSeconds) {
  const int64_t seconds = std::max<int64_t>(1, int64_t(std::ceil(timeoutSeconds)));
  auto stream =
      s.stream({"timeout", std::to_string(seconds), "tail", "-c", "+1",
                "--pid=" + std::to_string(job.pid()), "-F", job.dir() + "/rendezvous.port"});
  if (!stream) return stream.error();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::string text;
  while (text.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    auto more = (*stream)->read(text, int(left.count()));
    if (!more) return more.error();
    if (!*more) break;  // tail ended: rank 0 exited, or its time ran out
  }
  if (text.find('\n') != std::string::npos) return text.substr(0, text.find('\n'));
  auto st = jobStatus(s, job);
  if (st && st->state != "running")
    return makeError("ended before the others joined (" + st->describe() + "); see " + job.dir() +
                     "/train.log");
  return makeError("did not open the rendezvous within " + std::to_string(seconds) + " s");
}

bool hasOption(const std::vector<std::string>& args, const std::string& name) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return a == name || a.rfind(name + "=", 0) == 0;
  });
}

// `args` without option `name` and its value.
std::vector<std::string> withoutOption(const std::vector<std::string>& args,
                                       const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      ++i;
      continue;
    }
    if (args[i].rfind(name + "=", 0) != 0) out.push_back(args[i]);
  }
  return out;
}

// Where a run trains: --devices's value, else the project's train.device.
std::string deviceOf(const std::vector<std::string>& args, const proto::Project& project) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--devices" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--devices=", 0) == 0) return args[i].substr(10);
  }
  return project.train().device();
}

// The arguments of each of the `count` ranks that share `host`: on a GPU job a GPU
// each, else an equal share of the cores (where neither the project nor the
// arguments set the threads).
Result<std::vector<std::vector<std::string>>> hostShares(SshSession& s, const remotepb::Host& host,
                                                         const proto::Project& project,
                                                         const std::vector<std::string>& args,
                                                         int count) {
  std::vector<std::vector<std::string>> shares(size_t(count), args);
  if (count == 1) return shares;
  auto probe = probeHost(s, host);
  if (!probe) return probe.error();
  if (deviceOf(args, project).rfind("cuda", 0) == 0) {
    if (int(probe->gpus.size()) < count)
      return makeError(hostTitle(host) + " has " + std::to_string(probe->gpus.size()) +
                       " GPUs; --ranks-per-host " + std::to_string(count) +
                       " needs one for each rank");
    for (int k = 0; k < count; ++k) {
      shares[size_t(k)] = withoutOption(args, "--devices");
      shares[size_t(k)].insert(shares[size_t(k)].end(), {"--devices", "cuda:" + std::to_string(k)});
    }
  } else if (!hasOption(args, "--threads") && project.train().threads() == 0) {
    for (auto& a : shares)
      a.insert(a.end(), {"--threads", std::to_string(std::max(1, probe->cpus / count))});
  }
  return shares;
}

}  // namespace

Result<remotepb::JobRecord> submitRanks(const std::vector<SshSession*>& sessions,
                                        const std::vector<remotepb::Host>& hosts,
                                        const proto::Project& project, const SubmitOptions& o,
                                        double timeoutSeconds) {
  const size_t perHost = size_t(std::max(1, o.ranksPerHost));
  const size_t n = hosts.size() * perHost;
  if (n < 2 || sessions.size() != hosts.size())
    return makeError("--hosts needs two hosts or more, or --ranks-per-host 2 or more");
  for (size_t i = 0; i < hosts.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (hostTitle(hosts[i]) == hostTitle(hosts[j]))
        return makeError("--hosts names " + hostTitle(hosts[i]) + " twice");
  std::vector<remotepb::JobRecord> jobs;
  for (size_t h = 0; h < hosts.size(); ++h) {
    auto shares = hostShares(*sessions[h], hosts[h], project, o.args, int(perHost));
    if (!shares) return shares.error();
    for (size_t k = 0; k < perHost; ++k) {
      SubmitOptions each = o;
      each.launch = false;
      each.args = (*shares)[k];
      auto job = submitJob(*sessions[h], hosts[h], project, each);
      if (!job)
        return makeError("rank " + std::to_string(jobs.size()) + " on " + hostTitle(hosts[h]) +
                         ": " + job.error().message);
      jobs.push_back(std::move(*job));
    }
  }
  unsigned char bytes[32];
  if (getrandom(bytes, sizeof bytes, 0) != ssize_t(sizeof bytes))
    return makeError("no randomness for the job's secret");
  std::string secret;
  for (unsigned char b : bytes) {
    static const char* digits = "0123456789abcdef";
    secret += digits[b >> 4];
    secret += digits[b & 15];
  }
  auto rankArgs = [&](size_t r, const std::string& rendezvous) {
    jobs[r].add_args("--rank");
    jobs[r].add_args(std::to_string(r));
    jobs[r].add_args("--world-size");
    jobs[r].add_args(std::to_string(n));
    jobs[r].add_args("--rendezvous");
    jobs[r].add_args(rendezvous);
    jobs[r].add_args("--rank-address");
    jobs[r].add_args(sessions[r / perHost]->host().address);
    jobs[r].add_args("--rank-timeout");
    jobs[r].add_args(std::to_string(int64_t(timeoutSeconds)));
    jobs[r].add_args("--collective-failures-exit");  // followJob names the rank at fault
  };
  const std::string first = sessions[0]->host().address;
  rankArgs(0, "tcp://" + first + ":0");
  if (Status st = launchJob(*sessions[0], jobs[0], secret); !st) return st.error();
  // Rank 0 says the port it serves the rendezvous on, in a file written once: tail -F
  // follows the name (inotify) and sends the line when it appears, or ends with rank
  // 0 (--pid); timeout bounds what is left of it on the host to the rendezvous's time.
  auto port = rendezvousPort(*sessions[0], jobs[0], timeoutSeconds);
  if (!port) return makeError("rank 0 on " + hostTitle(hosts[0]) + " " + port.error().message);
  for (size_t r = 1; r < n; ++r) {
    rankArgs(r, "tcp://" + first + ":" + *port);
    if (Status st = launchJob(*sessions[r / perHost], jobs[r], secret); !st)
      return makeError("rank " + std::to_string(r) + " on " + hostTitle(hosts[r / perHost]) + ": " +
                       st.message());
    remotepb::RankJob* rank = jobs[0].add_ranks();
    *rank->mutable_host() = hosts[r / perHost];
    rank->set_dir(jobs[r].dir());
    rank->set_pid(jobs[r].pid());
  }
  return jobs[0];
}

namespace {

// A job's log's last lines, on one line ("" when there is no log).
std::string logTail(SshSession& s, const std::string& dir, int lines) {
  auto r = s.run({"tail", "-n", std::to_string(lines), dir + "/train.log"});
  if (!r || r->exitStatus != 0) return {};
  std::string out;
  std::istringstream in(r->out);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out += (out.empty() ? "" : " | ") + line;
  }
  return out;
}

}  // namespace

std::string rankFailure(SshSession& first, const remotepb::JobRecord& job,
                        const std::function<std::string(const std::string&)>& passphrase) {
  struct Rank {
    int rank = 0;
    std::string host;
    int64_t pid = 0;
    std::string dir;
    std::string state;  // kStatus's, "unreachable", or "hung" (found running and stopped)
    int exitCode = -1;
    std::string why;  // how it could not be reached
    std::string log;
  };
  std::vector<Rank> ranks;
  Rank zero{0, hostTitle(job.host()), job.pid(), job.dir(), "failed", 75, {}, {}};
  zero.log = logTail(first, job.dir(), 3);
  for (int r = 0; r < job.ranks_size(); ++r) {
    const remotepb::RankJob& rj = job.ranks(r);
    Rank k{r + 1, hostTitle(rj.host()), rj.pid(), rj.dir(), {}, -1, {}, {}};
    remotepb::JobRecord other = job;
    *other.mutable_host() = rj.host();
    other.set_dir(rj.dir());
    other.set_pid(rj.pid());
    auto s = openSession(hostSpec(rj.host()), nullptr, passphrase);
    auto st = s ? jobStatus(**s, other) : Result<JobStatus>(s.error());
    if (!st) {
      k.state = "unreachable";
      k.why = st.error().message;
    } else {
      k.state = st->state;
      k.exitCode = st->exitCode;
      if (k.state == "running" || k.state == "paused") {
        // The job is over: a rank still running hung, or waits on the ones gone.
        (void)signalJob(**s, other, "KILL");
        k.state = "hung";
      }
      k.log = logTail(**s, rj.dir(), 5);
    }
    ranks.push_back(std::move(k));
  }
  auto pick = [&](auto&& is) -> const Rank* {
    for (const Rank& k : ranks)
      if (is(k)) return &k;
    return nullptr;
  };
  const Rank* at = pick([](const Rank& k) { return k.state == "killed"; });
  if (!at) at = pick([](const Rank& k) { return k.state == "failed" && k.exitCode != 75; });
  if (!at) at = pick([](const Rank& k) { return k.state == "unreachable"; });
  if (!at) at = pick([](const Rank& k) { return k.state == "hung"; });
  if (!at) at = &zero;
  std::string who = "rank " + std::to_string(at->rank) + " (pid " + std::to_string(at->pid) +
                    " on " + at->host + ")";
  std::string what;
  if (at->state == "killed") {
    what = who + " was killed";
  } else if (at->state == "unreachable") {
    what = "rank " + std::to_string(at->rank) + " on " + at->host + " could not be asked (" +
           at->why + ")";
  } else if (at->state == "hung") {
    what = who + " did not answer the others in time, and was stopped";
  } else if (at == &zero) {
    what = who + " could not reach the other ranks";
  } else {
    what = who + " failed (exit status " + std::to_string(at->exitCode) + ")";
  }
  if (at->state != "unreachable")
    what += at->log.empty() ? "; its log " + at->dir + "/train.log is empty"
                            : "; its log ends: " + at->log;
  if (at != &zero && !zero.log.empty()) what += "; rank 0 said: " + zero.log;
  return what;
}

}  // namespace netloom::remote
