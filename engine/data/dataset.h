// Datasets and the loader that turns them into batches. Sources (IDX, CSV, image
// folders and lists, synthetic) produce a Dataset; splitting, normalisation,
// augmentation, shuffling, batching and prefetching happen here so every source
// behaves alike.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/data/image_decode.h"
#include "engine/proto/project.pb.h"
#include "engine/util/memory_budget.h"
#include "engine/util/status.h"
#include "kernels/core/tensor.h"

namespace netloom {

// Samples stored row-major. Byte images stay bytes in memory (a quarter of the
// floats) and are scaled and normalised while a batch is assembled.
struct Dataset {
  Shape sampleShape;            // one sample's feature shape, e.g. {1, 28, 28} or {2}
  std::vector<uint8_t> bytes;   // features when the source is bytes (IDX), else empty
  std::vector<float> floats;    // features otherwise
  std::vector<int32_t> labels;  // one class index per sample
  std::vector<float> targets;   // raw float labels (CSV, for regression); empty: use labels
  int32_t classes = 0;          // number of classes (max label + 1)
  // Where each sample came from, for errors that name it: the file holding the
  // labels, and per sample its line there (CSV) or its record number (IDX, from 1).
  // Empty for generated sets.
  std::string labelFile;
  std::vector<int64_t> origins;
  bool originsAreLines = false;
  // Images left on disk: one file per sample, decoded to `image` as batches are
  // assembled, on `decodeThreads` threads; `bytes` stays empty. An unreadable file
  // fails the pass, naming it, or with `skipUnreadable` is replaced by the next
  // readable sample and counted.
  std::vector<std::string> files;
  ImageSpec image;
  bool skipUnreadable = false;
  int decodeThreads = 1;

  // Text (a language model's data): every split reads windows of `context` tokens
  // of one token stream; sample i is the window at starts[i] and its labels the
  // window one token on. `vocab` spells each token id.
  std::shared_ptr<const std::vector<int32_t>> tokens;
  std::vector<int64_t> starts;
  int64_t context = 0;
  std::vector<std::string> vocab;
  bool byteVocab = false;  // vocab is the 256 bytes, not characters
  std::string textFile;
  int64_t textEnd = 0;  // where this split's tokens end: no window reads past it
  bool isText() const { return tokens != nullptr; }

  int64_t size() const { return static_cast<int64_t>(isText() ? starts.size() : labels.size()); }
  int64_t featuresPerSample() const { return numel(sampleShape); }
  // What its vectors hold, in bytes.
  int64_t memoryBytes() const;
  // The samples at `indices`, in that order, as a new dataset.
  Dataset subset(const std::vector<int64_t>& indices) const;
};

// Fails unless every label is a whole number in [0, classes), naming the file and
// line (or record) of the first that is not. `split` names the set in the message
// ("training", "test") when the labels have no file.
Status checkClassLabels(const Dataset& data, int32_t classes, const std::string& split);

// Scale then affine: x' = (x * scale - mean) / std, with one mean and std per channel
// of C × H × W samples where `channelMean` is set.
struct Normalizer {
  float scale = 1.0f, mean = 0.0f, std = 1.0f;
  std::vector<float> channelMean = {}, channelStd = {};  // empty, or one per channel
};

// Random crop, horizontal flip and translation of C×H×W images, applied to raw
// pixel values before normalisation with zero (black) entering at the edges, as
// torchvision pads. Order: crop, translate, flip. Each sample's draws come from its
// own key, so an epoch's augmentations do not depend on threads or on resuming.
struct Augmenter {
  int32_t cropPadding = 0;      // RandomCrop(size, padding): a shift in [-p, p] per axis
  bool horizontalFlip = false;  // left-right with probability 0.5
  int32_t maxTranslation = 0;   // a shift in [-t, t] per axis

  // Rejects negative sizes, naming the field.
  static Result<Augmenter> fromProto(const proto::Augmentation& def);
  bool enabled() const { return cropPadding > 0 || horizontalFlip || maxTranslation > 0; }
  // Fails when the augmentation is on and samples are not channels × height × width.
  Status check(const Shape& sampleShape) const;
  // The key of one sample's draws: a pure function of (seed, epoch, sample index).
  static uint64_t sampleKey(uint64_t seed, int64_t epoch, int64_t sampleIndex);
  // Writes the augmented sample `src` (shape passed check()) to `dst`, which must not alias it.
  void apply(const uint8_t* src, uint8_t* dst, const Shape& shape, uint64_t key) const;
  void apply(const float* src, float* dst, const Shape& shape, uint64_t key) const;
};

struct DataSplits {
  Dataset train, val, test;
  Normalizer norm;
  Augmenter augment{};                  // for the training loader only; off unless the DataDef asks
  std::vector<std::string> classNames;  // label i's name, where the source names classes
  std::vector<std::string> warnings;    // what was accepted but should be looked at
};

// What an image folder or list holds, before anything is decoded.
struct ImageIndex {
  std::vector<std::string> paths;  // one per sample, in label-then-name order for folders
  std::vector<int32_t> labels;
  std::vector<int64_t> lines;           // lists: each sample's line in its CSV
  std::vector<std::string> classNames;  // sorted folder names, or the list's class names
  std::vector<int64_t> perClass;        // samples per class
  std::vector<std::string> warnings;    // empty class folders, files that are not images
};

// Lets another thread stop a listing that may be huge (a path half typed can name
// "/"), and lets a test hold one part-way. A listing checks `cancelled` at every
// directory entry or list line and then fails with "listing cancelled".
struct ListControl {
  std::atomic<bool> cancelled{false};
  // Called on the listing's thread before each check, with the entries seen so far.
  std::function<void(size_t entries)> onEntry;
};

// Lists `dir`'s class folders (sorted) and their PNG and JPEG files (sorted), without
// opening any. `classNames`, when given, fixes the classes (a test folder must use
// the training folder's): a folder not among them is an error naming it.
Result<ImageIndex> listImageFolder(const std::string& dir,
                                   const std::vector<std::string>* classNames = nullptr,
                                   ListControl* control = nullptr);
// Reads a CSV of path,label lines; paths resolve against the CSV's folder. Labels are
// all whole numbers (class indices) or else class names, sorted into indices unless
// `classNames` fixes them.
Result<ImageIndex> readImageList(const std::string& csvPath, bool hasHeader,
                                 const std::vector<std::string>* classNames = nullptr,
                                 ListControl* control = nullptr);
// Where an image source's shape is unset (0), takes it from the model's first Input
// whose sample shape is channels × height × width; where a text source's context is
// unset, the length of the model's int32 token Input.
void resolveImageShape(proto::DataDef& def, const proto::ModelDef& model);

// Readers. Errors name the file and what is wrong with it. Sizes a file claims are
// checked against its real size, and what the reader allocates is planned in
// `budget` first (null: a budget of what this process can have now).
Result<Dataset> readIdx(const std::string& imagesPath, const std::string& labelsPath,
                        const std::shared_ptr<MemoryBudget>& budget = nullptr);
Result<Dataset> readCsv(const std::string& path, const std::string& labelColumn, bool hasHeader,
                        char delimiter, const std::shared_ptr<MemoryBudget>& budget = nullptr);
// Generators: the caller plans their memory (syntheticBytes).
Dataset makeSpirals(int classes, int64_t samples, double noise, uint64_t seed);
Dataset makeBlobs(int classes, int64_t samples, int features, double stddev, uint64_t seed);

// Loads a project's DataDef: relative paths resolve against `baseDir`; applies
// limits, the validation split (seeded) and computes normalisation. What the splits
// hold stays planned in `budget` (null: a budget of what this process can have now).
// What would stop loadData before it reads a byte, found without reading: no
// source, or a file that is not there. One line per problem, naming the field and
// the path as it resolves against `baseDir` ("data.idx.train_images:
// /x/train.gz does not exist"); empty when the data can be looked for.
std::vector<std::string> dataProblems(const proto::DataDef& def, const std::string& baseDir);

Result<DataSplits> loadData(const proto::DataDef& def, const std::string& baseDir, uint64_t seed,
                            const std::shared_ptr<MemoryBudget>& budget = nullptr);

struct Batch {
  int64_t size = 0;                // samples in this batch (the last may be short)
  int64_t globalSize = 0;          // in the step's batch across all ranks (size for one)
  std::vector<float> x;            // size * featuresPerSample, normalised
  std::vector<int32_t> ids;        // text: x as int32 token ids (an int32 Input reads these)
  std::vector<int32_t> labels;     // size, or for text size * context (the next tokens)
  std::vector<float> labelFloats;  // labels as floats, for regression losses
};

// A text file's tokens and vocabulary (TextSource): `vocabulary` CHAR or BYTE; a CHAR
// vocabulary that is empty is built from the characters of the training part, the
// file's first 1 - validationFraction.
// Fails naming the file: unreadable, empty, or (CHAR) not valid UTF-8, with the byte
// offset of the first bad sequence.
struct TextTokens {
  std::vector<int32_t> tokens;
  std::vector<std::string> vocab;
  bool bytes = false;  // a byte vocabulary
};
Result<TextTokens> readText(const std::string& path, proto::TextSource::Vocabulary vocabulary,
                            std::vector<std::string> vocab, double validationFraction);
// The ids of `text` in `vocab` (CHAR: characters the vocabulary lacks are token 0;
// BYTE: the bytes), for a prompt; fails on invalid UTF-8 in CHAR mode.
Result<std::vector<int32_t>> encodeText(const std::string& text,
                                        const std::vector<std::string>& vocab, bool bytes);
// The text of token ids.
std::string decodeTokens(const std::vector<int32_t>& ids, const std::vector<std::string>& vocab);

// Produces one epoch of batches in a seeded order, assembled by a prefetch thread
// that keeps up to `prefetch` batches ready ahead of the consumer (or by the
// consumer, Options::onCaller).
class BatchLoader {
 public:
  struct Options {
    int64_t batchSize = 32;
    bool shuffle = true;
    uint64_t seed = 0;  // order = f(seed, epoch)
    int64_t epoch = 0;
    int prefetch = 2;
    int64_t skipBatches = 0;   // start part-way into the epoch (resume): steps done
    int64_t skipSamples = -1;  // or, when set, the samples of the epoch's order done
    // Data parallelism: each step's batch of ranks × batchSize samples of the
    // epoch's order is shared out, rank r taking the r-th contiguous share; a short
    // last batch is shared as evenly as possible. For training (`dropShort`), a last
    // batch too short to give every rank a sample is left out; for evaluation, every
    // sample counts once, and a rank without a share skips that batch.
    int rank = 0, ranks = 1;
    bool dropShort = true;
    // Every rank's share the same (tensor parallelism, whose ranks run one step
    // together): a last batch keeps a multiple of the ranks, the rest left out.
    bool evenShares = false;
    Augmenter augment{};  // off by default; on for training batches only
    // Batches assembled by next() on the caller's thread, with no prefetch thread: for
    // data held in memory when the run's kernels take every core, where a prefetch
    // thread would take a core from them at each batch. Data read from image files
    // keeps its decoding threads.
    bool onCaller = false;
  };

  BatchLoader(const Dataset& data, const Normalizer& norm, Options opts);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Fills `out` with the next batch; false at the end of the epoch.
  bool next(Batch& out);
  // All steps of the epoch, including those skipped.
  int64_t batchesPerEpoch() const;
  // The steps of an epoch over n samples, with batches of `batch` per rank.
  static int64_t steps(int64_t n, int64_t batch, int ranks, bool dropShort = true);
  // Fails when the options do not fit the data (augmentation of non-image samples),
  // and once next() has returned false, when an image could not be decoded: the
  // batches before it were delivered.
  Status status() const;
  // Unreadable images replaced so far (the dataset's skipUnreadable), and the first.
  int64_t skipped() const { return m_skipped; }
  std::string firstSkipped() const;
  // Batches a loader over `data` holds at once: ready, being assembled, being read.
  static int64_t batchesHeld(const Dataset& data, int prefetch);

  // The sample order for one epoch, exposed for tests.
  static std::vector<int64_t> epochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

 private:
  struct Range {
    int64_t start, count, global;  // this rank's share of a step's batch, in m_order
  };
  class Assembler;
  void work();
  bool assembleHere(Batch& out);
  void noteSkipped(const std::string& what);

  const Dataset& m_data;
  Normalizer m_norm;
  Options m_opts;
  Status m_status;
  std::vector<int64_t> m_order;
  std::vector<Range> m_batches;  // those left to load
  std::vector<std::thread> m_threads;
  std::vector<std::unique_ptr<Assembler>> m_callers;  // Options::onCaller's, one per thread
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  // Workers claim batches in order and hand them back by index; next() takes them in
  // order. A batch that fails stops the claims at it.
  std::map<int64_t, Batch> m_ready;
  int64_t m_nextClaim = 0, m_nextOut = 0;
  int64_t m_failedAt = INT64_MAX;
  int m_running = 0;
  bool m_stop = false;
  std::atomic<int64_t> m_skipped{0};
  std::string m_firstSkipped;
};

}  // namespace netloom
