// BatchLoader: one epoch of batches in a seeded order, assembled on a prefetch
// thread so the trainer never waits on copying, augmenting and normalising.
#include <algorithm>
#include <array>

#include "engine/data/dataset.h"
#include "kernels/core/rng.h"

namespace netloom {
namespace {

// One sample to normalised floats. Byte data goes through a 256-entry table so the
// inner loop is one load per element.
void normaliseBytes(const uint8_t* row, int64_t f, const std::array<float, 256>& table,
                    float* out) {
  for (int64_t j = 0; j < f; ++j) out[j] = table[row[j]];
}

void normaliseFloats(const float* row, int64_t f, const Normalizer& norm, float* out) {
  const float scale = norm.scale, mean = norm.mean, invStd = 1.0f / norm.std;
  for (int64_t j = 0; j < f; ++j) out[j] = (row[j] * scale - mean) * invStd;
}

}  // namespace

std::vector<int64_t> BatchLoader::epochOrder(int64_t n, bool shuffle, uint64_t seed,
                                             int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (!shuffle) return order;
  Rng rng(hashCombine(seed, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

BatchLoader::BatchLoader(const Dataset& data, const Normalizer& norm, Options opts)
    : m_data(data), m_norm(norm), m_opts(opts) {
  m_opts.batchSize = std::max<int64_t>(m_opts.batchSize, 1);
  m_opts.prefetch = std::max(m_opts.prefetch, 1);
  m_opts.skipBatches = std::max<int64_t>(m_opts.skipBatches, 0);
  // loadData never yields a zero std; a hand-made Normalizer must not turn into inf.
  if (!(m_norm.std > 0.0f)) m_norm.std = 1.0f;
  m_status = m_opts.augment.check(m_data.sampleShape);
  // A loader that cannot apply its options has an empty epoch rather than a wrong one.
  if (m_status.ok()) {
    m_order = epochOrder(m_data.size(), m_opts.shuffle, m_opts.seed, m_opts.epoch);
    const int64_t n = int64_t(m_order.size()), ranks = std::max(m_opts.ranks, 1);
    const int64_t global = m_opts.batchSize * ranks;
    int64_t at = m_opts.skipSamples >= 0 ? m_opts.skipSamples : m_opts.skipBatches * global;
    for (; at < n; at += global) {
      int64_t size = std::min(global, n - at);
      if (size < ranks && m_opts.dropShort) break;
      int64_t share = size / ranks, extra = size % ranks, r = m_opts.rank;
      int64_t count = share + (r < extra ? 1 : 0);
      if (count > 0) m_batches.push_back({at + r * share + std::min(r, extra), count, size});
    }
  }
  m_thread = std::thread([this] { produce(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

int64_t BatchLoader::batchesPerEpoch() const {
  return steps(int64_t(m_order.size()), m_opts.batchSize, m_opts.ranks, m_opts.dropShort);
}

int64_t BatchLoader::steps(int64_t n, int64_t batch, int ranks, bool dropShort) {
  ranks = std::max(ranks, 1);
  const int64_t global = std::max<int64_t>(batch, 1) * ranks, left = n % global;
  return n / global + (left > 0 && (left >= ranks || !dropShort) ? 1 : 0);
}

bool BatchLoader::next(Batch& out) {
  std::unique_lock lock(m_mutex);
  m_cv.wait(lock, [this] { return !m_ready.empty() || m_done; });
  if (m_ready.empty()) return false;
  out = std::move(m_ready.front());
  m_ready.pop_front();
  lock.unlock();
  m_cv.notify_all();
  return true;
}

void BatchLoader::produce() {
  const int64_t f = m_data.featuresPerSample();
  const bool isBytes = !m_data.bytes.empty();
  const bool isFloats = !isBytes && !m_data.floats.empty();
  // Augmentation works on raw values, as torchvision pads before normalising: each
  // sample is augmented into a scratch row, then normalised from there.
  const Augmenter& augment = m_opts.augment;
  const bool augmenting = augment.enabled();
  std::vector<uint8_t> byteScratch(augmenting && isBytes ? f : 0);
  std::vector<float> floatScratch(augmenting && isFloats ? f : 0);
  std::array<float, 256> table{};
  if (isBytes) {
    const float invStd = 1.0f / m_norm.std;
    for (int v = 0; v < 256; ++v) {
      table[v] = (static_cast<float>(v) * m_norm.scale - m_norm.mean) * invStd;
    }
  }

  for (const Range& range : m_batches) {
    {
      std::unique_lock lock(m_mutex);
      m_cv.wait(lock, [this] {
        return m_stop || static_cast<int64_t>(m_ready.size()) < m_opts.prefetch;
      });
      if (m_stop) return;
    }
    const int64_t count = range.count;
    const int64_t* idx = m_order.data() + range.start;
    Batch out;
    out.size = count;
    out.globalSize = range.global;
    out.x.resize(count * f);
    out.labels.resize(count);
    out.labelFloats.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t sample = idx[i];
      float* dst = out.x.data() + i * f;
      const uint64_t key = augmenting ? Augmenter::sampleKey(m_opts.seed, m_opts.epoch, sample) : 0;
      if (isBytes) {
        const uint8_t* row = m_data.bytes.data() + sample * f;
        if (augmenting) {
          augment.apply(row, byteScratch.data(), m_data.sampleShape, key);
          row = byteScratch.data();
        }
        normaliseBytes(row, f, table, dst);
      } else if (isFloats) {
        const float* row = m_data.floats.data() + sample * f;
        if (augmenting) {
          augment.apply(row, floatScratch.data(), m_data.sampleShape, key);
          row = floatScratch.data();
        }
        normaliseFloats(row, f, m_norm, dst);
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      out.labels[i] = m_data.labels[idx[i]];
      out.labelFloats[i] =
          m_data.targets.empty() ? static_cast<float>(out.labels[i]) : m_data.targets[idx[i]];
    }
    {
      std::lock_guard lock(m_mutex);
      m_ready.push_back(std::move(out));
    }
    m_cv.notify_all();
  }
  {
    std::lock_guard lock(m_mutex);
    m_done = true;
  }
  m_cv.notify_all();
}

}  // namespace netloom
