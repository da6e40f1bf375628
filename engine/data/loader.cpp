// BatchLoader: one epoch of batches in a seeded order, assembled on a prefetch
// thread so the trainer never waits on copying, augmenting and normalising, or, where
// the trainer's kernels take every core, by the trainer's own threads (onCaller).
#include <omp.h>

#include <algorithm>

#include "engine/data/dataset.h"
#include "kernels/core/rng.h"

namespace netloom {
namespace {

// Samples whose image cannot be read are replaced by the next readable one, up to
// this many tries, so a batch keeps its size and every rank its step count.
constexpr int kSubstituteTries = 64;

}  // namespace

// Turns samples into a batch's normalised rows: decodes, augments, then normalises.
// One per worker thread, with its own scratch rows.
class BatchLoader::Assembler {
 public:
  explicit Assembler(BatchLoader& l) : m_l(l) {
    const Dataset& d = l.m_data;
    m_f = d.featuresPerSample();
    m_files = !d.files.empty();
    m_bytes = m_files || !d.bytes.empty();
    m_floats = !m_bytes && !d.floats.empty();
    const bool augmenting = l.m_opts.augment.enabled();
    m_byteScratch.resize(augmenting && m_bytes ? m_f : 0);
    m_floatScratch.resize(augmenting && m_floats ? m_f : 0);
    m_decoded.resize(m_files ? m_f : 0);
    // Each channel's mean and 1/std (or one pair for all), applied plane by plane.
    const Normalizer& n = l.m_norm;
    const int64_t channels = n.channelMean.empty() ? 1 : int64_t(n.channelMean.size());
    m_plane = n.channelMean.empty() || d.sampleShape.size() != 3 ? m_f : m_f / channels;
    m_scale = n.scale;
    for (int64_t c = 0; c < channels; ++c)
      m_channels.push_back({n.channelMean.empty() ? n.mean : n.channelMean[c],
                            1.0f / (n.channelMean.empty() ? n.std : n.channelStd[c])});
  }

  // Fills `out` with the samples of `range`; false with `error` set when an image
  // cannot be read (and may not be skipped).
  bool assemble(const Range& range, Batch& out, std::string& error) {
    if (m_l.m_data.isText()) {
      assembleText(range, out);
      return true;
    }
    shape(range, out);
    return fill(range, out, 0, range.count, error);
  }

  // Sizes `out` for the samples (not text windows) of `range`.
  void shape(const Range& range, Batch& out) {
    out.size = range.count;
    out.globalSize = range.global;
    out.x.resize(range.count * m_f);
    out.labels.resize(range.count);
    out.labelFloats.resize(range.count);
  }

  // Samples [lo, hi) of `range` into `out`, sized by shape().
  bool fill(const Range& range, Batch& out, int64_t lo, int64_t hi, std::string& error) {
    const Dataset& d = m_l.m_data;
    const int64_t* idx = m_l.m_order.data() + range.start;
    const Augmenter& augment = m_l.m_opts.augment;
    for (int64_t i = lo; i < hi; ++i) {
      int64_t sample = idx[i];
      if (i + 1 < hi && !m_files && m_bytes)  // the next row's lines on their way
        for (int64_t at = 0; at < m_f; at += 64)
          __builtin_prefetch(d.bytes.data() + idx[i + 1] * m_f + at);
      float* dst = out.x.data() + i * m_f;
      const uint64_t key =
          augment.enabled() ? Augmenter::sampleKey(m_l.m_opts.seed, m_l.m_opts.epoch, sample) : 0;
      if (m_bytes) {
        const uint8_t* row = nullptr;
        if (m_files) {
          if (!decode(sample, error)) return false;
          row = m_decoded.data();
        } else {
          row = d.bytes.data() + sample * m_f;
        }
        if (augment.enabled()) {
          augment.apply(row, m_byteScratch.data(), d.sampleShape, key);
          row = m_byteScratch.data();
        }
        // Plane by plane, each with its channel's pair: 16 bytes to one vector of
        // floats at a time (a 256-entry table took a gather, or a load, per byte).
        for (int64_t at = 0, c = 0; at < m_f; at += m_plane, ++c) {
          const float scale = m_scale, mean = m_channels[size_t(c)].mean,
                      invStd = m_channels[size_t(c)].invStd;
#pragma omp simd
          for (int64_t j = at; j < at + m_plane; ++j)
            dst[j] = (float(row[j]) * scale - mean) * invStd;
        }
      } else if (m_floats) {
        const float* row = d.floats.data() + sample * m_f;
        if (augment.enabled()) {
          augment.apply(row, m_floatScratch.data(), d.sampleShape, key);
          row = m_floatScratch.data();
        }
        const Normalizer& n = m_l.m_norm;
        const float scale = n.scale, mean = n.mean, invStd = 1.0f / n.std;
        for (int64_t j = 0; j < m_f; ++j) dst[j] = (row[j] * scale - mean) * invStd;
      }
      out.labels[i] = d.labels[sample];
      out.labelFloats[i] = d.targets.empty() ? float(out.labels[i]) : d.targets[sample];
    }
    return true;
  }

 private:
  // Windows of token ids and, as labels, the same windows one token on. Training
  // windows start at an offset drawn for the epoch, so an epoch's windows are not
  // always cut at the same places; none reads past its split's end.
  void assembleText(const Range& range, Batch& out) {
    const Dataset& d = m_l.m_data;
    const BatchLoader::Options& o = m_l.m_opts;
    const int64_t t = d.context, count = range.count;
    const int64_t* idx = m_l.m_order.data() + range.start;
    const int32_t* tok = d.tokens->data();
    const int64_t shift =
        o.shuffle ? int64_t(hashCombine(o.seed, uint64_t(o.epoch)) % uint64_t(t)) : 0;
    out.size = count;
    out.globalSize = range.global;
    out.x.resize(size_t(count * t));
    out.ids.resize(size_t(count * t));
    out.labels.resize(size_t(count * t));
    out.labelFloats.resize(size_t(count * t));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t start = std::min(d.starts[size_t(idx[i])] + shift, d.textEnd - t - 1);
      for (int64_t j = 0; j < t; ++j) {
        const size_t at = size_t(i * t + j);
        out.ids[at] = tok[start + j];
        out.x[at] = float(tok[start + j]);
        out.labels[at] = tok[start + j + 1];
        out.labelFloats[at] = float(tok[start + j + 1]);
      }
    }
  }

  // Decodes `sample` into m_decoded; a substitute's label replaces the sample's.
  bool decode(int64_t& sample, std::string& error) {
    const Dataset& d = m_l.m_data;
    std::string why;
    if (decodeImage(d.files[sample], d.image, m_decoded.data(), why)) return true;
    const std::string first = "'" + d.files[sample] + "' " + why;
    if (!d.skipUnreadable) {
      error = first;
      return false;
    }
    m_l.noteSkipped(first);
    for (int k = 1; k < kSubstituteTries && k < d.size(); ++k) {
      const int64_t next = (sample + k) % d.size();
      if (decodeImage(d.files[next], d.image, m_decoded.data(), why)) {
        sample = next;
        return true;
      }
    }
    error = first + ", and the " + std::to_string(kSubstituteTries - 1) +
            " images after it cannot be read either";
    return false;
  }

  BatchLoader& m_l;
  int64_t m_f = 0, m_plane = 1;
  bool m_files = false, m_bytes = false, m_floats = false;
  std::vector<uint8_t> m_byteScratch, m_decoded;
  std::vector<float> m_floatScratch;
  struct Channel {
    float mean, invStd;
  };
  std::vector<Channel> m_channels;
  float m_scale = 1.f;
};

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
      if (m_opts.evenShares) size -= size % ranks;
      if ((size < ranks && m_opts.dropShort) || size == 0) break;
      int64_t share = size / ranks, extra = size % ranks, r = m_opts.rank;
      int64_t count = share + (r < extra ? 1 : 0);
      if (count > 0) m_batches.push_back({at + r * share + std::min(r, extra), count, size});
    }
  }
  if (m_opts.onCaller && m_data.files.empty()) {
    for (int t = omp_get_max_threads(); t > 0; --t)
      m_callers.push_back(std::make_unique<Assembler>(*this));
    return;
  }
  const int workers = m_data.files.empty() ? 1 : std::max(1, m_data.decodeThreads);
  m_opts.prefetch = std::max(m_opts.prefetch, workers);
  m_running = workers;
  for (int w = 0; w < workers; ++w) m_threads.emplace_back([this] { work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  for (std::thread& t : m_threads) t.join();
}

Status BatchLoader::status() const {
  std::lock_guard lock(m_mutex);
  return m_status;
}

std::string BatchLoader::firstSkipped() const {
  std::lock_guard lock(m_mutex);
  return m_firstSkipped;
}

void BatchLoader::noteSkipped(const std::string& what) {
  std::lock_guard lock(m_mutex);
  if (m_skipped++ == 0) m_firstSkipped = what;
}

int64_t BatchLoader::batchesHeld(const Dataset& data, int prefetch) {
  const int workers = data.files.empty() ? 1 : std::max(1, data.decodeThreads);
  return std::max(prefetch, workers) + 2;
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
  if (!m_callers.empty()) return assembleHere(out);
  std::unique_lock lock(m_mutex);
  m_cv.wait(lock, [this] {
    return m_ready.count(m_nextOut) || m_nextOut >= m_failedAt || m_running == 0;
  });
  auto it = m_ready.find(m_nextOut);
  if (it == m_ready.end()) return false;
  out = std::move(it->second);
  m_ready.erase(it);
  ++m_nextOut;
  lock.unlock();
  m_cv.notify_all();
  return true;
}

// Into the caller's batch, whose buffers are reused from one batch to the next, its
// samples shared out between the threads of the kernels, which would otherwise wait.
bool BatchLoader::assembleHere(Batch& out) {
  if (m_nextOut >= int64_t(m_batches.size())) return false;
  const Range& range = m_batches[size_t(m_nextOut++)];
  std::string ignored;  // samples held in memory cannot fail to load
  if (m_data.isText()) return m_callers[0]->assemble(range, out, ignored);
  m_callers[0]->shape(range, out);
  const int threads = int(std::min<int64_t>(int64_t(m_callers.size()), range.count / 8 + 1));
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    std::string ignored;
    m_callers[size_t(t)]->fill(range, out, range.count * t / n, range.count * (t + 1) / n, ignored);
  }
  return true;
}

void BatchLoader::work() {
  Assembler assembler(*this);
  const auto batches = int64_t(m_batches.size());
  for (;;) {
    int64_t b = 0;
    {
      std::unique_lock lock(m_mutex);
      m_cv.wait(lock, [&] {
        return m_stop || m_nextClaim >= std::min(batches, m_failedAt) ||
               m_nextClaim < m_nextOut + m_opts.prefetch;
      });
      if (m_stop || m_nextClaim >= std::min(batches, m_failedAt)) break;
      b = m_nextClaim++;
    }
    Batch out;
    std::string error;
    const bool ok = assembler.assemble(m_batches[b], out, error);
    {
      std::lock_guard lock(m_mutex);
      if (ok) {
        m_ready.emplace(b, std::move(out));
      } else if (b < m_failedAt) {
        m_failedAt = b;
        m_status = makeError(error);
      }
    }
    m_cv.notify_all();
  }
  {
    std::lock_guard lock(m_mutex);
    --m_running;
  }
  m_cv.notify_all();
}

}  // namespace netloom
