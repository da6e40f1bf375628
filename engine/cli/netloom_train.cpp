// netloom-train: the headless trainer. Runs a project on this machine's CPU with a
// progress line on the terminal, and optionally writes the TrainEvent stream, a
// JSON summary and the final weights. Needs no Qt, so it runs on GPU nodes too.
#include <omp.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cli/convert.h"
#include "engine/cli/hold.h"
#include "engine/cli/ranks.h"
#include "engine/io/event_stream.h"
#include "engine/io/json.h"
#include "engine/io/output_file.h"
#include "engine/io/progress.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/parallel/communicator.h"
#include "engine/runtime/devices.h"
#include "engine/runtime/program.h"
#include "engine/train/project_check.h"
#include "engine/train/summary.h"
#include "engine/train/trainer.h"
#include "engine/util/memory_budget.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/peak.h"

namespace {

const char* kUsage =
    "usage: netloom-train PROJECT.nlproj [options]\n"
    "       netloom-train PROJECT.nlproj --export-onnx F.onnx [--init-weights W] [--fold-bn]\n"
    "       netloom-train --import-onnx F.onnx --to P.nlproj\n"
    "       netloom-train PROJECT.nlproj --export-pytorch DIR\n"
    "  --epochs N          train for N epochs (default: the project's)\n"
    "  --max-steps N       stop after N optimizer steps\n"
    "  --batch-size N      samples per step (default: the project's)\n"
    "  --threads N         CPU threads (default: all cores)\n"
    "  --devices D         where to train, over the project's train.device: cpu,\n"
    "                      cuda:N (GPU N), cuda (GPU 0)\n"
    "  --list-devices      print this machine's CPU and GPUs (or why there is no GPU),\n"
    "                      then exit\n"
    "  --peak              measure this CPU's matrix-product peak (oneDNN sgemm\n"
    "                      2048^3, on --threads N) and print it as JSON, then exit\n"
    "  --seed S            seed for initialisation, shuffling and dropout\n"
    "  --train-limit N     use only the first N training samples\n"
    "  --test-limit N      use only the first N test samples\n"
    "  --memory-limit SIZE refuse a run that plans more memory than SIZE (bytes, or\n"
    "                      with K, M, G or T: 512M, 4G); default: what is available\n"
    "  --events FILE       write the length-delimited TrainEvent stream\n"
    "  --summary-json FILE write a JSON summary of the run\n"
    "  --explain           print the compiled plans and memory plans, then exit\n"
    "  --init-weights F    start from the weights in a safetensors file\n"
    "  --save-weights F    write the final weights as safetensors\n"
    "  --checkpoint-dir D  where checkpoints go (default: checkpoints/ beside the project)\n"
    "  --resume DIR        continue from a checkpoint, or the latest in a folder of them;\n"
    "                      --events then appends to the stream\n"
    "  --checkpoint-on-stop  a run stopped by SIGTERM or SIGINT leaves a checkpoint even\n"
    "                      where the project's policy asks for none\n"
    "  --profile           print where the training steps' time went, by op and kernel\n"
    "  --norms             report each parameter's gradient and weight norm in the\n"
    "                      events, every tenth step\n"
    "  --ranks N           data parallel: N processes on this computer, each training\n"
    "                      on its share of every batch (batch size per rank), the\n"
    "                      cores divided among them (over train.distributed.ranks)\n"
    "  --rank-logs DIR     where ranks 1.. write their logs (default: logs/ beside the\n"
    "                      project); rank 0 prints the progress\n"
    "  --thread-ranks N    data parallel inside this process: N ranks, each a thread\n"
    "                      with its share of the cores (--threads: each rank's) and of\n"
    "                      every batch (batch size per rank), summing in shared memory\n"
    "  --precision P       fp32, bf16 or fp16 (over train.precision): bf16 and fp16\n"
    "                      autocast the matrix ops; fp16 also scales the loss\n"
    "  --no-cuda-graphs    on a GPU, issue every kernel each step instead of replaying\n"
    "                      the step as a recorded CUDA Graph (for comparison)\n"
    "  --disable-pass NAME compile without the optional pass NAME (repeatable, or names\n"
    "                      joined by commas; --explain lists the pipeline, optional\n"
    "                      passes marked *), to measure what it saves\n"
    "  --no-fuse           the same as --disable-pass folding,fusion,chains (each op\n"
    "                      its own kernel)\n"
    "  --plain-layouts     keep every activation in plain NCHW instead of the blocked\n"
    "                      layout oneDNN's convolutions prefer (for comparison)\n"
    "  --summary           print each node's output shape, parameters, FLOPs and\n"
    "                      activation memory, then exit\n"
    "  --quiet             no progress output\n"
    "  --version           print the version and exit\n"
    "conversions:\n"
    "  --export-onnx F     write the evaluation graph as ONNX (opset 17) with the\n"
    "                      weights of --init-weights, or else the project's initial ones\n"
    "  --fold-bn           fold each BatchNorm into the layer before it in the export\n"
    "  --import-onnx F --to P.nlproj\n"
    "                      make a project of an ONNX model, its initializers saved as\n"
    "                      P.safetensors, the project's initial weights\n"
    "  --export-pytorch DIR  write model.py (an nn.Module that loads this project's\n"
    "                      safetensors) and train.py (the same training in PyTorch)\n";

struct Args {
  std::string project, events, summaryJson, devices;
  int ranks = 0;                     // --ranks: 0 the project's
  int threadRanks = 0;               // --thread-ranks
  int rank = -1, worldSize = 0;      // a worker of a --ranks job (set by its launcher)
  std::string rendezvous, rankLogs;  // the job's rendezvous (folder, tcp://); where ranks 1.. log
  std::string rankAddress;           // where the other ranks reach this one (several hosts)
  double rankTimeout = 0;            // 0: train.distributed.timeout_s, else 60
  bool explain = false, quiet = false, summary = false;
  bool showUsage = false;  // the command line itself was not understood
  netloom::TrainOptions opts;
};

// Reads a whole decimal integer in [lo, hi]; anything else (a sign, trailing text,
// a value the field cannot hold) is an error naming the option, never a wrap.
std::string parseInt(const std::string& option, const char* s, uint64_t lo, uint64_t hi,
                     uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v =
      s && std::isdigit(static_cast<unsigned char>(*s)) ? std::strtoull(s, &end, 10) : 0;
  if (!end || errno || *end || v < lo || v > hi)
    return option + " needs a whole number from " + std::to_string(lo) + " to " +
           std::to_string(hi) + (s ? std::string(", got '") + s + "'" : std::string());
  out = v;
  return {};
}

// Returns an error message, or empty on success.
std::string parseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    constexpr uint64_t kInt32 = INT32_MAX, kInt64 = INT64_MAX;
    uint64_t n = 0;
    std::string s;
    auto number = [&](uint64_t lo, uint64_t hi) {
      return parseInt(k, i + 1 < argc ? argv[++i] : nullptr, lo, hi, n);
    };
    if (k == "--epochs") {
      if (auto e = number(1, kInt32); !e.empty()) return e;
      a.opts.epochs = int(n);
    } else if (k == "--max-steps") {
      if (auto e = number(0, kInt64); !e.empty()) return e;
      a.opts.maxSteps = int64_t(n);
    } else if (k == "--batch-size") {
      if (auto e = number(1, kInt32); !e.empty()) return e;
      a.opts.batchSize = int(n);
    } else if (k == "--threads") {
      if (auto e = number(1, netloom::kMaxThreads); !e.empty()) return e;
      a.opts.threads = int(n);
    } else if (k == "--seed") {
      if (auto e = number(0, UINT64_MAX); !e.empty()) return e;
      a.opts.seed = n;
    } else if (k == "--train-limit") {
      if (auto e = number(0, kInt64); !e.empty()) return e;
      a.opts.trainLimit = int64_t(n);
    } else if (k == "--test-limit") {
      if (auto e = number(0, kInt64); !e.empty()) return e;
      a.opts.testLimit = int64_t(n);
    } else if (k == "--memory-limit") {
      if (!value(s)) return "--memory-limit needs a size (as in 512M, 4G)";
      auto bytes = netloom::parseByteSize(s, "--memory-limit");
      if (!bytes) return bytes.error().message;
      a.opts.memoryLimit = *bytes;
    } else if (k == "--precision") {
      if (!value(a.opts.precision)) return "--precision needs fp32, bf16 or fp16";
      if (!netloom::parsePrecision(a.opts.precision))
        return "--precision: '" + a.opts.precision + "' is not a precision (fp32, bf16, fp16)";
    } else if (k == "--ranks") {
      if (auto e = number(1, 4096); !e.empty()) return e;
      a.ranks = int(n);
    } else if (k == "--thread-ranks") {
      if (auto e = number(1, 4096); !e.empty()) return e;
      a.threadRanks = int(n);
    } else if (k == "--rank") {
      if (auto e = number(0, 4095); !e.empty()) return e;
      a.rank = int(n);
    } else if (k == "--world-size") {
      if (auto e = number(1, 4096); !e.empty()) return e;
      a.worldSize = int(n);
    } else if (k == "--rendezvous") {
      if (!value(a.rendezvous)) return "--rendezvous needs a folder";
    } else if (k == "--rank-address") {
      if (!value(a.rankAddress)) return "--rank-address needs this host's address";
    } else if (k == "--rank-logs") {
      if (!value(a.rankLogs)) return "--rank-logs needs a folder";
    } else if (k == "--rank-timeout") {
      if (auto e = number(1, 86400); !e.empty()) return e;
      a.rankTimeout = double(n);
    } else if (k == "--collective-failures-exit") {
      // A rank of a job on several hosts: a failed collective exits 75 without a
      // Failed event, and netloom-job, which reaches every host, names the rank at fault.
      a.opts.leaveCollectiveFailures = true;
    } else if (k == "--checkpoint-on-stop") {
      a.opts.checkpointOnStop = true;
    } else if (k == "--no-cuda-graphs") {
      a.opts.graphs = false;
    } else if (k == "--devices") {
      if (!value(a.devices)) return "--devices needs a device (cpu, cuda:0)";
      netloom::DeviceId id;
      if (std::string bad = netloom::parseDeviceId(a.devices, id); !bad.empty())
        return "--devices: " + bad;
    } else if (k == "--events") {
      if (!value(a.events)) return "--events needs a file";
    } else if (k == "--summary-json") {
      if (!value(a.summaryJson)) return "--summary-json needs a file";
    } else if (k == "--init-weights") {
      if (!value(a.opts.initWeights)) return "--init-weights needs a file";
    } else if (k == "--save-weights") {
      if (!value(a.opts.saveWeights)) return "--save-weights needs a file";
    } else if (k == "--checkpoint-dir") {
      if (!value(a.opts.checkpointDir)) return "--checkpoint-dir needs a folder";
    } else if (k == "--resume") {
      if (!value(a.opts.resume)) return "--resume needs a checkpoint folder";
    } else if (k == "--profile") {
      a.opts.profile = true;
    } else if (k == "--no-fuse") {
      a.opts.fuse = false;
    } else if (k == "--disable-pass") {
      std::string names;
      if (!value(names) || names.empty()) return "--disable-pass needs a pass name";
      std::stringstream list(names);
      for (std::string name; std::getline(list, name, ',');)
        if (!name.empty()) a.opts.disabledPasses.insert(name);
    } else if (k == "--plain-layouts") {
      a.opts.plainLayouts = true;
    } else if (k == "--norms") {
      a.opts.reportNorms = true;
    } else if (k == "--summary") {
      a.summary = true;
    } else if (k == "--explain") {
      a.explain = true;
    } else if (k == "--quiet") {
      a.quiet = true;
    } else if (!k.empty() && k[0] == '-') {
      a.showUsage = true;
      return "unknown option '" + k + "'";
    } else if (a.project.empty()) {
      a.project = k;
    } else {
      return "more than one project given ('" + a.project + "', '" + k + "')";
    }
  }
  if (a.project.empty()) {
    a.showUsage = true;
    return "no project given";
  }
  return {};
}

netloom::Json summaryJson(const netloom::TrainSummary& s) {
  using netloom::Json;
  Json o = Json::object();
  o.set("epochs", Json::number(s.epochs));
  o.set("steps", Json::number(double(s.steps)));
  o.set("train_loss", Json::number(s.trainLoss));
  o.set("test_loss", Json::number(s.testLoss));
  o.set("test_accuracy", s.testAccuracy >= 0 ? Json::number(s.testAccuracy) : Json());
  o.set("samples_per_sec", Json::number(s.samplesPerSec));
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
int printPeak(int argc, char** argv) {
  uint64_t threads = uint64_t(omp_get_num_procs());
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--threads"))
      if (auto e = parseInt("--threads", i + 1 < argc ? argv[i + 1] : nullptr, 1,
                            netloom::kMaxThreads, threads);
          !e.empty()) {
        std::fprintf(stderr, "netloom-train: %s\n", e.c_str());
        return 2;
      }
  netloom::cpu::configureThreads(int(threads));
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

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--version")) {
      std::printf("netloom-train %s\n", NETLOOM_VERSION);
      return 0;
    }
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("%s", kUsage);
      return 0;
    }
    if (!std::strcmp(argv[i], "--list-devices")) {
      std::printf("%s", netloom::listDevices().c_str());
      return 0;
    }
    if (!std::strcmp(argv[i], "--peak")) return printPeak(argc, argv);
  }
  if (int rc = netloom::cli::runConversion(argc, argv); rc >= 0) return rc;
  Args a;
  if (std::string err = parseArgs(argc, argv, a); !err.empty()) {
    std::fprintf(stderr, "netloom-train: %s\n%s", err.c_str(),
                 a.showUsage ? kUsage : "(netloom-train --help lists the options)\n");
    return 2;
  }
  auto project = netloom::loadProject(a.project);
  if (!project) {
    std::fprintf(stderr, "netloom-train: %s\n", project.error().message.c_str());
    return 2;
  }
  a.opts.projectDir = std::filesystem::absolute(a.project).parent_path().string();
  // --devices wins over the project's train.device, and is said to be unavailable
  // under its own name.
  if (!a.devices.empty()) {
    netloom::DeviceId id;
    netloom::parseDeviceId(a.devices, id);
    std::string unavailable;
    if (!netloom::openDevice(id, unavailable)) {
      std::fprintf(stderr, "netloom-train: --devices %s\n", unavailable.c_str());
      return 2;
    }
    project->mutable_train()->set_device(a.devices);
  }

  // A data-parallel job: this process launches the ranks and reports for them.
  int ranks = a.ranks > 0 ? a.ranks : std::max(1, project->train().distributed().ranks());
  if (project->train().distributed().ranks() < 0) {
    std::fprintf(stderr, "netloom-train: %s: train.distributed.ranks must be at least 1, got %d\n",
                 a.project.c_str(), project->train().distributed().ranks());
    return 2;
  }
  double timeout = a.rankTimeout > 0 ? a.rankTimeout
                   : project->train().distributed().timeout_s() > 0
                       ? project->train().distributed().timeout_s()
                       : 60.0;
  if (a.summary) {
    int64_t batch =
        a.opts.batchSize > 0 ? a.opts.batchSize : std::max(1, project->train().batch_size());
    auto summary = netloom::summarizeModel(project->model(), batch);
    if (!summary) {
      std::fprintf(stderr, "netloom-train: %s: %s\n", a.project.c_str(),
                   summary.error().message.c_str());
      return 2;
    }
    std::printf("%s", summary->table().c_str());
    return 0;
  }

  if (a.threadRanks > 0 && (a.ranks > 0 || a.rank >= 0)) {
    std::fprintf(stderr,
                 "netloom-train: --thread-ranks and --ranks are two ways to run ranks; "
                 "give one\n");
    return 2;
  }
  // The project's CPU ranks as threads, unless the command line says otherwise.
  const bool threadRanksFlag = a.threadRanks > 0;
  if (a.threadRanks == 0 && a.ranks == 0 && a.rank < 0 &&
      project->train().distributed().threads() && project->train().distributed().ranks() > 1)
    a.threadRanks = project->train().distributed().ranks();
  else if (a.threadRanks > 0 && project->train().distributed().ranks() > 1)
    std::fprintf(stderr, "netloom-train: --thread-ranks %d over train.distributed.ranks %d\n",
                 a.threadRanks, project->train().distributed().ranks());
  if (a.threadRanks > 0) {
    if (projectGpu(*project)) {
      std::fprintf(stderr,
                   "netloom-train: ranks that are threads (--thread-ranks, "
                   "train.distributed.threads) train on the CPU, the project on %s; GPU "
                   "ranks run with --ranks, one process per GPU\n",
                   project->train().device().c_str());
      return 2;
    }
    ranks = a.threadRanks;
    const int cores = omp_get_num_procs();
    if (ranks > cores) {
      std::fprintf(stderr,
                   "netloom-train: %s %d: this computer has %d cores, and each rank needs one\n",
                   threadRanksFlag ? "--thread-ranks" : "train.distributed.ranks", ranks, cores);
      return 2;
    }
    if (a.opts.threads == 0) a.opts.threads = std::max(1, cores / ranks);
  }

  if (a.explain) {
    std::unique_ptr<netloom::Communicator> planned;
    if (ranks > 1) {  // the plan of each rank, with its gradient buckets
      planned = netloom::planningRanks(ranks);
      a.opts.comm = planned.get();
    }
    auto text = netloom::explainTraining(*project, a.opts);
    if (!text) {
      std::fprintf(stderr, "netloom-train: %s: %s\n", a.project.c_str(),
                   text.error().message.c_str());
      return 2;
    }
    std::printf("%s", text->c_str());
    return 0;
  }

  if (a.rank < 0 && ranks > 1 && a.threadRanks == 0) {
    int cores = omp_get_num_procs();
    const bool gpu = projectGpu(*project).has_value();
    const netloom::Backend* cuda = netloom::findBackend(netloom::DeviceKind::Cuda);
    int capacity = gpu ? (cuda ? int(cuda->probe().devices.size()) : 0) : cores;
    if (ranks > capacity) {
      std::fprintf(stderr,
                   "netloom-train: %s %d: this computer has %d %s, and each rank needs one\n",
                   a.ranks > 0 ? "--ranks" : "train.distributed.ranks", ranks, capacity,
                   gpu ? "GPUs" : "cores");
      return 2;
    }
    netloom::RankJob job;
    job.ranks = ranks;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--ranks")) {
        ++i;
        continue;
      }
      job.args.push_back(argv[i]);
    }
    job.events = a.events;
    job.appendEvents = !a.opts.resume.empty();
    job.logDir = !a.rankLogs.empty() ? a.rankLogs : a.opts.projectDir + "/logs";
    job.threadsPerRank = a.opts.threads > 0 ? a.opts.threads : std::max(1, cores / ranks);
    job.timeoutSeconds = timeout;
    std::signal(SIGTERM, onStopSignal);
    std::signal(SIGINT, onStopSignal);
    return netloom::runRanks(job, g_stop);
  }
  std::unique_ptr<netloom::Communicator> comm;
  std::unique_ptr<netloom::ThreadRankJob> threadJob;
  if (ranks > 1 && a.threadRanks > 0) {
    threadJob = std::make_unique<netloom::ThreadRankJob>(ranks, timeout);
    a.opts.comm = threadJob->rank0();
  }
  std::shared_ptr<netloom::RendezvousStore> store;  // kept: rank 0 serves the others from it
  if (a.rank >= 0) {
    if (a.worldSize < 1 || a.rank >= a.worldSize || a.rendezvous.empty()) {
      std::fprintf(stderr, "netloom-train: --rank needs --world-size above it and --rendezvous\n");
      return 2;
    }
    netloom::RankOptions ro;
    ro.rank = a.rank;
    ro.size = a.worldSize;
    ro.timeoutSeconds = timeout;
    // On GPUs, one rank per device: rank r of a job on this computer takes GPU r.
    if (auto gpu = projectGpu(*project)) {
      netloom::DeviceId id = *gpu;
      id.index = a.rank;
      std::string unavailable;
      a.opts.device = netloom::openDevice(id, unavailable);
      if (!a.opts.device) {
        std::fprintf(stderr, "netloom-train: rank %d: %s\n", a.rank, unavailable.c_str());
        return 2;
      }
      ro.device = a.opts.device;
    }
    if (!a.rankAddress.empty()) ro.hostname = a.rankAddress;
    // Ranks on several hosts meet at rank 0's TCP store, with the job's secret from
    // the environment (never the command line); rank 0 says its port in
    // rendezvous.port, in the job's folder.
    if (a.rendezvous.rfind("tcp://", 0) == 0) {
      std::string where = a.rendezvous.substr(6);
      size_t colon = where.rfind(':');
      uint64_t port = 0;
      if (colon == std::string::npos || colon == 0 ||
          !parseInt("--rendezvous", where.c_str() + colon + 1, 0, 65535, port).empty()) {
        std::fprintf(stderr, "netloom-train: --rendezvous %s: expected tcp://HOST:PORT\n",
                     a.rendezvous.c_str());
        return 2;
      }
      const char* secret = std::getenv("NETLOOM_RANK_SECRET");
      if (!secret || !*secret) {
        std::fprintf(stderr,
                     "netloom-train: --rendezvous %s needs the job's secret in "
                     "NETLOOM_RANK_SECRET\n",
                     a.rendezvous.c_str());
        return 2;
      }
      std::string kept = secret;
      unsetenv("NETLOOM_RANK_SECRET");  // no process this one starts inherits it
      auto made = netloom::tcpRendezvous(where.substr(0, colon), int(port), a.rank, kept,
                                         a.rank == 0 ? "rendezvous.port" : "", timeout);
      if (!made) {
        std::fprintf(stderr, "netloom-train: rank %d: %s\n", a.rank, made.error().message.c_str());
        return 1;
      }
      store = *made;
    } else {
      store = netloom::fileRendezvous(a.rendezvous);
    }
    auto joined = netloom::connectRanks(ro, store);
    if (!joined) {
      std::fprintf(stderr, "netloom-train: %s\n", joined.error().message.c_str());
      return 1;
    }
    comm = std::move(*joined);
    a.opts.comm = comm.get();
  }

  auto hold = netloom::StepHold::fromEnvironment();
  if (!hold) {
    std::fprintf(stderr, "netloom-train: %s\n", hold.error().message.c_str());
    return 2;
  }
  // An output that can never be written (a folder, a block device) is said now, not
  // after the training whose results it was to keep.
  for (const std::string* out : {&a.summaryJson, &a.opts.saveWeights}) {
    if (out->empty()) continue;
    if (auto target = netloom::resolveOutput(*out); !target) {
      std::fprintf(stderr, "netloom-train: %s\n", target.error().message.c_str());
      return 2;
    }
  }
  netloom::EventWriter events;
  if (!a.events.empty()) {
    if (auto st = events.open(a.events, !a.opts.resume.empty()); !st) {
      std::fprintf(stderr, "netloom-train: %s\n", st.message().c_str());
      return 2;
    }
  }
  netloom::ProgressPrinter progress(stderr);
  std::string writeError;
  auto sink = [&](const netloom::proto::TrainEvent& e) {
    if (!a.events.empty() && writeError.empty())
      if (auto st = events.write(e); !st) {
        // A run whose stream cannot be written (a full disk) is not watched by
        // anyone: it stops after this step.
        writeError = st.message();
        g_stop = true;
      }
    if (!a.quiet)
      progress.onEvent(e);
    else if (e.has_log() && e.log().level() == netloom::proto::Log::WARNING)
      std::fprintf(stderr, "netloom-train: warning: %s\n", e.log().text().c_str());
    // Held after the step's event is out, so whoever holds it has seen the step.
    if (e.has_step() && writeError.empty())
      if (auto st = hold->after(e.step().step(), g_stop); !st) {
        writeError = st.message();
        g_stop = true;
      }
  };
  a.opts.stop = &g_stop;
  std::signal(SIGTERM, onStopSignal);
  std::signal(SIGINT, onStopSignal);
  if (threadJob) threadJob->start(*project, a.opts);
  auto result = netloom::runTraining(*project, a.opts, sink);
  std::string others = threadJob ? threadJob->finish(!result) : std::string();
  events.close();
  if (!others.empty()) {
    std::fprintf(stderr, "netloom-train: %s\n", others.c_str());
    if (result) return 1;
  }
  if (!writeError.empty()) std::fprintf(stderr, "netloom-train: %s\n", writeError.c_str());
  if (!result) {
    if (a.quiet) std::fprintf(stderr, "netloom-train: %s\n", result.error().message.c_str());
    // A run refused before it started (too large for this machine) is an input error.
    if (result.error().kind == netloom::ErrorKind::Collective) return 75;
    return result.error().kind == netloom::ErrorKind::Refused ? 2 : 1;
  }
  if (a.opts.profile) std::printf("%s", result->profile.c_str());
  if (!a.summaryJson.empty()) {
    if (auto st = netloom::writeFileAtomic(a.summaryJson, summaryJson(*result).dump() + "\n");
        !st) {
      std::fprintf(stderr, "netloom-train: %s\n", st.message().c_str());
      return 1;
    }
  }
  return writeError.empty() ? 0 : 1;
}
