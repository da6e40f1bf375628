#include "engine/cli/ranks.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "engine/io/event_stream.h"
#include "engine/parallel/communicator.h"

namespace netloom {

namespace {

namespace fs = std::filesystem;

std::string hostName() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "this host";
}

// The last `count` lines of a rank's log.
std::string lastLines(const std::string& path, size_t count) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > count) lines.erase(lines.begin());
  }
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out;
}

std::string describeExit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// The worker's arguments: the job's, with this rank's place, and with what only rank
// 0 writes taken from the others (but --save-weights: only rank 0 writes the file,
// yet under tensor parallelism every rank gathers its parts of it).
std::vector<std::string> workerArgs(const RankJob& job, int rank, const std::string& rendezvous,
                                    const std::string& rank0Events) {
  std::vector<std::string> out;
  for (size_t i = 0; i < job.args.size(); ++i) {
    const std::string& a = job.args[i];
    bool valued = a == "--events" || a == "--summary-json" || a == "--threads";
    if (valued) {
      ++i;  // its value too
      continue;
    }
    if (rank > 0 && a == "--profile") continue;
    out.push_back(a);
  }
  for (size_t i = 0; i + 1 < job.args.size(); ++i)
    if (rank == 0 && job.args[i] == "--summary-json") {
      out.push_back(job.args[i]);
      out.push_back(job.args[i + 1]);
    }
  if (rank == 0 && !rank0Events.empty()) out.insert(out.end(), {"--events", rank0Events});
  if (rank > 0) out.push_back("--quiet");
  out.insert(out.end(),
             {"--threads", std::to_string(job.threadsPerRank), "--rank", std::to_string(rank),
              "--world-size", std::to_string(job.ranks), "--rendezvous", rendezvous,
              "--rank-timeout", std::to_string(int64_t(job.timeoutSeconds))});
  return out;
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int pidfd = -1;   // readable once the rank has exited (-1: a kernel without pidfd_open)
  std::string log;  // ranks 1..
  bool running = true;
  int status = 0;
  bool signalledByUs = false;
};

// What the supervisor waits on between two looks at the ranks: a rank exiting (its
// pidfd), rank 0 writing events (inotify on their folder), a stop signal, or the kill
// deadline. SIGTERM and SIGINT are blocked while it runs and let in only inside
// ppoll(), so a stop that arrives just before the wait still ends it.
class Waits {
 public:
  Waits(std::vector<Worker>& workers, const std::string& eventsDir) : m_workers(workers) {
    for (Worker& w : workers)
      if (w.pid > 0) w.pidfd = int(syscall(SYS_pidfd_open, w.pid, 0));
    if (!eventsDir.empty()) {
      m_watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      if (m_watch >= 0 &&
          inotify_add_watch(m_watch, eventsDir.c_str(), IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0) {
        ::close(m_watch);
        m_watch = -1;
      }
    }
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stops, &m_before);
    m_during = m_before;
    sigdelset(&m_during, SIGTERM);
    sigdelset(&m_during, SIGINT);
  }
  ~Waits() {
    pthread_sigmask(SIG_SETMASK, &m_before, nullptr);
    for (Worker& w : m_workers)
      if (w.pidfd >= 0) ::close(w.pidfd);
    if (m_watch >= 0) ::close(m_watch);
  }

  void next(const std::atomic<bool>& stop, bool stopForwarded,
            const std::optional<std::chrono::steady_clock::time_point>& killAt) {
    if (stop.load() && !stopForwarded) return;
    std::vector<pollfd> fds;
    bool everyExitSeen = true;
    for (const Worker& w : m_workers)
      if (w.running) {
        if (w.pidfd >= 0) fds.push_back({w.pidfd, POLLIN, 0});
        everyExitSeen = everyExitSeen && w.pidfd >= 0;
      }
    if (m_watch >= 0) fds.push_back({m_watch, POLLIN, 0});
    // Without a pidfd (kernels before 5.3) an exit is seen by looking every 20 ms.
    auto limit = std::chrono::nanoseconds(everyExitSeen ? -1 : 20'000'000);
    // Until the kill deadline; past it (SIGKILL sent), until the ranks are gone.
    if (auto now = std::chrono::steady_clock::now(); killAt && *killAt > now) {
      auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(*killAt - now);
      limit = limit.count() < 0 ? left : std::min(limit, left);
    }
    timespec t{time_t(limit.count() / 1'000'000'000), long(limit.count() % 1'000'000'000)};
    ::ppoll(fds.data(), fds.size(), limit.count() < 0 ? nullptr : &t, &m_during);
    char drain[4096];
    if (m_watch >= 0)
      while (::read(m_watch, drain, sizeof drain) > 0) {
      }
  }

 private:
  std::vector<Worker>& m_workers;
  int m_watch = -1;
  sigset_t m_before, m_during;
};

pid_t spawn(const std::vector<std::string>& args, int rank, const std::string& log) {
  std::vector<char*> argv;
  std::string self = "/proc/self/exe";
  argv.push_back(self.data());
  std::vector<std::string> copy = args;
  for (std::string& s : copy) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  // The worker dies with the launcher, whatever kills it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  if (rank > 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    // Only rank 0 is held at a step (tests act on a run in progress through it).
    unsetenv("NETLOOM_HOLD_AT_STEP");
    unsetenv("NETLOOM_HOLD_FIFO");
  }
  execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "netloom-train: could not start rank %d: %s\n", rank, std::strerror(errno));
  _exit(1);
}

// Every rank started, each rank after 0 logging to its file in the job's log folder.
std::vector<Worker> spawnRanks(const RankJob& job, const std::string& rendezvous,
                               const std::string& rank0Events) {
  std::vector<Worker> workers(size_t(job.ranks));
  for (int r = 0; r < job.ranks; ++r) {
    Worker& w = workers[size_t(r)];
    w.rank = r;
    if (r > 0) w.log = (fs::path(job.logDir) / ("rank-" + std::to_string(r) + ".log")).string();
    w.pid = spawn(workerArgs(job, r, rendezvous, rank0Events), r, w.log);
    if (w.pid < 0) {
      std::fprintf(stderr, "netloom-train: could not start rank %d: %s\n", r, std::strerror(errno));
      w.running = false;
      w.status = 1 << 8;
    }
  }
  return workers;
}

// Rank 0's events, passed on to the job's stream as rank 0 writes them, all but its
// Failed event, which is held until the job knows which rank failed first.
struct Rank0Relay {
  const std::string& path;  // empty: the job writes no events
  EventWriter& events;
  const std::vector<Worker>& workers;
  const std::string& host;
  int64_t offset = 0;
  std::optional<proto::TrainEvent> heldFailure;

  void relay() {
    if (path.empty()) return;
    auto read = readEvents(path, offset);
    if (!read) return;  // not written yet
    offset = read->nextOffset;
    for (proto::TrainEvent& e : read->events) {
      if (e.has_failed()) {
        heldFailure = e;
        continue;
      }
      events.write(e);
      if (e.has_run_started()) sayWhereRanksRun(e.time());
    }
  }

  // Where each rank runs and logs, once the job has started.
  void sayWhereRanksRun(double time) {
    for (const Worker& w : workers) {
      proto::TrainEvent line;
      line.set_time(time);
      line.mutable_log()->set_level(proto::Log::INFO);
      line.mutable_log()->set_text("rank " + std::to_string(w.rank) + ": pid " +
                                   std::to_string(w.pid) + " on " + host +
                                   (w.log.empty() ? "" : ", log " + w.log));
      events.write(line);
    }
  }
};

// Once a rank has failed, the others get SIGTERM, then SIGKILL past `timeoutSeconds`.
void endTheOthers(std::vector<Worker>& workers, double timeoutSeconds,
                  std::optional<std::chrono::steady_clock::time_point>& killAt) {
  if (!killAt) {
    for (Worker& w : workers)
      if (w.running) {
        kill(w.pid, SIGTERM);
        w.signalledByUs = true;
      }
    killAt = std::chrono::steady_clock::now() +
             std::chrono::milliseconds(int64_t(timeoutSeconds * 1000));
  }
  if (std::chrono::steady_clock::now() >= *killAt)
    for (Worker& w : workers)
      if (w.running) kill(w.pid, SIGKILL);
}

// Why the job failed, as its Failed event and stderr say it: rank 0's own Failed
// event when rank 0 failed first, else the first rank's exit and last log lines.
// Returns the job's exit status.
int reportEnd(const RankJob& job, const Worker* first,
              const std::optional<proto::TrainEvent>& heldFailure, const std::string& host,
              EventWriter& events) {
  if (!first) {
    if (heldFailure) events.write(*heldFailure);
    return 0;
  }
  std::string why;
  if (first->rank == 0 && heldFailure) {
    why = heldFailure->failed().message();
  } else {
    why = "rank " + std::to_string(first->rank) + " (pid " + std::to_string(first->pid) + " on " +
          host + ") " + describeExit(first->status);
    if (!first->log.empty()) {
      std::string tail = lastLines(first->log, 5);
      why +=
          tail.empty() ? "; its log " + first->log + " is empty" : "; its last log lines: " + tail;
    }
    if (heldFailure) why += "; rank 0: " + heldFailure->failed().message();
  }
  if (!job.events.empty()) {
    proto::TrainEvent e = heldFailure ? *heldFailure : proto::TrainEvent{};
    if (!heldFailure)
      e.set_time(double(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()) /
                 1000.0);
    e.mutable_failed()->set_message(why);
    events.write(e);
  }
  std::fprintf(stderr, "netloom-train: %s\n", why.c_str());
  return first->rank == 0 && WIFEXITED(first->status) ? WEXITSTATUS(first->status) : 1;
}

// Of ranks that end together, one killed from outside is the cause, not one that
// failed because it lost its peer.
const Worker* causeAmong(const std::vector<Worker*>& ended) {
  const Worker* cause = nullptr;
  for (Worker* w : ended) {
    bool failed = !(WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0);
    if (failed && (!cause || (WIFSIGNALED(w->status) && !WIFSIGNALED(cause->status)))) cause = w;
  }
  return cause;
}

}  // namespace

int runRanks(const RankJob& job, const std::atomic<bool>& stop) {
  // The rendezvous: a fresh private folder, so no stale key from another job.
  std::string pattern = (fs::temp_directory_path() / "netloom-ranks-XXXXXX").string();
  if (!mkdtemp(pattern.data())) {
    std::fprintf(stderr, "netloom-train: cannot make a rendezvous folder in %s: %s\n",
                 fs::temp_directory_path().c_str(), std::strerror(errno));
    return 1;
  }
  const std::string rendezvous = pattern;
  std::error_code ec;
  fs::create_directories(job.logDir, ec);
  if (ec) {
    std::fprintf(stderr, "netloom-train: cannot make the ranks' log folder %s: %s\n",
                 job.logDir.c_str(), ec.message().c_str());
    fs::remove_all(rendezvous, ec);
    return 2;
  }
  // Rank 0's events cross this process, which holds back its Failed event until it
  // knows which rank failed first.
  EventWriter events;
  const std::string rank0Events = job.events.empty() ? "" : rendezvous + "/rank0.events";
  if (!job.events.empty())
    if (Status st = events.open(job.events, job.appendEvents); !st) {
      std::fprintf(stderr, "netloom-train: %s\n", st.message().c_str());
      fs::remove_all(rendezvous, ec);
      return 2;
    }
  const std::string host = hostName();
  std::vector<Worker> workers = spawnRanks(job, rendezvous, rank0Events);
  Rank0Relay relay0{rank0Events, events, workers, host};
  auto relay = [&] { relay0.relay(); };
  std::optional<proto::TrainEvent>& heldFailure = relay0.heldFailure;
  for (const Worker& w : workers)
    if (w.pid > 0 && !job.events.empty() && w.rank > 0)
      std::fprintf(stderr, "netloom-train: rank %d is pid %d on %s, logging to %s\n", w.rank,
                   int(w.pid), host.c_str(), w.log.c_str());

  const Worker* first = nullptr;  // the first rank to fail: the job's cause
  bool forwardedStop = false;
  std::optional<std::chrono::steady_clock::time_point> killAt;
  Waits waits(workers, rank0Events.empty() ? "" : rendezvous);
  auto running = [&] {
    for (const Worker& w : workers)
      if (w.running) return true;
    return false;
  };
  while (running()) {
    if (stop.load() && !forwardedStop) {
      forwardedStop = true;  // every rank stops at the step they agree on
      for (Worker& w : workers)
        if (w.running) kill(w.pid, SIGTERM);
    }
    std::vector<Worker*> ended;
    for (Worker& w : workers) {
      if (!w.running) continue;
      int status = 0;
      if (waitpid(w.pid, &status, WNOHANG) == w.pid) {
        w.running = false;
        w.status = status;
        ended.push_back(&w);
      }
    }
    if (!first) first = causeAmong(ended);
    if (first) endTheOthers(workers, job.timeoutSeconds, killAt);
    relay();
    if (running()) waits.next(stop, forwardedStop, killAt);
  }
  relay();
  const int code = reportEnd(job, first, heldFailure, host, events);
  events.close();
  fs::remove_all(rendezvous, ec);
  return code;
}

void makeTensorGroups(const proto::Project& project, TrainOptions& opts, TensorGroups& held) {
  const proto::Distributed& d = project.train().distributed();
  const int tp = opts.tensorParallel > 0 ? opts.tensorParallel : d.tensor_parallel();
  const int pp = opts.pipelineStages > 0 ? opts.pipelineStages : d.pipeline_stages();
  if (tp > 1 && pp > 1) return;  // both: the run refuses it
  const int size = std::max(tp, pp);
  if (!opts.comm || size <= 1 || opts.comm->size() % size != 0) return;
  held = tensorGroups(*opts.comm, size);
  (tp > 1 ? opts.tensorComm : opts.stageComm) = held.tensor.get();
  opts.dataComm = held.data.get();
}

ThreadRankJob::ThreadRankJob(int ranks, double timeoutSeconds)
    : m_comms(threadRanks(ranks, timeoutSeconds)),
      m_groups(size_t(ranks)),
      m_errors(size_t(ranks)) {}

ThreadRankJob::~ThreadRankJob() {
  finish(true);
}

void ThreadRankJob::start(const proto::Project& project, const TrainOptions& opts) {
  for (size_t r = 1; r < m_comms.size(); ++r) {
    TrainOptions own = opts;
    own.ranksHere = int(m_comms.size());
    own.comm = m_comms[r].get();
    makeTensorGroups(project, own, m_groups[r]);
    m_threads.emplace_back([this, &project, own, r] {
      auto result = runTraining(project, own, [](const proto::TrainEvent&) {});
      if (!result) m_errors[r] = result.error().message;
      m_comms[r].reset();  // this rank has left: any rank still waiting for it fails
    });
  }
}

std::string ThreadRankJob::finish(bool rank0Failed) {
  if (!m_comms.empty()) m_comms[0].reset();
  for (std::thread& t : m_threads)
    if (t.joinable()) t.join();
  std::string out;
  for (size_t r = 1; r < m_errors.size(); ++r) {
    const std::string& e = m_errors[r];
    if (e.empty() || (rank0Failed && e.find("rank 0 left the job") != std::string::npos)) continue;
    if (!out.empty()) out += '\n';
    out.append("rank ").append(std::to_string(r)).append(": ").append(e);
  }
  m_errors.assign(m_errors.size(), {});
  return out;
}

}  // namespace netloom
