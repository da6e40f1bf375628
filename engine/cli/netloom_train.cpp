// netloom-train: the headless trainer. Runs a project on this machine's CPU with a
// progress line on the terminal, and optionally writes the TrainEvent stream, a
// JSON summary and the final weights. Needs no Qt, so it runs on GPU nodes too.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/cli/progress.h"
#include "engine/io/event_stream.h"
#include "engine/io/json.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/runtime/memory_budget.h"
#include "engine/train/summary.h"
#include "engine/train/trainer.h"

namespace {

const char* kUsage =
    "usage: netloom-train PROJECT.nlproj [options]\n"
    "  --epochs N          train for N epochs (default: the project's)\n"
    "  --max-steps N       stop after N optimizer steps\n"
    "  --batch-size N      samples per step (default: the project's)\n"
    "  --threads N         CPU threads (default: all cores)\n"
    "  --devices D         where to train, over the project's train.device: cpu\n"
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
    "  --profile           print where the training steps' time went, by op and kernel\n"
    "  --norms             report each parameter's gradient and weight norm in the\n"
    "                      events, every tenth step\n"
    "  --plain-layouts     keep every activation in plain NCHW instead of the blocked\n"
    "                      layout oneDNN's convolutions prefer (for comparison)\n"
    "  --summary           print each node's output shape, parameters, FLOPs and\n"
    "                      activation memory, then exit\n"
    "  --quiet             no progress output\n"
    "  --version           print the version and exit\n";

struct Args {
  std::string project, events, summaryJson, devices;
  bool explain = false, quiet = false, summary = false;
  netloom::TrainOptions opts;
};

bool parseInt(const char* s, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno || !end || *end || v < 0) return false;
  out = v;
  return true;
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
    auto number = [&](int64_t& out) { return i + 1 < argc && parseInt(argv[++i], out); };
    int64_t n = 0;
    std::string s;
    if (k == "--epochs") {
      if (!number(n) || n < 1) return "--epochs needs a positive integer";
      a.opts.epochs = int(n);
    } else if (k == "--max-steps") {
      if (!number(n)) return "--max-steps needs a non-negative integer";
      a.opts.maxSteps = n;
    } else if (k == "--batch-size") {
      if (!number(n) || n < 1) return "--batch-size needs a positive integer";
      a.opts.batchSize = int(n);
    } else if (k == "--threads") {
      if (!number(n) || n < 1) return "--threads needs a positive integer";
      a.opts.threads = int(n);
    } else if (k == "--seed") {
      if (!number(n)) return "--seed needs a non-negative integer";
      a.opts.seed = uint64_t(n);
    } else if (k == "--train-limit") {
      if (!number(n)) return "--train-limit needs a non-negative integer";
      a.opts.trainLimit = n;
    } else if (k == "--test-limit") {
      if (!number(n)) return "--test-limit needs a non-negative integer";
      a.opts.testLimit = n;
    } else if (k == "--memory-limit") {
      if (!value(s)) return "--memory-limit needs a size (as in 512M, 4G)";
      auto bytes = netloom::parseByteSize(s, "--memory-limit");
      if (!bytes) return bytes.error().message;
      a.opts.memoryLimit = *bytes;
    } else if (k == "--devices") {
      if (!value(a.devices)) return "--devices needs a device (cpu)";
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
      return "unknown option '" + k + "'";
    } else if (a.project.empty()) {
      a.project = k;
    } else {
      return "more than one project given ('" + a.project + "', '" + k + "')";
    }
  }
  if (a.project.empty()) return "no project given";
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
  o.set("arena_bytes", Json::number(double(s.arenaBytes)));
  o.set("naive_bytes", Json::number(double(s.naiveBytes)));
  o.set("parameters", Json::number(double(s.parameters)));
  return o;
}

}  // namespace

namespace {

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
  }
  Args a;
  if (std::string err = parseArgs(argc, argv, a); !err.empty()) {
    std::fprintf(stderr, "netloom-train: %s\n%s", err.c_str(), kUsage);
    return 2;
  }
  auto project = netloom::loadProject(a.project);
  if (!project) {
    std::fprintf(stderr, "netloom-train: %s\n", project.error().message.c_str());
    return 2;
  }
  a.opts.projectDir = std::filesystem::absolute(a.project).parent_path().string();
  // --devices wins over the project's train.device; the trainer checks it.
  if (!a.devices.empty()) project->mutable_train()->set_device(a.devices);

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

  if (a.explain) {
    auto text = netloom::explainTraining(*project, a.opts);
    if (!text) {
      std::fprintf(stderr, "netloom-train: %s: %s\n", a.project.c_str(),
                   text.error().message.c_str());
      return 2;
    }
    std::printf("%s", text->c_str());
    return 0;
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
    if (!a.quiet) progress.onEvent(e);
  };
  a.opts.stop = &g_stop;
  std::signal(SIGTERM, onStopSignal);
  std::signal(SIGINT, onStopSignal);
  auto result = netloom::runTraining(*project, a.opts, sink);
  events.close();
  if (!writeError.empty()) std::fprintf(stderr, "netloom-train: %s\n", writeError.c_str());
  if (!result) {
    if (a.quiet) std::fprintf(stderr, "netloom-train: %s\n", result.error().message.c_str());
    // A run refused before it started (too large for this machine) is an input error.
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
