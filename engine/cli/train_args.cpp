#include "engine/cli/train_args.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "engine/runtime/devices.h"
#include "engine/runtime/program.h"
#include "engine/train/project_check.h"
#include "engine/util/memory_budget.h"

namespace netloom::cli {
namespace {

const char* kUsage =
    "usage: netloom-train PROJECT.nlproj [options]\n"
    "       netloom-train PROJECT.nlproj --export-onnx F.onnx [--init-weights W] [--fold-bn]\n"
    "       netloom-train --import-onnx F.onnx --to P.nlproj\n"
    "       netloom-train PROJECT.nlproj --export-pytorch DIR\n";

constexpr size_t kNameColumn = 24, kLineWidth = 80;

// The generated help: netloom-train's own usage lines, and each option's text
// wrapped to a terminal's width beside its name.
class Formatter : public CLI::Formatter {
 public:
  Formatter() { column_width(kNameColumn); }
  std::string make_usage(const CLI::App*, std::string) const override {
    return std::string(kUsage) + "\n";
  }
  std::string make_option_desc(const CLI::Option* o) const override {
    std::string out, line;
    std::istringstream words(o->get_description());
    for (std::string w; words >> w;) {
      if (!line.empty() && line.size() + 1 + w.size() > kLineWidth - kNameColumn) {
        out += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + w;
    }
    return out + line;
  }
};

// What the options write into, and the first value refused (CLI11 has read the
// command line by the time the callbacks run, so the first one to fail is kept).
struct Reader {
  CLI::App& app;
  TrainArgs& a;
  std::string error;

  void refuse(const std::string& why) {
    if (error.empty()) error = why;
  }

  template <class T>
  void number(const char* name, T& out, uint64_t lo, uint64_t hi, const char* help) {
    app.add_option_function<std::string>(
           name,
           [this, name, &out, lo, hi](const std::string& v) {
             uint64_t n = 0;
             if (std::string e = parseWholeNumber(name, v, lo, hi, n); !e.empty())
               refuse(e);
             else
               out = T(n);
           },
           help)
        ->type_name("N");
  }
  void text(const char* name, std::string& out, const char* type, const char* help) {
    app.add_option(name, out, help)->type_name(type);
  }
  void flag(const char* name, bool& out, const char* help) { app.add_flag(name, out, help); }
};

void addTraining(Reader& r) {
  TrainArgs& a = r.a;
  constexpr uint64_t kInt32 = INT32_MAX, kInt64 = INT64_MAX;
  r.app.add_option("project", a.project, "the project to train (PROJECT.nlproj)")
      ->type_name("PROJECT");
  r.number("--epochs", a.opts.epochs, 1, kInt32, "train for N epochs (default: the project's)");
  r.number("--max-steps", a.opts.maxSteps, 0, kInt64, "stop after N optimizer steps");
  r.number("--warmup-steps", a.opts.warmupSteps, 0, kInt64,
           "leave the first N steps out of steady_samples_per_sec (--summary-json)");
  r.number("--batch-size", a.opts.batchSize, 1, kInt32,
           "samples per step (default: the project's)");
  r.number("--threads", a.opts.threads, 1, kMaxThreads, "CPU threads (default: all cores)");
  r.text("--devices", a.devices, "D",
         "where to train, over the project's train.device: cpu, cuda:N (GPU N), cuda (GPU 0)");
  r.number("--seed", a.opts.seed, 0, UINT64_MAX, "seed for initialisation, shuffling and dropout");
  r.number("--train-limit", a.opts.trainLimit, 0, kInt64, "use only the first N training samples");
  r.number("--test-limit", a.opts.testLimit, 0, kInt64, "use only the first N test samples");
  r.app
      .add_option_function<std::string>(
          "--memory-limit",
          [&r](const std::string& v) {
            auto bytes = parseByteSize(v, "--memory-limit");
            if (!bytes)
              r.refuse(bytes.error().message);
            else
              r.a.opts.memoryLimit = *bytes;
          },
          "refuse a run that plans more memory than SIZE (bytes, or with K, M, G or T: 512M, "
          "4G); default: what is available")
      ->type_name("SIZE");
  r.text("--precision", a.opts.precision, "P",
         "fp32, bf16 or fp16 (over train.precision): bf16 and fp16 autocast the matrix ops; "
         "bf16 also stores the activations in 16 bits on the CPU; fp16 also scales the loss");
  r.text("--init-weights", a.opts.initWeights, "F",
         "start from the weights in a safetensors file (with --export-onnx: the weights "
         "exported)");
  r.text("--resume", a.opts.resume, "DIR",
         "continue from a checkpoint, or the latest in a folder of them; --events then "
         "appends to the stream");
}

void addOutputs(Reader& r) {
  TrainArgs& a = r.a;
  r.text("--events", a.events, "FILE", "write the length-delimited TrainEvent stream");
  r.text("--summary-json", a.summaryJson, "FILE", "write a JSON summary of the run");
  r.text("--save-weights", a.opts.saveWeights, "F", "write the final weights as safetensors");
  r.text("--checkpoint-dir", a.opts.checkpointDir, "D",
         "where checkpoints go (default: checkpoints/ beside the project)");
  r.flag("--checkpoint-on-stop", a.opts.checkpointOnStop,
         "a run stopped by SIGTERM or SIGINT leaves a checkpoint even where the project's "
         "policy asks for none");
  r.flag("--profile", a.opts.profile,
         "print where the training steps' time went, by op and kernel");
  r.flag("--norms", a.opts.reportNorms,
         "report each parameter's gradient and weight norm in the events, every tenth step");
  r.flag("--quiet", a.quiet, "no progress output");
}

void addSweep(Reader& r) {
  TrainArgs& a = r.a;
  r.flag("--sweep", a.sweep,
         "run the project's sweep: trials with the parameters it spans, several at once, a "
         "table printed as they end");
  r.number("--parallel", a.parallel, 1, 4096,
           "with --sweep: trials at once, the cores shared among them (over sweep.parallel)");
  r.text("--sweep-json", a.sweepJson, "FILE",
         "with --sweep: write {\"trials\": [...]} (parameters, status, objective, folder)");
  r.text("--target", a.target, "T",
         "with --sweep: where the trials run: local (this computer, the default), or saved "
         "hosts A,B,... (SSH hosts or Slurm login nodes, through netloom-job sweep)");
  r.text("--sweep-dir", a.sweepDir, "DIR",
         "with --sweep: where the trials' folders and sweep.json go (default: "
         "runs/sweep-<project>/ beside the project); a sweep started there before goes on");
}

void addParallel(Reader& r) {
  TrainArgs& a = r.a;
  r.number("--ranks", a.ranks, 1, 4096,
           "data parallel: N processes on this computer, each training on its share of every "
           "batch (batch size per rank), the cores divided among them (over "
           "train.distributed.ranks)");
  r.text("--rank-logs", a.rankLogs, "DIR",
         "where ranks 1.. write their logs (default: logs/ beside the project); rank 0 prints "
         "the progress");
  r.number("--thread-ranks", a.threadRanks, 1, 4096,
           "data parallel inside this process: N ranks, each a thread with its share of the "
           "cores (--threads: each rank's) and of every batch, summing in shared memory");
  r.number("--tensor-parallel", a.opts.tensorParallel, 1, 4096,
           "with --ranks or --thread-ranks: split each copy of the model over N ranks (tensor "
           "parallelism, as --sbp and the project's hints say, the other layers splitting "
           "their weights where they can); the copies train data-parallel (over "
           "train.distributed.tensor_parallel)");
  r.flag("--overlap", a.opts.overlap,
         "with --tensor-parallel: boxings move on a thread of their own while the step "
         "computes on (for ranks with cores to spare, or far apart)");
  r.number("--pipeline-stages", a.opts.pipelineStages, 1, 4096,
           "with --ranks or --thread-ranks: cut the model into N stages, each on its own rank, "
           "run as a 1F1B pipeline over micro-batches; the pipelines train data-parallel (over "
           "train.distributed.pipeline_stages)");
  r.number("--micro-batches", a.opts.microBatches, 1, 1 << 20,
           "with --pipeline-stages: micro-batches per step, which divide each rank's batch "
           "(default: the project's train.distributed.micro_batches, else twice the stages)");
  r.number("--zero", a.opts.zero, 0, 2,
           "with --ranks or --thread-ranks: ZeRO stage 1 shards the optimizer state across the "
           "ranks, 2 the summed gradients too (over train.distributed.zero)");
  // Set by the launcher of a job's ranks, not by hand.
  for (auto* o : {r.app.add_option("--rendezvous", a.rendezvous),
                  r.app.add_option("--rank-address", a.rankAddress)})
    o->group("");
  const char* hidden[] = {"--rank", "--world-size", "--rank-timeout"};
  r.number(hidden[0], a.rank, 0, 4095, "");
  r.number(hidden[1], a.worldSize, 1, 4096, "");
  r.number(hidden[2], a.rankTimeout, 1, 86400, "");
  for (const char* name : hidden) r.app.get_option(name)->group("");
  // A rank of a job on several hosts: a failed collective exits 75 without a Failed
  // event, and netloom-job, which reaches every host, names the rank at fault.
  r.app.add_flag("--collective-failures-exit", a.opts.leaveCollectiveFailures)->group("");
}

void addCompiler(Reader& r) {
  TrainArgs& a = r.a;
  r.app
      .add_option_function<std::vector<std::string>>(
          "--disable-pass",
          [&a](const std::vector<std::string>& names) {
            for (const std::string& n : names)
              if (!n.empty()) a.opts.disabledPasses.insert(n);
          },
          "compile without the optional pass NAME (repeatable, or names joined by commas; "
          "--explain lists the pipeline, optional passes marked *), to measure what it saves")
      ->type_name("NAME")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  r.app.add_flag_callback(
      "--no-fuse", [&a] { a.opts.fuse = false; },
      "the same as --disable-pass folding,fusion,chains (each op its own kernel)");
  r.flag("--plain-layouts", a.opts.plainLayouts,
         "keep every activation in plain NCHW instead of the blocked layout oneDNN's "
         "convolutions prefer (for comparison)");
  r.app.add_flag_callback(
      "--no-cuda-graphs", [&a] { a.opts.graphs = false; },
      "on a GPU, issue every kernel each step instead of replaying the step as a recorded "
      "CUDA Graph (for comparison)");
  r.flag("--explain", a.explain, "print the compiled plans and memory plans, then exit");
  r.app
      .add_option_function<std::vector<std::string>>(
          "--sbp",
          [&a](const std::vector<std::string>& hints) {
            for (const std::string& h : hints) {
              const size_t eq = h.find('=');
              a.opts.sbpHints.push_back(eq == std::string::npos
                                            ? std::pair{h, std::string()}
                                            : std::pair{h.substr(0, eq), h.substr(eq + 1)});
            }
          },
          "with --ranks N: spread node NODE by its SBP signature SIG, as "
          "--explain lists them, e.g. 'fc1=B | S(0), S(0) -> S(1)' (repeatable)")
      ->type_name("NODE=SIG")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  r.flag("--summary", a.summary,
         "print each node's output shape, parameters, FLOPs and activation memory, then exit");
}

void addInformation(Reader& r) {
  r.flag("--list-devices", r.a.listDevices,
         "print this machine's CPU and GPUs (or why there is no GPU), then exit");
  r.flag("--peak", r.a.peak,
         "measure this CPU's matrix-product peak (oneDNN sgemm 2048^3, on --threads N) and "
         "print it as JSON, then exit");
  r.flag("--version", r.a.version, "print the version and exit");
}

void addConversions(Reader& r) {
  ConvertArgs& c = r.a.convert;
  r.text("--export-onnx", c.exportOnnx, "F",
         "write the evaluation graph as ONNX (opset 17) with the weights of --init-weights, "
         "or else the project's initial ones");
  r.flag("--fold-bn", c.foldBn, "fold each BatchNorm into the layer before it in the export");
  r.text("--import-onnx", c.importOnnx, "F",
         "make a project of an ONNX model (with --to), its initializers saved as "
         "P.safetensors, the project's initial weights");
  r.text("--to", c.to, "P.nlproj", "the project --import-onnx writes");
  r.text("--export-pytorch", c.exportPytorch, "DIR",
         "write model.py (an nn.Module that loads this project's safetensors) and train.py "
         "(the same training in PyTorch)");
}

void addGeneration(Reader& r) {
  TrainArgs& a = r.a;
  r.app
      .add_option("--generate", a.generate,
                  "sample text from a trained language model (data.text), starting with PROMPT, "
                  "one token a step with a KV cache; the text is printed as it is sampled")
      ->type_name("PROMPT");
  r.text("--from", a.from, "CHECKPOINT",
         "the weights to generate with: a safetensors file (--save-weights) or a checkpoint "
         "folder");
  r.number("--max-tokens", a.maxTokens, 0, INT64_MAX, "tokens to sample (default 200)");
  r.app
      .add_option_function<std::string>(
          "--temperature",
          [&r](const std::string& v) {
            char* end = nullptr;
            const double t = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || !(t >= 0) || !std::isfinite(t))
              r.refuse("--temperature needs a number of 0 or more, got '" + v + "'");
            else
              r.a.temperature = t;
          },
          "divide the scores by T before sampling (default 1; 0: always the likeliest token)")
      ->type_name("T");
  r.number("--top-k", a.topK, 0, INT32_MAX, "sample among the K likeliest tokens (default: all)");
}

// Groups of options, as --help shows them.
void declare(Reader& r) {
  const std::pair<const char*, void (*)(Reader&)> groups[] = {{"Training", addTraining},
                                                              {"Outputs", addOutputs},
                                                              {"Data parallel", addParallel},
                                                              {"Compiler", addCompiler},
                                                              {"Sweeps", addSweep},
                                                              {"Information", addInformation},
                                                              {"Conversions", addConversions},
                                                              {"Generation", addGeneration}};
  // An option given twice takes its last value, as a launcher that adds its own
  // --rank-timeout to the user's relies on.
  r.app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (const auto& [name, add] : groups) {
    r.app.option_defaults()->group(name);
    add(r);
  }
}

int usageError(const std::string& why, bool showUsage) {
  std::fprintf(stderr, "netloom-train: %s\n%s(netloom-train --help lists the options)\n",
               why.c_str(), showUsage ? kUsage : "");
  return 2;
}

// Options given on the command line that a conversion has no use for.
std::string unusedByConversion(const CLI::App& app) {
  static const std::set<std::string> kConversion = {
      "project", "--export-onnx",    "--fold-bn",      "--import-onnx",
      "--to",    "--export-pytorch", "--init-weights", "--quiet"};
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0 && !kConversion.count(o->get_name()))
      return "'" + o->get_name() +
             "' does not go with a conversion (--export-onnx, --import-onnx, --export-pytorch)";
  return {};
}

// What the options say, checked together once each has been read.
std::string checkTogether(const CLI::App& app, TrainArgs& a) {
  if (a.convert.wanted()) {
    a.convert.project = a.project;
    a.convert.initWeights = a.opts.initWeights;
    if (std::string e = unusedByConversion(app); !e.empty()) return e;
    return checkConversion(a.convert);
  }
  if (!a.convert.to.empty() || a.convert.foldBn) {
    a.convert.project = a.project;
    return checkConversion(a.convert);
  }
  if (!a.sweep &&
      (a.parallel > 0 || !a.sweepJson.empty() || !a.sweepDir.empty() || !a.target.empty()))
    return std::string(a.parallel > 0         ? "--parallel"
                       : !a.sweepJson.empty() ? "--sweep-json"
                       : !a.sweepDir.empty()  ? "--sweep-dir"
                                              : "--target") +
           " goes with --sweep";
  if (a.sweep && (a.ranks > 0 || a.threadRanks > 0 || !a.opts.resume.empty() || !a.events.empty() ||
                  a.generate || a.explain))
    return "--sweep runs its trials itself, each with its own events; it does not go with "
           "--ranks, --thread-ranks, --resume, --events, --generate or --explain";
  if (!a.opts.precision.empty() && !parsePrecision(a.opts.precision))
    return "--precision: '" + a.opts.precision + "' is not a precision (fp32, bf16, fp16)";
  if (!a.devices.empty()) {
    DeviceId id;
    if (std::string bad = parseDeviceId(a.devices, id); !bad.empty()) return "--devices: " + bad;
  }
  if (app.count("--disable-pass") && a.opts.disabledPasses.empty())
    return "--disable-pass needs a pass name";
  return {};
}

}  // namespace

std::string parseWholeNumber(const std::string& option, const std::string& text, uint64_t lo,
                             uint64_t hi, uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  const bool digits = !text.empty() && std::isdigit(static_cast<unsigned char>(text[0]));
  unsigned long long v = digits ? std::strtoull(text.c_str(), &end, 10) : 0;
  if (!end || errno || *end || v < lo || v > hi)
    return option + " needs a whole number from " + std::to_string(lo) + " to " +
           std::to_string(hi) + ", got '" + text + "'";
  out = v;
  return {};
}

std::optional<int> parseTrainArgs(int argc, char** argv, TrainArgs& a) {
  CLI::App app{"Trains a NetLoom project on this machine, or converts it.", "netloom-train"};
  app.formatter(std::make_shared<Formatter>());
  app.allow_extras();  // an unknown option or a second project is refused below, by name
  Reader r{app, a, {}};
  declare(r);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usageError(e.what(), false);
  }
  if (a.version || a.listDevices) return std::nullopt;
  for (const std::string& extra : app.remaining()) {
    if (!extra.empty() && extra[0] == '-')
      return usageError("unknown option '" + extra + "'", true);
    return usageError("more than one project given ('" + a.project + "', '" + extra + "')", false);
  }
  if (!r.error.empty()) return usageError(r.error, false);
  if (std::string e = checkTogether(app, a); !e.empty()) return usageError(e, false);
  if (a.project.empty() && !a.peak && a.convert.importOnnx.empty())
    return usageError("no project given", true);
  return std::nullopt;
}

}  // namespace netloom::cli
