// Image datasets: folders of class folders and CSV lists of path,label. Indexing opens
// no image; the images are checked (headers only) before the run starts, decoded
// once when cached, else on the loader's threads as batches are assembled.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "engine/data/sources.h"
#include "kernels/core/checked.h"
#include "kernels/core/rng.h"

namespace netloom {
namespace fs = std::filesystem;
using data_internal::resolve;

namespace {

constexpr uint64_t kImageTestSplitStream = 0x13A6E;
constexpr uint64_t kImageTrainLimitStream = 0x11A17;
constexpr uint64_t kImageTestLimitStream = 0x7E511A;
constexpr int kMaxDecodeThreads = 4;

std::string inQuotes(const std::string& s) {
  return "'" + s + "'";
}

int autoThreads() {
  return int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, kMaxDecodeThreads));
}

// "a, b and 3 more" for messages about many files.
std::string someOf(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 3);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + inQuotes(names[i]);
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

// One CSV line as (path, label): a path may be double-quoted (with "" for a quote),
// else the label is what follows the last comma.
bool splitListLine(const std::string& line, std::string& path, std::string& label) {
  if (!line.empty() && line[0] == '"') {
    path.clear();
    size_t i = 1;
    for (; i < line.size(); ++i) {
      if (line[i] == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        path += '"';
        ++i;
      } else if (line[i] == '"') {
        break;
      } else {
        path += line[i];
      }
    }
    const auto comma = line.find(',', i);
    if (i >= line.size() || comma == std::string::npos) return false;
    label = trim(line.substr(comma + 1));
    return true;
  }
  const auto comma = line.rfind(',');
  if (comma == std::string::npos) return false;
  path = trim(line.substr(0, comma));
  label = trim(line.substr(comma + 1));
  return true;
}

bool isIndex(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), ::isdigit);
}

Dataset datasetOf(const ImageIndex& index, const ImageSpec& spec, const proto::ImageSource& src,
                  const std::string& listFile) {
  Dataset d;
  d.sampleShape = {spec.channels, spec.height, spec.width};
  d.files = index.paths;
  d.labels = index.labels;
  d.image = spec;
  d.skipUnreadable = src.skip_unreadable();
  d.decodeThreads = src.decode_threads() > 0 ? src.decode_threads() : autoThreads();
  d.classes = int32_t(index.perClass.size());
  if (!listFile.empty()) {
    d.labelFile = listFile;
    d.origins = index.lines;
    d.originsAreLines = true;
  }
  return d;
}

// Keeps the samples whose `keep` flag is set.
void keepOnly(Dataset& d, const std::vector<char>& keep) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < d.size(); ++i)
    if (keep[i]) idx.push_back(i);
  d = d.subset(idx);
}

// Reads every image's header (or, with `decodeAll`, decodes it into d.bytes): the
// first unreadable one fails, naming it, unless the set may skip them.
Status checkImages(Dataset& d, const std::string& what, bool decodeAll, MemoryBudget& budget,
                   std::vector<std::string>& warnings) {
  const int64_t n = d.size(), f = d.featuresPerSample();
  if (decodeAll) {
    if (Status st = budget.reserve("the decoded " + what + " images (cache)", saturatingMul(n, f));
        !st)
      return st;
    d.bytes.resize(size_t(n * f));
  }
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::atomic<bool> stop{false};
  data_internal::parallelFor(n, d.decodeThreads, [&](int64_t i) {
    if (stop && !d.skipUnreadable) return;
    std::string why;
    int w = 0, h = 0, c = 0;
    const bool ok = decodeAll ? decodeImage(d.files[i], d.image, d.bytes.data() + i * f, why)
                              : probeImage(d.files[i], w, h, c, why);
    if (!ok) {
      errors[i] = inQuotes(d.files[i]) + " " + why;
      stop = true;
    }
  });
  std::vector<char> keep(static_cast<size_t>(n), 1);
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i)
    if (!errors[i].empty()) {
      if (!d.skipUnreadable) {
        return makeError(what + " image " + errors[i] +
                         " (set skip_unreadable to skip such images)");
      }
      if (bad++ == 0) first = errors[i];
      keep[i] = 0;
    }
  if (bad > 0) {
    warnings.push_back("skipped " + std::to_string(bad) + " unreadable " + what +
                       " image(s), the first " + first);
    keepOnly(d, keep);
  }
  if (d.size() == 0) return makeError("no " + what + " image can be read");
  if (decodeAll) d.files.clear();
  return {};
}

// Counts a listing's entries for its ListControl; without one it costs a null check.
class EntryCounter {
 public:
  explicit EntryCounter(ListControl* control) : m_control(control) {}
  // Once per directory entry or list line: true when the listing must stop.
  bool stop() {
    if (!m_control) return false;
    if (m_control->onEntry) m_control->onEntry(++m_entries);
    return m_control->cancelled.load(std::memory_order_relaxed);
  }

 private:
  ListControl* m_control;
  size_t m_entries = 0;
};

Error cancelledListing(const std::string& path) {
  return makeError(inQuotes(path) + ": listing cancelled");
}

// `dir`'s folders (the classes) and its other entries (left out).
Status listTopFolder(const std::string& dir, std::vector<std::string>& folders,
                     std::vector<std::string>& loose, EntryCounter& entries) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (entries.stop()) return cancelledListing(dir);
    if (it->is_directory(ec))
      folders.push_back(it->path().filename().string());
    else
      loose.push_back(it->path().filename().string());
  }
  if (ec) return makeError(inQuotes(dir) + " cannot be listed: " + ec.message());
  return {};
}

// Every file under `classDir` (folder links followed), images apart from the rest.
Status listClassFolder(const fs::path& classDir, std::vector<std::string>& images,
                       std::vector<std::string>& others, EntryCounter& entries) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(classDir,
                                           fs::directory_options::follow_directory_symlink |
                                               fs::directory_options::skip_permission_denied,
                                           ec),
       end;
       !ec && it != end; it.increment(ec)) {
    if (entries.stop()) return cancelledListing(classDir.string());
    if (it->is_directory(ec)) continue;
    std::string path = it->path().string();
    (isImageFile(path) ? images : others).push_back(std::move(path));
  }
  if (ec) return makeError(inQuotes(classDir.string()) + " cannot be listed: " + ec.message());
  return {};
}

// Adds one class folder's sorted images to `index`, with warnings for what is odd there.
void addClass(ImageIndex& index, size_t label, const fs::path& classDir,
              std::vector<std::string>& images, std::vector<std::string>& others) {
  std::sort(images.begin(), images.end());
  if (!others.empty()) {
    std::sort(others.begin(), others.end());
    for (std::string& o : others) o = fs::path(o).filename().string();
    index.warnings.push_back(inQuotes(classDir.string()) + " holds " +
                             std::to_string(others.size()) +
                             " file(s) that are not PNG or JPEG, left out: " + someOf(others));
  }
  if (images.empty())
    index.warnings.push_back("class folder " + inQuotes(classDir.string()) + " holds no images");
  index.perClass[label] = int64_t(images.size());
  for (std::string& p : images) {
    index.paths.push_back(std::move(p));
    index.labels.push_back(int32_t(label));
  }
}

}  // namespace

Result<ImageIndex> listImageFolder(const std::string& dir,
                                   const std::vector<std::string>* classNames,
                                   ListControl* control) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return makeError(inQuotes(dir) +
                     (fs::exists(dir, ec) ? " is not a folder" : " does not exist"));
  EntryCounter entries(control);
  ImageIndex index;
  std::vector<std::string> folders, loose;
  if (Status st = listTopFolder(dir, folders, loose, entries); !st) return st.error();
  std::sort(folders.begin(), folders.end());
  std::sort(loose.begin(), loose.end());
  if (folders.empty())
    return makeError(inQuotes(dir) +
                     " holds no class folders: an image folder holds one folder per class, "
                     "each holding that class's images");
  if (!loose.empty())
    index.warnings.push_back(inQuotes(dir) + " holds " + std::to_string(loose.size()) +
                             " file(s) outside the class folders, left out: " + someOf(loose));
  if (classNames) {
    for (const std::string& f : folders)
      if (std::find(classNames->begin(), classNames->end(), f) == classNames->end())
        return makeError(inQuotes((fs::path(dir) / f).string()) +
                         " is a class the training images do not have");
    index.classNames = *classNames;
  } else {
    index.classNames = folders;
  }
  index.perClass.assign(index.classNames.size(), 0);
  for (size_t label = 0; label < index.classNames.size(); ++label) {
    const fs::path classDir = fs::path(dir) / index.classNames[label];
    if (!fs::is_directory(classDir, ec)) continue;  // a class the test folder lacks
    std::vector<std::string> images, others;
    if (Status st = listClassFolder(classDir, images, others, entries); !st) return st.error();
    addClass(index, label, classDir, images, others);
  }
  if (index.paths.empty()) return makeError(inQuotes(dir) + " holds no PNG or JPEG images");
  return index;
}

Result<ImageIndex> readImageList(const std::string& csvPath, bool hasHeader,
                                 const std::vector<std::string>* classNames, ListControl* control) {
  std::ifstream in(csvPath, std::ios::binary);
  if (!in) {
    std::error_code ec;
    return makeError(inQuotes(csvPath) +
                     (fs::exists(csvPath, ec) ? " cannot be read" : " does not exist"));
  }
  const fs::path base = fs::path(csvPath).parent_path();
  ImageIndex index;
  std::vector<std::string> labels, others;
  std::string line, path, label;
  EntryCounter entries(control);
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (entries.stop()) return cancelledListing(csvPath);
    if (hasHeader && number == 1) continue;
    if (trim(line).empty()) continue;
    if (!splitListLine(line, path, label) || path.empty() || label.empty())
      return makeError(inQuotes(csvPath) + " line " + std::to_string(number) +
                       ": expected an image path, a comma and a label");
    fs::path p(path);
    if (p.is_relative()) p = base / p;
    if (!isImageFile(path)) {
      others.push_back(path);
      continue;
    }
    index.paths.push_back(p.lexically_normal().string());
    index.lines.push_back(number);
    labels.push_back(label);
  }
  if (!others.empty())
    index.warnings.push_back(inQuotes(csvPath) + " lists " + std::to_string(others.size()) +
                             " file(s) that are not PNG or JPEG, left out: " + someOf(others));
  if (index.paths.empty()) return makeError(inQuotes(csvPath) + " lists no PNG or JPEG images");
  const bool indices = std::all_of(labels.begin(), labels.end(), isIndex);
  if (indices && !classNames) {
    int32_t classes = 0;
    for (const std::string& l : labels) classes = std::max(classes, int32_t(std::stoi(l)) + 1);
    for (int32_t c = 0; c < classes; ++c) index.classNames.push_back(std::to_string(c));
  } else if (classNames) {
    index.classNames = *classNames;
  } else {
    std::set<std::string> names(labels.begin(), labels.end());
    index.classNames.assign(names.begin(), names.end());
  }
  index.perClass.assign(index.classNames.size(), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    int32_t c = -1;
    auto at = std::find(index.classNames.begin(), index.classNames.end(), labels[i]);
    if (at != index.classNames.end())
      c = int32_t(at - index.classNames.begin());
    else if (indices && std::stoll(labels[i]) < int64_t(index.classNames.size()))
      c = int32_t(std::stoi(labels[i]));
    if (c < 0)
      return makeError(inQuotes(csvPath) + " line " + std::to_string(index.lines[i]) + ": class " +
                       inQuotes(labels[i]) + " is not one the training images have");
    index.labels.push_back(c);
    ++index.perClass[size_t(c)];
  }
  return index;
}

void resolveImageShape(proto::DataDef& def, const proto::ModelDef& model) {
  if (def.has_text() && def.text().context() <= 0) {
    // A text source's context: the length of the model's first int32 sequence Input.
    for (const proto::NodeDef& n : model.nodes()) {
      if (n.op() != "Input" || !n.attrs().count("shape") || !n.attrs().count("dtype") ||
          n.attrs().at("dtype").s() != "int32" || n.attrs().count("field"))
        continue;
      const auto& dims = n.attrs().at("shape").ints().values();
      if (dims.size() == 1) def.mutable_text()->set_context(int32_t(dims[0]));
      return;
    }
    return;
  }
  proto::ImageSource* src = def.has_image_folder() ? def.mutable_image_folder()
                            : def.has_image_list() ? def.mutable_image_list()
                                                   : nullptr;
  if (!src || (src->channels() > 0 && src->height() > 0 && src->width() > 0)) return;
  for (const proto::NodeDef& n : model.nodes()) {
    if (n.op() != "Input" || !n.attrs().count("shape")) continue;
    const auto& dims = n.attrs().at("shape").ints().values();
    if (dims.size() != 3) continue;
    if (src->channels() <= 0) src->set_channels(int32_t(dims[0]));
    if (src->height() <= 0) src->set_height(int32_t(dims[1]));
    if (src->width() <= 0) src->set_width(int32_t(dims[2]));
    return;
  }
}

namespace data_internal {

void parallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
  threads = int(std::clamp<int64_t>(threads, 1, std::max<int64_t>(n, 1)));
  std::atomic<int64_t> next{0};
  auto run = [&] {
    for (int64_t i; (i = next++) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (std::thread& t : pool) t.join();
}

Result<std::vector<std::array<int64_t, 256>>> channelHistograms(const Dataset& data) {
  const int64_t channels = data.sampleShape.size() == 3 ? data.sampleShape[0] : 1;
  const int64_t f = data.featuresPerSample(), plane = f / std::max<int64_t>(channels, 1);
  std::vector<std::array<int64_t, 256>> total(size_t(channels), std::array<int64_t, 256>{});
  if (data.files.empty()) {
    for (int64_t i = 0; i < int64_t(data.bytes.size()); ++i)
      ++total[size_t((i % f) / plane)][data.bytes[size_t(i)]];
    return total;
  }
  std::mutex mutex;
  std::string error;
  data_internal::parallelFor(data.size(), data.decodeThreads, [&](int64_t i) {
    std::vector<uint8_t> pixels(static_cast<size_t>(f));
    std::string why;
    if (!decodeImage(data.files[i], data.image, pixels.data(), why)) {
      std::lock_guard lock(mutex);
      if (error.empty() && !data.skipUnreadable) error = inQuotes(data.files[i]) + " " + why;
      return;
    }
    std::vector<std::array<int64_t, 256>> mine(size_t(channels), std::array<int64_t, 256>{});
    for (int64_t j = 0; j < f; ++j) ++mine[size_t(j / plane)][pixels[size_t(j)]];
    std::lock_guard lock(mutex);
    for (int64_t c = 0; c < channels; ++c)
      for (int v = 0; v < 256; ++v) total[size_t(c)][v] += mine[size_t(c)][v];
  });
  if (!error.empty()) return makeError("training image " + error);
  return total;
}

Result<DataSplits> loadImages(const proto::DataDef& def, const std::string& baseDir, uint64_t seed,
                              MemoryBudget& budget) {
  const bool folder = def.has_image_folder();
  const proto::ImageSource& src = folder ? def.image_folder() : def.image_list();
  const std::string field = folder ? "data.image_folder" : "data.image_list";
  ImageSpec spec{src.channels(), src.height(), src.width(),
                 src.fit() == proto::ImageSource::CENTER_CROP ? proto::ImageSource::CENTER_CROP
                                                              : proto::ImageSource::RESIZE};
  if (!spec.valid())
    return makeError(field + ": images become " + std::to_string(spec.channels) + " × " +
                     std::to_string(spec.height) + " × " + std::to_string(spec.width) +
                     ": set channels (1 or 3), height and width, or give the model an Input "
                     "of shape channels × height × width");
  if (src.train().empty())
    return makeError(field + ".train: no " + (folder ? "folder" : "list") + " is named");
  auto index = [&](const std::string& which, const std::string& path,
                   const std::vector<std::string>* classes) -> Result<ImageIndex> {
    auto r = folder ? listImageFolder(resolve(path, baseDir), classes)
                    : readImageList(resolve(path, baseDir), src.has_header(), classes);
    if (!r) return makeError(field + "." + which + ": " + r.error().message);
    return r;
  };
  auto train = index("train", src.train(), nullptr);
  if (!train) return train.error();
  DataSplits s;
  s.classNames = train->classNames;
  s.warnings = train->warnings;
  const std::string listFile = folder ? "" : resolve(src.train(), baseDir);
  s.train = datasetOf(*train, spec, src, listFile);
  if (!src.test().empty()) {
    auto test = index("test", src.test(), &s.classNames);
    if (!test) return test.error();
    s.warnings.insert(s.warnings.end(), test->warnings.begin(), test->warnings.end());
    s.test = datasetOf(*test, spec, src, folder ? "" : resolve(src.test(), baseDir));
  } else {
    const double fraction = src.test_fraction() == 0 ? 0.2 : src.test_fraction();
    if (!(fraction > 0 && fraction < 1))
      return makeError(field + ".test_fraction must be between 0 and 1, got " +
                       std::to_string(src.test_fraction()));
    Dataset all = std::move(s.train);
    data_internal::splitOff(all, fraction, hashCombine(seed, kImageTestSplitStream), s.train,
                            s.test);
  }
  if (!src.validation().empty()) {
    auto val = index("validation", src.validation(), &s.classNames);
    if (!val) return val.error();
    s.warnings.insert(s.warnings.end(), val->warnings.begin(), val->warnings.end());
    s.val = datasetOf(*val, spec, src, folder ? "" : resolve(src.validation(), baseDir));
  }
  // A folder lists its images class by class, so the first N would be the first
  // classes: a limit takes N samples spread by a seeded draw (kept in listing order).
  // Only those are checked.
  auto limit = [&](Dataset& d, int64_t n, uint64_t stream) {
    if (n <= 0 || n >= d.size()) return;
    std::vector<int64_t> order =
        BatchLoader::epochOrder(d.size(), true, hashCombine(seed, stream), 0);
    order.resize(size_t(n));
    std::sort(order.begin(), order.end());
    d = d.subset(order);
  };
  limit(s.train, def.train_limit(), kImageTrainLimitStream);
  limit(s.test, def.test_limit(), kImageTestLimitStream);
  for (auto [d, what] :
       {std::pair{&s.train, "training"}, {&s.val, "validation"}, {&s.test, "test"}}) {
    if (d->size() == 0) continue;
    if (Status st = checkImages(*d, what, src.cache(), budget, s.warnings); !st)
      return makeError(field + ": " + st.message());
  }
  return s;
}

}  // namespace data_internal
}  // namespace netloom
