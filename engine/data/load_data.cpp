// loadData: turns a project's DataDef into train/val/test splits and the
// normaliser. Every source passes through the same limit, split and
// normalisation steps, so they all behave alike.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>

#include "engine/data/sources.h"
#include "kernels/core/checked.h"
#include "kernels/core/rng.h"

namespace netloom {
using data_internal::resolve;
using data_internal::splitOff;
namespace {

constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist/";
// Stream tags keep the seeded splits independent of each other and of the shuffle.
constexpr uint64_t kTestSplitStream = 0x7E57;
constexpr uint64_t kValSplitStream = 0x7A11D;

std::string orDefault(const std::string& path, const char* file, const std::string& baseDir) {
  return path.empty() ? std::string(kFashionDir) + file : resolve(path, baseDir);
}

std::vector<int64_t> prefix(int64_t n) {
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  return idx;
}

Dataset takeFirst(const Dataset& ds, int64_t limit) {
  if (limit <= 0 || limit >= ds.size()) return ds;
  return ds.subset(prefix(limit));
}

Result<DataSplits> loadIdx(const proto::IdxSource& src, const std::string& baseDir,
                           const std::shared_ptr<MemoryBudget>& budget) {
  DataSplits s;
  auto train =
      readIdx(orDefault(src.train_images(), "train-images-idx3-ubyte.gz", baseDir),
              orDefault(src.train_labels(), "train-labels-idx1-ubyte.gz", baseDir), budget);
  if (!train) return train.error();
  auto test = readIdx(orDefault(src.test_images(), "t10k-images-idx3-ubyte.gz", baseDir),
                      orDefault(src.test_labels(), "t10k-labels-idx1-ubyte.gz", baseDir), budget);
  if (!test) return test.error();
  s.train = std::move(*train);
  s.test = std::move(*test);
  if (s.train.sampleShape != s.test.sampleShape) {
    return makeError("IDX train images are " + shapeToString(s.train.sampleShape) +
                     " but test images are " + shapeToString(s.test.sampleShape));
  }
  return s;
}

Result<char> parseDelimiter(const std::string& d) {
  if (d.empty()) return ',';
  if (d == "\\t" || d == "tab") return '\t';
  if (d.size() == 1) return d[0];
  return makeError("CSV delimiter must be one character, got '" + d + "'");
}

Result<DataSplits> loadCsv(const proto::CsvSource& src, const std::string& baseDir, uint64_t seed,
                           const std::shared_ptr<MemoryBudget>& budget) {
  if (src.train_path().empty()) return makeError("CSV data source has no train_path");
  auto delim = parseDelimiter(src.delimiter());
  if (!delim) return delim.error();
  const std::string trainPath = resolve(src.train_path(), baseDir);
  auto train = readCsv(trainPath, src.label_column(), src.has_header(), *delim, budget);
  if (!train) return train.error();

  DataSplits s;
  if (!src.test_path().empty()) {
    const std::string testPath = resolve(src.test_path(), baseDir);
    auto test = readCsv(testPath, src.label_column(), src.has_header(), *delim, budget);
    if (!test) return test.error();
    if (test->sampleShape != train->sampleShape) {
      return makeError("'" + trainPath + "' has " + shapeToString(train->sampleShape) +
                       " features per row but '" + testPath + "' has " +
                       shapeToString(test->sampleShape));
    }
    s.train = std::move(*train);
    s.test = std::move(*test);
    return s;
  }
  const double fraction = src.test_fraction() == 0 ? 0.2 : src.test_fraction();
  if (!(fraction > 0 && fraction < 1)) {
    return makeError("CSV test_fraction must be between 0 and 1, got " +
                     std::to_string(src.test_fraction()));
  }
  if (Status st = budget->check("the test split of '" + trainPath + "'", train->memoryBytes()); !st)
    return st.error();
  splitOff(*train, fraction, hashCombine(seed, kTestSplitStream), s.train, s.test);
  return s;
}

// Plans a generated set before it is drawn: each sample is its features and a label;
// blobs draw train and test together, then copy them apart, and keep a table of centres.
Status planSynthetic(const proto::SyntheticSource& src, int classes, int64_t trainN, int64_t testN,
                     int features, MemoryBudget& budget) {
  const bool blobs = src.kind() == proto::SyntheticSource::BLOBS;
  int64_t bytes = saturatingMul(trainN + testN, (int64_t(features) + 1) * 4);
  if (blobs)
    bytes = saturatingAdd(saturatingMul(bytes, 2), saturatingMul(int64_t(classes) * 8, features));
  std::string what = "data.synthetic (classes " + std::to_string(classes) + ", train_samples " +
                     std::to_string(trainN) + ", test_samples " + std::to_string(testN);
  if (blobs) what += ", features " + std::to_string(features);
  return budget.reserve(what + ")", bytes);
}

Result<DataSplits> loadSynthetic(const proto::SyntheticSource& src, uint64_t seed,
                                 MemoryBudget& budget) {
  const int classes = src.classes() > 0 ? src.classes() : 2;
  const int64_t trainN = src.train_samples() > 0 ? src.train_samples() : 1000;
  const int64_t testN = src.test_samples() > 0 ? src.test_samples() : 500;
  const int features =
      src.kind() == proto::SyntheticSource::BLOBS && src.features() > 0 ? src.features() : 2;
  if (Status st = planSynthetic(src, classes, trainN, testN, features, budget); !st)
    return st.error();
  DataSplits s;
  switch (src.kind()) {
    case proto::SyntheticSource::BLOBS: {
      // One draw shares the cluster centres between train and test.
      const double stddev = src.noise() > 0 ? src.noise() : 1.0;
      Dataset all = makeBlobs(classes, trainN + testN, features, stddev, seed);
      std::vector<int64_t> testIdx(testN);
      for (int64_t i = 0; i < testN; ++i) testIdx[i] = trainN + i;
      s.test = all.subset(testIdx);
      s.train = all.subset(prefix(trainN));
      return s;
    }
    case proto::SyntheticSource::SPIRALS:
    case proto::SyntheticSource::KIND_UNSPECIFIED: {
      // The arms' shape does not depend on the seed, so train and test differ only in noise.
      const double noise = src.noise() > 0 ? src.noise() : 0.1;
      s.train = makeSpirals(classes, trainN, noise, hashCombine(seed, 1));
      s.test = makeSpirals(classes, testN, noise, hashCombine(seed, 2));
      return s;
    }
    default: return makeError("unknown synthetic data kind " + std::to_string(src.kind()));
  }
}

// Mean and standard deviation (after `scale`) of the byte values counted in `hist`.
void histogramStats(const std::array<int64_t, 256>& hist, double scale, double& mean,
                    double& stddev) {
  double sum = 0, sumSq = 0;
  int64_t count = 0;
  for (int v = 0; v < 256; ++v) {
    sum += v * scale * hist[v];
    count += hist[v];
  }
  mean = count ? sum / count : 0.0;
  for (int v = 0; v < 256; ++v) sumSq += hist[v] * (v * scale - mean) * (v * scale - mean);
  stddev = count ? std::sqrt(sumSq / count) : 1.0;
}

// Mean and standard deviation of every feature value (after `scale`) in float data.
void featureStats(const Dataset& ds, double scale, double& mean, double& stddev) {
  double sum = 0, sumSq = 0;
  for (float v : ds.floats) sum += v * scale;
  const auto count = static_cast<int64_t>(ds.floats.size());
  mean = count ? sum / count : 0.0;
  for (float v : ds.floats) sumSq += (v * scale - mean) * (v * scale - mean);
  stddev = count ? std::sqrt(sumSq / count) : 1.0;
}

// A normalisation value that is NaN or infinite, or turns infinite as a float, makes
// every sample NaN: the run would train on nothing and save NaN weights.
Status checkFinite(const char* field, double v, const char* why = "") {
  if (std::isfinite(v) && std::isfinite(static_cast<float>(v))) return {};
  std::string text = std::isnan(v)   ? "NaN"
                     : std::isinf(v) ? (v > 0 ? "inf" : "-inf")
                                     : std::to_string(v);
  return makeError(std::string("data.normalization.") + field + " is " + text +
                   ": it must be a finite number" + why);
}

// FIXED per-channel values: one per channel of C × H × W samples.
Status fixedChannels(const proto::Normalization& def, const Dataset& train, Normalizer& n) {
  if (def.channel_mean().empty() && def.channel_std().empty()) return {};
  const int64_t channels = train.sampleShape.size() == 3 ? train.sampleShape[0] : 0;
  for (auto [field, values] :
       {std::pair{"channel_mean", &def.channel_mean()}, {"channel_std", &def.channel_std()}}) {
    if (values->empty() || values->size() == channels) continue;
    return makeError("data.normalization." + std::string(field) + " has " +
                     std::to_string(values->size()) + " values but the samples have " +
                     (channels ? std::to_string(channels) + " channels"
                               : shapeToString(train.sampleShape) + " features, not channels"));
  }
  for (int64_t c = 0; c < channels; ++c) {
    const double mean = def.channel_mean().empty() ? def.mean() : def.channel_mean(int(c));
    const double sd = def.channel_std().empty() ? n.std : def.channel_std(int(c));
    if (Status st = checkFinite("channel_mean", mean); !st) return st;
    if (Status st = checkFinite("channel_std", sd); !st) return st;
    if (!(sd > 0))
      return makeError("data.normalization.channel_std must be positive, got " +
                       std::to_string(sd));
    n.channelMean.push_back(float(mean));
    n.channelStd.push_back(float(sd));
  }
  return {};
}

Result<Normalizer> makeNormalizer(const proto::Normalization& def, const Dataset& train) {
  Normalizer n;
  if (Status st = checkFinite("scale", def.scale()); !st) return st.error();
  if (def.kind() == proto::Normalization::FIXED) {
    if (Status st = checkFinite("mean", def.mean()); !st) return st.error();
    if (Status st = checkFinite("std", def.std()); !st) return st.error();
  }
  const double scale = def.scale() == 0 ? 1.0 : def.scale();
  n.scale = static_cast<float>(scale);
  switch (def.kind()) {
    case proto::Normalization::KIND_UNSPECIFIED: break;
    case proto::Normalization::FIXED:
      if (def.has_std() && !(def.std() > 0)) {
        return makeError("normalization std must be positive, got " + std::to_string(def.std()));
      }
      n.mean = static_cast<float>(def.mean());
      n.std = def.has_std() ? static_cast<float>(def.std()) : 1.0f;  // checked above 0
      if (Status st = fixedChannels(def, train, n); !st) return st.error();
      break;
    case proto::Normalization::STANDARDIZE: {
      const char* why =
          " (STANDARDIZE computed it from the training split, which holds "
          "non-finite or huge values)";
      std::vector<double> means(1), stds(1, 1.0);
      if (train.bytes.empty() && train.files.empty()) {
        featureStats(train, scale, means[0], stds[0]);
      } else {
        // Images: one mean and std per channel, from every training pixel.
        auto hist = data_internal::channelHistograms(train);
        if (!hist) return hist.error();
        means.resize(hist->size());
        stds.resize(hist->size());
        for (size_t c = 0; c < hist->size(); ++c)
          histogramStats((*hist)[c], scale, means[c], stds[c]);
      }
      for (size_t c = 0; c < means.size(); ++c) {
        if (Status st = checkFinite("mean", means[c], why); !st) return st.error();
        if (Status st = checkFinite("std", stds[c], why); !st) return st.error();
        // A constant feature set has nothing to rescale; 1 keeps it finite.
        if (!(stds[c] > 1e-12)) stds[c] = 1.0;
      }
      n.mean = static_cast<float>(means[0]);
      n.std = static_cast<float>(stds[0]);
      if (means.size() > 1) {
        n.channelMean.assign(means.begin(), means.end());
        n.channelStd.assign(stds.begin(), stds.end());
      }
      break;
    }
    default: return makeError("unknown normalization kind " + std::to_string(def.kind()));
  }
  return n;
}

}  // namespace

std::vector<std::string> dataProblems(const proto::DataDef& def, const std::string& baseDir) {
  std::vector<std::string> out;
  auto need = [&](const std::string& field, const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      out.push_back(field + ": " + path +
                    (std::filesystem::exists(path, ec) ? " is not a file" : " does not exist"));
  };
  switch (def.source_case()) {
    case proto::DataDef::kIdx: {
      const proto::IdxSource& s = def.idx();
      need("data.idx.train_images",
           orDefault(s.train_images(), "train-images-idx3-ubyte.gz", baseDir));
      need("data.idx.train_labels",
           orDefault(s.train_labels(), "train-labels-idx1-ubyte.gz", baseDir));
      need("data.idx.test_images",
           orDefault(s.test_images(), "t10k-images-idx3-ubyte.gz", baseDir));
      need("data.idx.test_labels",
           orDefault(s.test_labels(), "t10k-labels-idx1-ubyte.gz", baseDir));
      break;
    }
    case proto::DataDef::kCsv:
      if (def.csv().train_path().empty())
        out.push_back("data.csv.train_path: no file is named");
      else
        need("data.csv.train_path", resolve(def.csv().train_path(), baseDir));
      if (!def.csv().test_path().empty())
        need("data.csv.test_path", resolve(def.csv().test_path(), baseDir));
      break;
    case proto::DataDef::kSynthetic: break;
    case proto::DataDef::kText:
      if (def.text().path().empty()) {
        out.push_back("data.text.path: no file is named");
      } else {  // a file, or a folder of text files
        const std::string path = resolve(def.text().path(), baseDir);
        std::error_code ec;
        if (!std::filesystem::is_directory(path, ec)) need("data.text.path", path);
      }
      if (!def.text().test_path().empty())
        need("data.text.test_path", resolve(def.text().test_path(), baseDir));
      break;
    case proto::DataDef::kImageFolder:
    case proto::DataDef::kImageList: {
      const bool folder = def.has_image_folder();
      const proto::ImageSource& s = folder ? def.image_folder() : def.image_list();
      const std::string field = folder ? "data.image_folder." : "data.image_list.";
      auto check = [&](const char* which, const std::string& path) {
        if (path.empty()) return;
        const std::string full = resolve(path, baseDir), name = field + which;
        std::error_code ec;
        if (!folder) return need(name, full);
        if (!std::filesystem::is_directory(full, ec))
          out.push_back(
              name + ": " + full +
              (std::filesystem::exists(full, ec) ? " is not a folder" : " does not exist"));
      };
      if (s.train().empty())
        out.push_back(field + "train: no " + (folder ? "folder" : "list") + " is named");
      check("train", s.train());
      check("test", s.test());
      check("validation", s.validation());
      break;
    }
    case proto::DataDef::SOURCE_NOT_SET:
      out.push_back(
          "data: the project has no data source: pick a dataset (Data > Choose Dataset…), or "
          "set IDX files, a CSV file, images or a synthetic set under Data");
      break;
  }
  return out;
}

Result<DataSplits> loadData(const proto::DataDef& def, const std::string& baseDir, uint64_t seed,
                            const std::shared_ptr<MemoryBudget>& budgetOrNull) {
  std::shared_ptr<MemoryBudget> budget = budgetOrThisProcess(budgetOrNull);
  const int64_t plannedBefore = budget->planned();
  Result<DataSplits> loaded = makeError("project has no data source");
  switch (def.source_case()) {
    case proto::DataDef::kIdx: loaded = loadIdx(def.idx(), baseDir, budget); break;
    case proto::DataDef::kCsv: loaded = loadCsv(def.csv(), baseDir, seed, budget); break;
    case proto::DataDef::kSynthetic: loaded = loadSynthetic(def.synthetic(), seed, *budget); break;
    case proto::DataDef::kImageFolder:
    case proto::DataDef::kImageList:
      loaded = data_internal::loadImages(def, baseDir, seed, *budget);
      break;
    case proto::DataDef::kText: loaded = data_internal::loadText(def, baseDir, *budget); break;
    case proto::DataDef::SOURCE_NOT_SET: break;
  }
  if (!loaded) return loaded;
  DataSplits& s = *loaded;
  if (def.has_text()) {  // split by position and never normalised
    s.train = takeFirst(s.train, def.train_limit());
    s.test = takeFirst(s.test, def.test_limit());
    budget->release(budget->planned() - plannedBefore);
    if (Status st = budget->reserve("the text", s.train.memoryBytes()); !st) return st.error();
    return loaded;
  }

  if (def.train_limit() < 0 || def.test_limit() < 0) {
    return makeError("train_limit and test_limit must not be negative");
  }
  // Limits and splits copy samples out; each copy is at most its source's size.
  if (Status st = budget->check("data.train_limit", s.train.memoryBytes()); !st) return st.error();
  s.train = takeFirst(s.train, def.train_limit());
  s.test = takeFirst(s.test, def.test_limit());

  const double valFraction = def.validation_fraction();
  if (!(valFraction >= 0 && valFraction < 1)) {
    return makeError("validation_fraction must be in [0, 1), got " + std::to_string(valFraction));
  }
  if (valFraction > 0 && s.val.size() > 0)
    return makeError(
        "data.validation_fraction is set but the images name a validation set of their "
        "own: use one or the other");
  if (valFraction > 0) {
    if (Status st = budget->check("data.validation_fraction", s.train.memoryBytes()); !st)
      return st.error();
    Dataset all = std::move(s.train);
    splitOff(all, valFraction, hashCombine(seed, kValSplitStream), s.train, s.val);
  } else if (s.val.size() == 0) {
    s.val.sampleShape = s.train.sampleShape;
  }

  // Every split reports the same class count, so a model sized from one fits all.
  const int32_t classes = std::max(s.train.classes, s.test.classes);
  s.train.classes = s.val.classes = s.test.classes = classes;

  auto norm = makeNormalizer(def.normalization(), s.train);
  if (!norm) return norm.error();
  s.norm = *norm;

  auto augment = Augmenter::fromProto(def.augmentation());
  if (!augment) return augment.error();
  if (Status st = augment->check(s.train.sampleShape); !st) return st.error();
  s.augment = *augment;
  // What the readers planned becomes what the splits hold, which is no more.
  budget->release(budget->planned() - plannedBefore);
  int64_t held = s.train.memoryBytes() + s.val.memoryBytes() + s.test.memoryBytes();
  if (Status st = budget->reserve("the dataset", held); !st) return st.error();
  return loaded;
}

namespace data_internal {

std::string resolve(const std::string& path, const std::string& baseDir) {
  std::filesystem::path p(path);
  if (baseDir.empty() || p.is_absolute()) return path;
  return (std::filesystem::path(baseDir) / p).string();
}

void splitOff(const Dataset& all, double fraction, uint64_t key, Dataset& keep, Dataset& held) {
  const int64_t n = all.size();
  const auto k = std::clamp<int64_t>(std::llround(n * fraction), 0, n);
  std::vector<int64_t> order = BatchLoader::epochOrder(n, true, key, 0);
  std::vector<int64_t> heldIdx(order.begin(), order.begin() + k);
  std::vector<int64_t> keepIdx(order.begin() + k, order.end());
  std::sort(heldIdx.begin(), heldIdx.end());
  std::sort(keepIdx.begin(), keepIdx.end());
  held = all.subset(heldIdx);
  keep = all.subset(keepIdx);
}

}  // namespace data_internal
}  // namespace netloom
