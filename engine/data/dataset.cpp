// Dataset helpers shared by every source.
#include "engine/data/dataset.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace netloom {

int64_t Dataset::memoryBytes() const {
  return int64_t(bytes.size() + (floats.size() + labels.size() + targets.size()) * 4);
}

Dataset Dataset::subset(const std::vector<int64_t>& indices) const {
  Dataset out;
  out.sampleShape = sampleShape;
  out.classes = classes;
  const int64_t f = featuresPerSample();
  const auto n = static_cast<int64_t>(indices.size());
  out.labels.resize(n);
  if (!targets.empty()) out.targets.resize(n);
  if (!bytes.empty()) out.bytes.resize(n * f);
  if (!floats.empty()) out.floats.resize(n * f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = indices[i];
    assert(src >= 0 && src < size());
    out.labels[i] = labels[src];
    if (!targets.empty()) out.targets[i] = targets[src];
    if (!bytes.empty()) std::memcpy(&out.bytes[i * f], &bytes[src * f], f);
    if (!floats.empty()) std::memcpy(&out.floats[i * f], &floats[src * f], f * sizeof(float));
  }
  return out;
}

}  // namespace netloom
