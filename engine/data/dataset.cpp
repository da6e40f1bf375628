// Dataset helpers shared by every source.
#include "engine/data/dataset.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <sstream>

namespace netloom {

int64_t Dataset::memoryBytes() const {
  int64_t paths = 0;
  for (const std::string& f : files) paths += int64_t(sizeof f + f.capacity());
  const int64_t text = tokens ? int64_t(tokens->size() * 4 + starts.size() * 8) : 0;
  return int64_t(bytes.size() + (floats.size() + labels.size() + targets.size()) * 4) + paths +
         text;
}

Dataset Dataset::subset(const std::vector<int64_t>& indices) const {
  Dataset out;
  out.sampleShape = sampleShape;
  out.classes = classes;
  const int64_t f = featuresPerSample();
  const auto n = static_cast<int64_t>(indices.size());
  out.labels.resize(n);
  if (!targets.empty()) out.targets.resize(n);
  out.labelFile = labelFile;
  out.originsAreLines = originsAreLines;
  out.image = image;
  out.skipUnreadable = skipUnreadable;
  out.decodeThreads = decodeThreads;
  out.tokens = tokens;
  out.context = context;
  out.vocab = vocab;
  out.textFile = textFile;
  out.textEnd = textEnd;
  if (isText()) {
    out.labels.clear();
    for (int64_t i : indices) out.starts.push_back(starts[size_t(i)]);
    return out;
  }
  if (!origins.empty()) out.origins.resize(n);
  if (!files.empty()) out.files.resize(n);
  if (!bytes.empty()) out.bytes.resize(n * f);
  if (!floats.empty()) out.floats.resize(n * f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = indices[i];
    assert(src >= 0 && src < size());
    out.labels[i] = labels[src];
    if (!targets.empty()) out.targets[i] = targets[src];
    if (!origins.empty()) out.origins[i] = origins[src];
    if (!files.empty()) out.files[i] = files[src];
    if (!bytes.empty()) std::memcpy(&out.bytes[i * f], &bytes[src * f], f);
    if (!floats.empty()) std::memcpy(&out.floats[i * f], &floats[src * f], f * sizeof(float));
  }
  return out;
}

Status checkClassLabels(const Dataset& data, int32_t classes, const std::string& split) {
  for (int64_t i = 0; i < data.size(); ++i) {
    const double raw = data.targets.empty() ? double(data.labels[i]) : double(data.targets[i]);
    if (raw >= 0 && raw < classes && raw == std::floor(raw)) continue;
    std::string where;
    if (!data.labelFile.empty() && size_t(i) < data.origins.size())
      where = "'" + data.labelFile + "' " + (data.originsAreLines ? "line " : "record ") +
              std::to_string(data.origins[i]);
    else
      where = "the " + split + " set's sample " + std::to_string(i + 1);
    std::ostringstream value;
    value.precision(9);
    value << raw;
    return makeError(where + ": label " + value.str() +
                     " is not a class index; labels must be whole numbers from 0 to " +
                     std::to_string(classes - 1) + " (the model has " + std::to_string(classes) +
                     " classes)");
  }
  return {};
}

}  // namespace netloom
