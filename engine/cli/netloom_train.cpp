// netloom-train: the headless trainer. Runs a project on this machine's CPU with a
// progress line on the terminal, and optionally writes the TrainEvent stream, a
// JSON summary and the final weights. Needs no Qt, so it runs on GPU nodes too.
#include <omp.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/hold.h"
#include "engine/cli/ranks.h"
#include "engine/cli/sweep_command.h"
#include "engine/cli/train_args.h"
#include "engine/io/event_stream.h"
#include "engine/io/json.h"
#include "engine/io/output_file.h"
#include "engine/io/progress.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/parallel/communicator.h"
#include "engine/runtime/devices.h"
#include "engine/runtime/program.h"
#include "engine/train/generate.h"
#include "engine/train/project_check.h"
#include "engine/train/summary.h"
#include "engine/train/trainer.h"
#include "engine/util/memory_budget.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/peak.h"

namespace {

using netloom::cli::TrainArgs;

netloom::Json summaryJson(const netloom::TrainSummary& s) {
  using netloom::Json;
  Json o = Json::object();
  o.set("epochs", Json::number(s.epochs));
  o.set("steps", Json::number(double(s.steps)));
  o.set("train_loss", Json::number(s.trainLoss));
  o.set("test_loss", Json::number(s.testLoss));
  o.set("test_accuracy", s.testAccuracy >= 0 ? Json::number(s.testAccuracy) : Json());
  o.set("samples_per_sec", Json::number(s.samplesPerSec));
  o.set("steady_samples_per_sec", Json::number(s.steadySamplesPerSec));
  o.set("wall_seconds", Json::number(s.wallSeconds));
  o.set("compile_ms", Json::number(s.compileMs));
  o.set("device", Json::string(s.device));
  o.set("train_seconds", Json::number(s.trainSeconds));
  o.set("issue_seconds", Json::number(s.issueSeconds));
  o.set("precision", Json::string(s.precision));
  if (s.ranks > 1) {
    o.set("ranks", Json::number(s.ranks));
    o.set("comm_seconds", Json::number(s.commSeconds));
    o.set("comm_waited_seconds", Json::number(s.commWaitedSeconds));
  }
  if (s.precision == "fp16") {
    o.set("skipped_steps", Json::number(double(s.skippedSteps)));
    o.set("loss_scale", Json::number(s.lossScale));
  }
  o.set("arena_bytes", Json::number(double(s.arenaBytes)));
  o.set("weight_bytes", Json::number(double(s.weightBytes)));
  o.set("state_bytes", Json::number(double(s.stateBytes)));
  o.set("naive_bytes", Json::number(double(s.naiveBytes)));
  o.set("parameters", Json::number(double(s.parameters)));
  o.set("flops_per_sample", Json::number(s.flopsPerSample));
  // A remote job's status reads this: "stopped at step <steps>" rather than finished.
  o.set("stopped", Json::boolean(s.stoppedByRequest));
  return o;
}

}  // namespace

namespace {

// --peak [--threads N]: the CPU's measured matrix-product peak, as one JSON line.
int printPeak(int threads) {
  netloom::cpu::configureThreads(threads > 0 ? threads : omp_get_num_procs());
  netloom::cpu::GemmPeak p = netloom::cpu::measureGemmPeak();
  netloom::Json o = netloom::Json::object();
  o.set("probe", netloom::Json::string(p.probe));
  o.set("threads", netloom::Json::number(p.threads));
  o.set("gflops", netloom::Json::number(p.gflops));
  std::printf("%s\n", o.dump().c_str());
  return 0;
}

// The GPU the project trains on (its train.device names one), if any.
std::optional<netloom::DeviceId> projectGpu(const netloom::proto::Project& p) {
  netloom::DeviceId id;
  if (p.train().device().empty() || !netloom::parseDeviceId(p.train().device(), id).empty() ||
      id.kind != netloom::DeviceKind::Cuda)
    return std::nullopt;
  return id;
}

// SIGTERM and SIGINT end the run cleanly after the current step: its events and a
// checkpoint (where the project asks for checkpoints) are kept. A second one kills.
std::atomic<bool> g_stop{false};

extern "C" void onStopSignal(int sig) {
  if (g_stop.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

}  // namespace

namespace {

int fail(int code, const std::string& why) {
  std::fprintf(stderr, "netloom-train: %s\n", why.c_str());
  return code;
}

// What the command line and the project decide together.
struct Plan {
  TrainArgs& a;
  netloom::proto::Project& project;
  int ranks = 1;                                      // data-parallel ranks in the job
  double timeout = 60;                                // for a rank to answer
  std::unique_ptr<netloom::Communicator> comm;        // this rank's, in a job of processes
  std::shared_ptr<netloom::RendezvousStore> store;    // kept: rank 0 serves the others from it
  std::unique_ptr<netloom::ThreadRankJob> threadJob;  // ranks that are threads of this process
  netloom::TensorGroups groups;                       // this rank's, under tensor parallelism
};

// --devices wins over the project's train.device, and is said to be unavailable
// under its own name.
std::optional<int> chooseDevice(Plan& p) {
  if (p.a.devices.empty()) return std::nullopt;
  netloom::DeviceId id;
  netloom::parseDeviceId(p.a.devices, id);
  std::string unavailable;
  if (!netloom::openDevice(id, unavailable)) return fail(2, "--devices " + unavailable);
  p.project.mutable_train()->set_device(p.a.devices);
  return std::nullopt;
}

// The job's ranks: --ranks or --thread-ranks over the project's train.distributed,
// each refused where this computer has too few cores or GPUs for it.
std::optional<int> chooseRanks(Plan& p) {
  TrainArgs& a = p.a;
  const auto& dist = p.project.train().distributed();
  if (dist.ranks() < 0)
    return fail(2, a.project + ": train.distributed.ranks must be at least 1, got " +
                       std::to_string(dist.ranks()));
  p.ranks = a.ranks > 0 ? a.ranks : std::max(1, dist.ranks());
  p.timeout = a.rankTimeout > 0 ? a.rankTimeout : dist.timeout_s() > 0 ? dist.timeout_s() : 60.0;
  if (a.threadRanks > 0 && (a.ranks > 0 || a.rank >= 0))
    return fail(2, "--thread-ranks and --ranks are two ways to run ranks; give one");
  // The project's CPU ranks as threads, unless the command line says otherwise.
  const bool threadRanksFlag = a.threadRanks > 0;
  if (a.threadRanks == 0 && a.ranks == 0 && a.rank < 0 && dist.threads() && dist.ranks() > 1)
    a.threadRanks = dist.ranks();
  else if (a.threadRanks > 0 && dist.ranks() > 1)
    std::fprintf(stderr, "netloom-train: --thread-ranks %d over train.distributed.ranks %d\n",
                 a.threadRanks, dist.ranks());
  if (a.threadRanks == 0) return std::nullopt;
  if (projectGpu(p.project))
    return fail(2,
                "ranks that are threads (--thread-ranks, train.distributed.threads) train on the "
                "CPU, the project on " +
                    p.project.train().device() +
                    "; GPU ranks run with --ranks, one process per GPU");
  p.ranks = a.threadRanks;
  const int cores = omp_get_num_procs();
  if (p.ranks > cores)
    return fail(2, std::string(threadRanksFlag ? "--thread-ranks" : "train.distributed.ranks") +
                       " " + std::to_string(p.ranks) + ": this computer has " +
                       std::to_string(cores) + " cores, and each rank needs one");
  if (a.opts.threads == 0) a.opts.threads = std::max(1, cores / p.ranks);
  return std::nullopt;
}

int printSummary(const Plan& p) {
  const TrainArgs& a = p.a;
  int64_t batch =
      a.opts.batchSize > 0 ? a.opts.batchSize : std::max(1, p.project.train().batch_size());
  auto summary = netloom::summarizeModel(p.project.model(), batch);
  if (!summary) return fail(2, a.project + ": " + summary.error().message);
  std::printf("%s", summary->table().c_str());
  return 0;
}

int printExplanation(Plan& p) {
  std::unique_ptr<netloom::Communicator> planned;
  if (p.ranks > 1) {  // the plan of each rank, with its gradient buckets
    planned = netloom::planningRanks(p.ranks);
    p.a.opts.comm = planned.get();
    netloom::makeTensorGroups(p.project, p.a.opts, p.groups);
  }
  auto text = netloom::explainTraining(p.project, p.a.opts);
  if (!text) return fail(2, p.a.project + ": " + text.error().message);
  std::printf("%s", text->c_str());
  return 0;
}

// A job of rank processes on this computer: this process launches them and reports
// for them.
int launchRanks(const Plan& p, int argc, char** argv) {
  const TrainArgs& a = p.a;
  const int cores = omp_get_num_procs();
  const bool gpu = projectGpu(p.project).has_value();
  const netloom::Backend* cuda = netloom::findBackend(netloom::DeviceKind::Cuda);
  const int capacity = gpu ? (cuda ? int(cuda->probe().devices.size()) : 0) : cores;
  if (p.ranks > capacity)
    return fail(2, std::string(a.ranks > 0 ? "--ranks" : "train.distributed.ranks") + " " +
                       std::to_string(p.ranks) + ": this computer has " + std::to_string(capacity) +
                       (gpu ? " GPUs" : " cores") + ", and each rank needs one");
  netloom::RankJob job;
  job.ranks = p.ranks;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ranks")) {
      ++i;
      continue;
    }
    if (!std::strncmp(argv[i], "--ranks=", 8)) continue;
    job.args.push_back(argv[i]);
  }
  job.events = a.events;
  job.appendEvents = !a.opts.resume.empty();
  job.logDir = !a.rankLogs.empty() ? a.rankLogs : a.opts.projectDir + "/logs";
  job.threadsPerRank = a.opts.threads > 0 ? a.opts.threads : std::max(1, cores / p.ranks);
  job.timeoutSeconds = p.timeout;
  std::signal(SIGTERM, onStopSignal);
  std::signal(SIGINT, onStopSignal);
  return netloom::runRanks(job, g_stop);
}

// Ranks on several hosts meet at rank 0's TCP store, with the job's secret from the
// environment (never the command line); rank 0 says its port in rendezvous.port, in
// the job's folder.
std::optional<int> openTcpRendezvous(Plan& p) {
  const TrainArgs& a = p.a;
  std::string where = a.rendezvous.substr(6);
  size_t colon = where.rfind(':');
  uint64_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !netloom::cli::parseWholeNumber("--rendezvous", where.substr(colon + 1), 0, 65535, port)
           .empty())
    return fail(2, "--rendezvous " + a.rendezvous + ": expected tcp://HOST:PORT");
  const char* secret = std::getenv("NETLOOM_RANK_SECRET");
  if (!secret || !*secret)
    return fail(2,
                "--rendezvous " + a.rendezvous + " needs the job's secret in NETLOOM_RANK_SECRET");
  std::string kept = secret;
  unsetenv("NETLOOM_RANK_SECRET");  // no process this one starts inherits it
  auto made = netloom::tcpRendezvous(where.substr(0, colon), int(port), a.rank, kept,
                                     a.rank == 0 ? "rendezvous.port" : "", p.timeout);
  if (!made) return fail(1, "rank " + std::to_string(a.rank) + ": " + made.error().message);
  p.store = *made;
  return std::nullopt;
}

// A rank of a job of processes (--rank, set by its launcher): its GPU, its
// rendezvous, and the communicator it trains with.
std::optional<int> joinJob(Plan& p) {
  TrainArgs& a = p.a;
  if (a.worldSize < 1 || a.rank >= a.worldSize || a.rendezvous.empty())
    return fail(2, "--rank needs --world-size above it and --rendezvous");
  netloom::RankOptions ro;
  ro.rank = a.rank;
  ro.size = a.worldSize;
  ro.timeoutSeconds = p.timeout;
  // On GPUs, one rank per device: rank r of a job on this computer takes GPU r.
  if (auto gpu = projectGpu(p.project)) {
    netloom::DeviceId id = *gpu;
    id.index = a.rank;
    std::string unavailable;
    a.opts.device = netloom::openDevice(id, unavailable);
    if (!a.opts.device) return fail(2, "rank " + std::to_string(a.rank) + ": " + unavailable);
    ro.device = a.opts.device;
  }
  if (!a.rankAddress.empty()) ro.hostname = a.rankAddress;
  if (a.rendezvous.rfind("tcp://", 0) == 0) {
    if (auto rc = openTcpRendezvous(p)) return rc;
  } else {
    p.store = netloom::fileRendezvous(a.rendezvous);
    // A folder and no address: `--ranks` started every rank on this computer (a
    // Slurm job's ranks on several nodes share a folder, and name their node).
    if (a.rankAddress.empty()) a.opts.ranksHere = a.worldSize;
  }
  auto joined = netloom::connectRanks(ro, p.store);
  if (!joined) return fail(1, joined.error().message);
  p.comm = std::move(*joined);
  a.opts.comm = p.comm.get();
  return std::nullopt;
}

// An output that can never be written (a folder, a block device) is said now, not
// after the training whose results it was to keep.
std::optional<int> checkOutputs(const TrainArgs& a) {
  for (const std::string* out : {&a.summaryJson, &a.opts.saveWeights}) {
    if (out->empty()) continue;
    if (auto target = netloom::resolveOutput(*out); !target) return fail(2, target.error().message);
  }
  return std::nullopt;
}

// Where the run's events go: the stream file, the progress line, and the step hold.
class RunOutputs {
 public:
  RunOutputs(const TrainArgs& a, netloom::StepHold hold)
      : m_a(a), m_hold(std::move(hold)), m_progress(stderr) {}

  netloom::Status open() {
    if (m_a.events.empty()) return {};
    return m_events.open(m_a.events, !m_a.opts.resume.empty());
  }
  void operator()(const netloom::proto::TrainEvent& e) {
    if (!m_a.events.empty() && m_error.empty())
      if (auto st = m_events.write(e); !st) {
        // A run whose stream cannot be written (a full disk) is not watched by
        // anyone: it stops after this step.
        m_error = st.message();
        g_stop = true;
      }
    if (!m_a.quiet)
      m_progress.onEvent(e);
    else if (e.has_log() && e.log().level() == netloom::proto::Log::WARNING)
      std::fprintf(stderr, "netloom-train: warning: %s\n", e.log().text().c_str());
    // Held after the step's event is out, so whoever holds it has seen the step.
    if (e.has_step() && m_error.empty())
      if (auto st = m_hold.after(e.step().step(), g_stop); !st) {
        m_error = st.message();
        g_stop = true;
      }
  }
  void close() { m_events.close(); }
  const std::string& error() const { return m_error; }

 private:
  const TrainArgs& m_a;
  netloom::StepHold m_hold;
  netloom::EventWriter m_events;
  netloom::ProgressPrinter m_progress;
  std::string m_error;
};

int train(Plan& p) {
  TrainArgs& a = p.a;
  auto hold = netloom::StepHold::fromEnvironment();
  if (!hold) return fail(2, hold.error().message);
  if (auto rc = checkOutputs(a)) return *rc;
  RunOutputs sink(a, std::move(*hold));
  if (auto st = sink.open(); !st) return fail(2, st.message());
  a.opts.stop = &g_stop;
  std::signal(SIGTERM, onStopSignal);
  std::signal(SIGINT, onStopSignal);
  if (p.threadJob) p.threadJob->start(p.project, a.opts);
  auto result = netloom::runTraining(p.project, a.opts,
                                     [&sink](const netloom::proto::TrainEvent& e) { sink(e); });
  std::string others = p.threadJob ? p.threadJob->finish(!result) : std::string();
  sink.close();
  if (!others.empty()) {
    fail(1, others);
    if (result) return 1;
  }
  if (!sink.error().empty()) fail(1, sink.error());
  if (!result) {
    if (a.quiet) fail(1, result.error().message);
    if (result.error().kind == netloom::ErrorKind::Collective) return 75;
    // A run refused before it started (too large for this machine) is an input error.
    return result.error().kind == netloom::ErrorKind::Refused ? 2 : 1;
  }
  if (a.opts.profile) std::printf("%s", result->profile.c_str());
  if (!a.summaryJson.empty())
    if (auto st = netloom::writeFileAtomic(a.summaryJson, summaryJson(*result).dump() + "\n"); !st)
      return fail(1, st.message());
  return sink.error().empty() ? 0 : 1;
}

// --generate: the prompt and the sampled text, printed as each token is sampled.
int generate(const TrainArgs& a, const netloom::proto::Project& project) {
  if (a.from.empty()) return fail(2, "--generate needs --from CHECKPOINT (the trained weights)");
  netloom::GenerateOptions g;
  g.prompt = *a.generate;
  g.weights = a.from;
  g.projectDir = a.opts.projectDir;
  g.maxTokens = a.maxTokens;
  g.temperature = a.temperature;
  g.topK = a.topK;
  g.seed = a.opts.seed.value_or(project.train().seed());
  auto text = netloom::generateText(project, g, [](const std::string& piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (!text) return fail(1, text.error().message);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  TrainArgs a;
  if (auto rc = netloom::cli::parseTrainArgs(argc, argv, a)) return *rc;
  if (a.version) {
    std::printf("netloom-train %s\n", NETLOOM_VERSION);
    return 0;
  }
  if (a.listDevices) {
    std::printf("%s", netloom::listDevices().c_str());
    return 0;
  }
  if (a.peak) return printPeak(a.opts.threads);
  if (a.convert.wanted()) return netloom::cli::runConversion(a.convert);
  auto project = netloom::loadProject(a.project);
  if (!project) return fail(2, project.error().message);
  a.opts.projectDir = std::filesystem::absolute(a.project).parent_path().string();
  if (a.generate) return generate(a, *project);
  Plan p{a, *project};
  if (auto rc = chooseDevice(p)) return *rc;
  if (a.sweep) {
    std::signal(SIGTERM, onStopSignal);
    std::signal(SIGINT, onStopSignal);
    return netloom::cli::runSweepCommand(a, p.project, g_stop);
  }
  if (a.summary) return printSummary(p);
  if (auto rc = chooseRanks(p)) return *rc;
  if (a.explain) return printExplanation(p);
  if (a.rank < 0 && p.ranks > 1 && a.threadRanks == 0) return launchRanks(p, argc, argv);
  if (p.ranks > 1 && a.threadRanks > 0) {
    p.threadJob = std::make_unique<netloom::ThreadRankJob>(p.ranks, p.timeout);
    a.opts.comm = p.threadJob->rank0();
    a.opts.ranksHere = p.ranks;
  }
  if (a.rank >= 0)
    if (auto rc = joinJob(p)) return *rc;
  netloom::makeTensorGroups(p.project, a.opts, p.groups);
  return train(p);
}
