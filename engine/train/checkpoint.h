// Checkpoints: everything a run needs to continue exactly where it stopped — weights,
// buffers and optimizer state (one safetensors file) and a small JSON manifest with
// the step, the position in the data order and the running totals. Random streams
// are pure functions of (seed, step, epoch, sample), so the seed and the position
// are the random state. Each checkpoint is a folder written under a temporary name
// and renamed when complete; the `latest` file, replaced atomically afterwards,
// names the newest good one, so a crash mid-write never replaces it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/proto/project.pb.h"
#include "engine/runtime/param_store.h"

namespace netloom {

// Where a run stands, saved with every checkpoint.
struct RunPosition {
  int64_t step = 0;          // optimizer steps done
  int epoch = 1;             // the epoch in progress (1-based)
  int64_t batchInEpoch = 0;  // batches of that epoch done
  // Totals of the epoch in progress, so its averages come out as in one run.
  double lossSum = 0;
  std::map<std::string, double> metricSums;
  int64_t samples = 0;
  double trainSeconds = 0;  // for throughput over the whole run
  int64_t trainSamples = 0;
  // Best-metric tracking (keep_best, early stopping).
  double best = 0;
  bool hasBest = false;
  int bestEpoch = 0;
  int epochsWithoutImprovement = 0;
};

struct LoadedCheckpoint {
  std::string path;  // the checkpoint folder
  RunPosition position;
  uint64_t seed = 0;
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;  // of its tensor file (dataMetadata)
};

// What a weights file or checkpoint says of the data beside its tensors: a language
// model's vocabulary ("vocabulary": "char" or "byte"; "vocab": a JSON array of the
// tokens' spellings, char only), so sampling from it decodes as training encoded.
std::map<std::string, std::string> dataMetadata(const Dataset& train);
// The vocabulary `metadata` records, if any (byte: the 256 one-byte tokens). A
// malformed entry is an error naming `file`.
struct RecordedVocab {
  std::vector<std::string> tokens;
  bool bytes = false;
};
Result<std::optional<RecordedVocab>> vocabFromMetadata(
    const std::map<std::string, std::string>& metadata, const std::string& file);

class CheckpointWriter {
 public:
  // `metadata` travels in every checkpoint's tensor file (dataMetadata).
  CheckpointWriter(std::string dir, proto::CheckpointPolicy policy,
                   std::map<std::string, std::string> metadata = {});

  // Writes a checkpoint named after the step; prunes to keep_last. Returns its folder.
  Result<std::string> write(const ParamStore& store, const RunPosition& pos, uint64_t seed);
  // Copies a written checkpoint to `best/` (atomically replacing the previous best).
  Status markBest(const std::string& checkpoint);

 private:
  std::string m_dir;
  proto::CheckpointPolicy m_policy;
  std::map<std::string, std::string> m_metadata;
};

// Reads `dir`: a checkpoint folder, or a folder of checkpoints whose `latest` names one.
// Errors name the file and what is wrong.
Result<LoadedCheckpoint> readCheckpoint(const std::string& dir);

// Loads every persistent tensor (weights, buffers, optimizer state) from a checkpoint
// into a store built for the current model. A checkpoint of another model is refused,
// naming the first tensor that does not fit.
// `stage`: the store holds one pipeline stage's tensors; the others are skipped.
Status restoreTensors(ParamStore& store, const LoadedCheckpoint& ckpt, bool stage = false);

// Loads a model's parameters and buffers, not its optimizer state, from a weights
// file (--save-weights) or a checkpoint folder (a run still going) into `store`;
// `metadata`, when given, receives the file's (a language model's vocabulary).
Status loadModelWeights(ParamStore& store, const std::string& path,
                        std::map<std::string, std::string>* metadata = nullptr);

// Every persistent tensor of the store, for a checkpoint.
std::vector<NamedTensor> exportState(const ParamStore& store);

}  // namespace netloom
