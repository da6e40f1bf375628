// Shared helpers for the data-pipeline tests: writing IDX files, small datasets.
#pragma once

#include <zlib.h>

#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "engine/data/dataset.h"

namespace datafixture {

using namespace netloom;

inline void putBe32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}

inline std::string idxBytes(uint32_t magic, const std::vector<uint32_t>& dims,
                            const std::vector<uint8_t>& payload) {
  std::string out;
  putBe32(out, magic);
  for (uint32_t d : dims) putBe32(out, d);
  out.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return out;
}

inline void writeFile(const QString& path, const std::string& content, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.toLocal8Bit().constData(), "wb");
    QVERIFY(f);
    QCOMPARE(gzwrite(f, content.data(), static_cast<unsigned>(content.size())),
             static_cast<int>(content.size()));
    QCOMPARE(gzclose(f), Z_OK);
  } else {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(content.data(), content.size()), qint64(content.size()));
  }
}

inline std::string str(const QString& s) {
  return s.toStdString();
}

// A float dataset whose single feature is the sample's index: easy to trace through a loader.
inline Dataset indexDataset(int64_t n, int classes) {
  Dataset ds;
  ds.sampleShape = {1};
  ds.classes = classes;
  for (int64_t i = 0; i < n; ++i) {
    ds.floats.push_back(static_cast<float>(i));
    ds.labels.push_back(static_cast<int32_t>(i % classes));
  }
  return ds;
}

inline std::map<int32_t, int> labelCounts(const Dataset& ds) {
  std::map<int32_t, int> counts;
  for (int32_t l : ds.labels) ++counts[l];
  return counts;
}

// A byte image dataset of C×H×W samples whose pixels are all nonzero and distinct within
// a sample, so a shift can be read back from an augmented copy.
inline Dataset imageDataset(int64_t n, int64_t c, int64_t h, int64_t w) {
  Dataset ds;
  ds.sampleShape = {c, h, w};
  ds.classes = 3;
  const int64_t f = c * h * w;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) ds.bytes.push_back(static_cast<uint8_t>(1 + (j + i) % 250));
    ds.labels.push_back(static_cast<int32_t>(i % 3));
  }
  return ds;
}

// The shift (dy, dx) with out[y][x] = in[y + dy][x + dx] inside and 0 outside, or nullopt.
std::optional<std::pair<int64_t, int64_t>> shiftOf(const std::vector<float>& in,
                                                   const std::vector<float>& out, int64_t c,
                                                   int64_t h, int64_t w, int64_t maxShift) {
  for (int64_t dy = -maxShift; dy <= maxShift; ++dy) {
    for (int64_t dx = -maxShift; dx <= maxShift; ++dx) {
      bool match = true;
      for (int64_t ch = 0; ch < c && match; ++ch) {
        for (int64_t y = 0; y < h && match; ++y) {
          for (int64_t x = 0; x < w && match; ++x) {
            const int64_t sy = y + dy, sx = x + dx;
            const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
            const float expected = inside ? in[(ch * h + sy) * w + sx] : 0.0f;
            match = out[(ch * h + y) * w + x] == expected;
          }
        }
      }
      if (match) return std::pair{dy, dx};
    }
  }
  return std::nullopt;
}

// Every batch of one epoch, concatenated.
inline std::vector<float> epochFeatures(const Dataset& ds, const BatchLoader::Options& opts) {
  BatchLoader loader(ds, Normalizer{}, opts);
  std::vector<float> all;
  Batch b;
  while (loader.next(b)) all.insert(all.end(), b.x.begin(), b.x.end());
  return all;
}

}  // namespace datafixture
