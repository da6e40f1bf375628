// Runs a project's training: loads data, compiles the training and evaluation
// programs, steps through the epochs and reports everything as TrainEvents. The
// CLI, the IDE's in-process runner and remote runs all go through here.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "engine/data/dataset.h"
#include "engine/proto/events.pb.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"
#include "kernels/core/communicator.h"
#include "kernels/core/device.h"

namespace netloom {

struct TrainOptions {
  std::string projectDir = ".";  // relative data paths resolve against it
  int epochs = 0;                // 0: the project's
  int64_t maxSteps = 0;          // 0: no limit
  // Steps left out of TrainSummary::steadySamplesPerSec: a benchmark's warm-up.
  int64_t warmupSteps = 0;
  int batchSize = 0;  // 0: the project's
  int threads = 0;    // 0: the project's, else every core
  // Ranks of this run on this computer, each with `threads` threads: its threads
  // (--thread-ranks), or its processes (--ranks, which start them all here).
  int ranksHere = 1;
  std::optional<uint64_t> seed;  // unset: the project's
  int64_t trainLimit = -1;       // -1: the project's data.train_limit
  int64_t testLimit = -1;
  std::string initWeights;    // safetensors to start from
  std::string saveWeights;    // safetensors written at the end
  std::string checkpointDir;  // where checkpoints go; empty: "checkpoints" beside the project
  bool profile = false;       // time every kernel launch of the training steps
  bool plainLayouts = false;  // keep every activation in plain NCHW (no layout pass)
  bool fuse = true;           // false: no fusion, folding or chains (CompileOptions::fuse)
  bool reportNorms = false;   // per-parameter gradient and weight norms in Step events
  bool graphs = true;         // on a GPU, replay each step as a recorded CUDA Graph
  std::string resume;         // continue from this checkpoint (or a folder of them)
  // Nodes spread by a chosen SBP signature (--sbp NODE=SIG), after the project's.
  std::vector<std::pair<std::string, std::string>> sbpHints;
  // Tensor parallelism (--tensor-parallel; 0: the project's train.distributed): the
  // ranks each copy of the model is split over. The launcher of the ranks makes the
  // groups (engine/parallel's tensorGroups) and gives them here: `tensorComm` the
  // ranks this one shares a copy with, `dataComm` those holding the same parts.
  int tensorParallel = 0;
  bool overlap = false;  // --overlap: boxings move while the step computes (CompileOptions)
  // ZeRO's stage (--zero; -1: the project's train.distributed.zero): 1 shards the
  // optimizer state across the ranks, 2 the summed gradients too.
  int zero = -1;
  Communicator* tensorComm = nullptr;
  Communicator* dataComm = nullptr;
  // Pipeline parallelism (--pipeline-stages, --micro-batches; 0: the project's): the
  // launcher's groups again, `stageComm` the ranks of this one's pipeline (stage k
  // on its rank k) and `dataComm` those running the same stage.
  int pipelineStages = 0, microBatches = 0;
  Communicator* stageComm = nullptr;
  // Optional compiler passes left out (--disable-pass), by name.
  std::set<std::string> disabledPasses;
  // Bytes the run may plan (data, parameters, optimizer state, arenas, prefetched
  // batches); 0: what this machine and process can give. Over it, the run is refused.
  int64_t memoryLimit = 0;
  const std::atomic<bool>* stop = nullptr;  // set to end the run after the current step
  // The device to train on, over train.device and --devices (an embedding program's
  // own, kept alive by it for the run); null: the one those name.
  Device* device = nullptr;
  std::string precision;  // over train.precision: "fp32", "bf16", "fp16"; empty: the project's
  // This rank's link to the others in a data-parallel run (null: alone). Each rank
  // trains on its share of every batch; rank 0 writes the checkpoints and weights.
  Communicator* comm = nullptr;
  // A failed collective ends the run with an ERROR log and an error of kind
  // Collective, not a Failed event: the launcher of ranks on several hosts asks them
  // all which one is at fault and writes the Failed event naming it.
  bool leaveCollectiveFailures = false;
  // A run stopped by request leaves a checkpoint to resume from even where the
  // project's policy asks for none (a Slurm job, which a requeue stops and reruns).
  bool checkpointOnStop = false;
};

struct TrainSummary {
  int epochs = 0;
  int64_t steps = 0;
  double trainLoss = 0, testLoss = 0, testAccuracy = -1;  // -1: the model has no Accuracy node
  double samplesPerSec = 0, wallSeconds = 0, compileMs = 0;
  // Over the steps after TrainOptions::warmupSteps (samplesPerSec: over every step).
  double steadySamplesPerSec = 0;
  std::string device;       // where it trained: "cpu", "cuda:0"
  double trainSeconds = 0;  // in training steps
  // Of which the host spent issuing them (feeding the batch and launching the step):
  // on a GPU the host's overhead per step, all of the step on the CPU.
  double issueSeconds = 0;
  int64_t arenaBytes = 0, naiveBytes = 0, parameters = 0;
  // What this rank holds besides the arena: its weights (parameters and buffers, its
  // parts of split ones) and its optimizer state (its shards under ZeRO).
  int64_t weightBytes = 0, stateBytes = 0;
  // The training step's floating-point operations per sample (forward, backward and
  // update, as the ops count them): samples/s times this is the step's FLOP/s.
  double flopsPerSample = 0;
  bool stoppedEarly = false;
  bool stoppedByRequest = false;  // TrainOptions::stop ended it before its last step
  std::string profile;            // the per-op breakdown, when TrainOptions::profile
  std::string precision = "fp32";
  // Under fp16: steps skipped because their scaled gradients overflowed, and the
  // loss scale at the end.
  int64_t skippedSteps = 0;
  double lossScale = 0;
  // Data parallelism: the ranks, the time this rank's gradient buckets took to sum
  // across them (on the communication thread) and the part its steps waited for.
  int ranks = 1;
  double commSeconds = 0, commWaitedSeconds = 0;
};

using EventSink = std::function<void(const proto::TrainEvent&)>;

// Every problem before the first step returns an Error (and a Failed event); a
// failure during training (a NaN loss) emits Failed naming the step, then returns
// an Error with the same message.
Result<TrainSummary> runTraining(const proto::Project& project, const TrainOptions& opts,
                                 const EventSink& sink);

// What a trained model says of samples: class probabilities (the softmax of the
// model's first output, or of the loss's input when the model names no output).
struct Predictions {
  int32_t classes = 0;
  std::string output;        // the tensor read
  Dataset samples;           // the samples as read, labels included
  std::vector<float> probs;  // samples.size() × classes
};

// Runs the evaluation plan with the weights in `weightsPath` (a safetensors file,
// or a checkpoint folder) over `samples` (raw features, as the dataset holds
// them), or over the test set when null.
Result<Predictions> predict(const proto::Project& project, const TrainOptions& opts,
                            const std::string& weightsPath, const Dataset* samples = nullptr);

// The compiled training and evaluation plans with their memory plans.
Result<std::string> explainTraining(const proto::Project& project, const TrainOptions& opts);

}  // namespace netloom
