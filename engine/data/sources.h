// Inside the data folder: what the sources share with loadData. Not an API.
#pragma once

#include <array>
#include <functional>
#include <string>

#include "engine/data/dataset.h"

namespace netloom::data_internal {

// `path` against `baseDir` unless it is absolute.
std::string resolve(const std::string& path, const std::string& baseDir);

// Holds out round(n * fraction) samples chosen by a seeded shuffle. Both parts
// keep the original order, so a later "first N" still means the file's first N.
void splitOff(const Dataset& all, double fraction, uint64_t key, Dataset& keep, Dataset& held);

// A DataDef's image folder or list: every split indexed, limited, checked and, with
// the source's cache, decoded.
Result<DataSplits> loadImages(const proto::DataDef& def, const std::string& baseDir, uint64_t seed,
                              MemoryBudget& budget);

// A DataDef's text source: tokens, vocabulary and the windows of every split, the
// validation part by position.
Result<DataSplits> loadText(const proto::DataDef& def, const std::string& baseDir,
                            MemoryBudget& budget);

// Per channel, how many times each byte value occurs in `data`'s samples (decoding
// its files where it has them); an unreadable image fails unless it may be skipped.
Result<std::vector<std::array<int64_t, 256>>> channelHistograms(const Dataset& data);

// Runs fn(i) for i in [0, n) on up to `threads` threads.
void parallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn);

}  // namespace netloom::data_internal
