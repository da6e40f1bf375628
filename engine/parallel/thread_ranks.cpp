// Ranks that are threads of one process, summing in shared memory. Every collective
// is two meetings of all ranks: at the first each has posted its buffer, then each
// sums its own slice of the elements across every rank's buffer (in rank order, so
// every rank gets the same bits) and writes the sum into all of them; the second
// meeting lets no rank reuse a buffer before every slice is written.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/parallel/communicator.h"

namespace netloom {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What the ranks share.
struct ThreadGroup {
  explicit ThreadGroup(int n, double timeout) : size(n), timeoutSeconds(timeout), posted(n) {}
  const int size;
  const double timeoutSeconds;
  std::atomic<int> arrived{0};
  std::atomic<uint64_t> generation{0};
  std::atomic<int> left{-1};        // the first rank that left, or -1
  std::vector<const void*> posted;  // per rank; read only between two meetings

  std::mutex mutex;  // with `changed`: the wait after the spin
  std::condition_variable changed;
  int sleepers = 0;  // ranks waiting on `changed`, under `mutex`

  // Point-to-point messages not yet received, by (from, to, tag), in the order sent;
  // under `mutex`, `changed` signalling a new one.
  std::map<std::tuple<int, int, uint32_t>, std::deque<std::vector<char>>> mail;

  // Waits until every rank has arrived. A rank waiting spins briefly (a step's
  // collectives come microseconds apart), then yields its core, then waits on the
  // condition variable that the last rank to arrive, or a rank leaving, signals.
  void meet(int rank, const char* what) {
    const uint64_t gen = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size) {
      arrived.store(0, std::memory_order_relaxed);
      generation.fetch_add(1, std::memory_order_release);
      wakeSleepers();
      return;
    }
    auto done = [&] {
      return generation.load(std::memory_order_acquire) != gen ||
             left.load(std::memory_order_acquire) >= 0;
    };
    for (int spin = 0; spin < 8000 && !done(); ++spin)
      if (spin < 4000)
        _mm_pause();
      else
        std::this_thread::yield();
    if (!done()) {
      std::unique_lock lock(mutex);
      ++sleepers;
      // At most a day at a time: a duration past the clock's range would overflow.
      const auto limit = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::min(timeoutSeconds, 86400.0)));
      const bool met = changed.wait_for(lock, limit, done);
      --sleepers;
      if (!met) {
        char waited[32];
        std::snprintf(waited, sizeof waited, "%g", timeoutSeconds);
        throw CommError(std::string(what) + " across the ranks failed: rank " +
                        std::to_string(rank) + " waited " + waited + " s for the others");
      }
    }
    if (generation.load(std::memory_order_acquire) != gen) return;
    throw CommError(std::string(what) + " across the ranks failed: rank " +
                    std::to_string(left.load()) + " left the job");
  }

  // Ranks asleep in meet() see the change: taking the mutex orders the change before
  // their check, so none misses it; with none asleep, no wake-up is paid for.
  void wakeSleepers() {
    std::lock_guard lock(mutex);
    if (sleepers > 0) changed.notify_all();
  }

  void leave(int rank) {
    int none = -1;
    left.compare_exchange_strong(none, rank);
    { std::lock_guard lock(mutex); }  // a receiver between its check and its wait sees it
    changed.notify_all();             // the sleepers in meet() and any receiver
  }
};

// Element range [lo, hi) of `n` that rank `r` of `size` sums.
void sliceOf(int64_t n, int r, int size, int64_t& lo, int64_t& hi) {
  lo = n * r / size;
  hi = n * (r + 1) / size;
}

// Sums elements [lo, hi) of every buffer into all of them, in rank order.
template <class T>
void sumSlice(const std::vector<T*>& bufs, int64_t lo, int64_t hi, bool mean) {
  T* first = bufs[0];
  for (size_t k = 1; k < bufs.size(); ++k) {
    const T* other = bufs[k];
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) first[i] += other[i];
  }
  if (mean) {
    const T n = T(bufs.size());
    for (int64_t i = lo; i < hi; ++i) first[i] /= n;
  }
  for (size_t k = 1; k < bufs.size(); ++k)
    std::memcpy(bufs[k] + lo, first + lo, size_t(hi - lo) * sizeof(T));
}

class ThreadRank : public Communicator {
 public:
  ThreadRank(std::shared_ptr<ThreadGroup> g, int rank)
      : m_group(std::move(g)),
        m_rank(rank),
        m_floats(size_t(m_group->size)),
        m_doubles(size_t(m_group->size)) {}
  // A rank that ends leaves: the others' next collective fails, naming it.
  ~ThreadRank() override { m_group->leave(m_rank); }

  int rank() const override { return m_rank; }
  int size() const override { return m_group->size; }
  std::string describe() const override {
    return "shared memory, rank " + std::to_string(m_rank) + " of " + std::to_string(size()) +
           " (threads of one process)";
  }

  void allreduce(float* data, int64_t count, bool mean) override {
    reduce(data, count, mean, "allreduce");
  }
  void allreduce(double* data, int64_t count) override { reduce(data, count, false, "allreduce"); }

  void broadcast(void* data, int64_t bytes, int root) override {
    if (root < 0 || root >= size()) throw CommError("broadcast from rank " + std::to_string(root));
    post(data, "broadcast");
    if (m_rank != root) std::memcpy(data, m_group->posted[size_t(root)], size_t(bytes));
    m_group->meet(m_rank, "broadcast");
  }

  void allgather(const void* in, void* out, int64_t bytes) override {
    post(in, "allgather");
    for (int k = 0; k < size(); ++k)
      std::memcpy(static_cast<char*>(out) + k * bytes, m_group->posted[size_t(k)], size_t(bytes));
    m_group->meet(m_rank, "allgather");
  }

  void barrier() override { m_group->meet(m_rank, "barrier"); }

  void reduceScatter(const float* in, float* out, int64_t count) override {
    post(in, "reduce-scatter");
    const int64_t at = int64_t(m_rank) * count;
    std::memcpy(out, static_cast<const float*>(m_group->posted[0]) + at,
                size_t(count) * sizeof(float));
    for (int k = 1; k < size(); ++k) {
      const float* part = static_cast<const float*>(m_group->posted[size_t(k)]) + at;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) out[i] += part[i];
    }
    m_group->meet(m_rank, "reduce-scatter");
  }

  void alltoall(const void* in, void* out, int64_t bytes) override {
    post(in, "all-to-all");
    for (int k = 0; k < size(); ++k)
      std::memcpy(static_cast<char*>(out) + k * bytes,
                  static_cast<const char*>(m_group->posted[size_t(k)]) + m_rank * bytes,
                  size_t(bytes));
    m_group->meet(m_rank, "all-to-all");
  }

  // A message is copied into the group's mail, so send() returns at once.
  void send(const void* data, int64_t bytes, int to, uint32_t tag) override {
    checkPeer("send to", to);
    const char* from = static_cast<const char*>(data);
    {
      std::lock_guard lock(m_group->mutex);
      m_group->mail[{m_rank, to, tag}].emplace_back(from, from + bytes);
    }
    m_group->changed.notify_all();
  }

  void recv(void* data, int64_t bytes, int from, uint32_t tag) override {
    checkPeer("receive from", from);
    std::unique_lock lock(m_group->mutex);
    auto& queue = m_group->mail[{from, m_rank, tag}];
    const auto limit = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::min(m_group->timeoutSeconds, 86400.0)));
    const int sender = from;
    auto arrived = [&] { return !queue.empty() || m_group->left.load() == sender; };
    if (!m_group->changed.wait_for(lock, limit, arrived))
      throw CommError("rank " + std::to_string(m_rank) + ": receiving from rank " +
                      std::to_string(from) + " timed out");
    if (queue.empty())
      throw CommError("rank " + std::to_string(m_rank) + ": rank " + std::to_string(from) +
                      " left the job before sending");
    std::vector<char> message = std::move(queue.front());
    queue.pop_front();
    if (int64_t(message.size()) != bytes)
      throw CommError("rank " + std::to_string(m_rank) + ": rank " + std::to_string(from) +
                      " sent " + std::to_string(message.size()) + " bytes, " +
                      std::to_string(bytes) + " expected");
    std::memcpy(data, message.data(), message.size());
  }

  // Summed at once: the ranks are this process's threads, so there is no transport
  // whose time the backward pass could hide.
  void start(const std::string& bucket, const TensorRef* tensors, size_t count) override {
    if (!m_started.insert(bucket).second)
      throw CommError("bucket '" + bucket + "' started twice without a wait");
    const Clock::time_point t0 = Clock::now();
    post(tensors, "bucket sum");
    int64_t total = 0;
    for (size_t t = 0; t < count; ++t) total += tensors[t].numel();
    int64_t lo = 0, hi = 0;
    sliceOf(total, m_rank, size(), lo, hi);
    std::vector<float*>& bufs = m_floats;
    int64_t offset = 0;  // of tensor t in the bucket
    for (size_t t = 0; t < count && offset < hi; offset += tensors[t].numel(), ++t) {
      const int64_t n = tensors[t].numel();
      const int64_t from = std::max<int64_t>(lo, offset), to = std::min<int64_t>(hi, offset + n);
      if (from >= to) continue;
      for (int k = 0; k < size(); ++k)
        bufs[size_t(k)] = static_cast<const TensorRef*>(m_group->posted[size_t(k)])[t].f32();
      sumSlice(bufs, from - offset, to - offset, false);
    }
    m_group->meet(m_rank, "bucket sum");
    m_stats.buckets += 1;
    m_stats.bytes += total * int64_t(sizeof(float));
    const double took = secondsSince(t0);
    m_stats.bucketSeconds += took;
    m_stats.waitedSeconds += took;  // all of it: the step waits for the sum
  }

  void wait(const std::string& bucket) override {
    if (m_started.erase(bucket) == 0)
      throw CommError("bucket '" + bucket + "' waited for but never started");
  }

  CommStats stats() const override {
    return m_stats;
  }

 private:
  void checkPeer(const char* what, int other) const {
    if (other < 0 || other >= size() || other == m_rank)
      throw CommError("rank " + std::to_string(m_rank) + ": cannot " + what + " rank " +
                      std::to_string(other) + " of " + std::to_string(size()));
  }

  void post(const void* p, const char* what) {
    m_group->posted[size_t(m_rank)] = p;
    m_group->meet(m_rank, what);
  }

  template <class T>
  void reduce(T* data, int64_t count, bool mean, const char* what) {
    post(data, what);
    int64_t lo = 0, hi = 0;
    sliceOf(count, m_rank, size(), lo, hi);
    std::vector<T*>& bufs = buffers<T>();
    for (int k = 0; k < size(); ++k)
      bufs[size_t(k)] = static_cast<T*>(const_cast<void*>(m_group->posted[size_t(k)]));
    sumSlice(bufs, lo, hi, mean);
    m_group->meet(m_rank, what);
  }

  // Every rank's buffer of one collective, kept so that a step's collectives
  // allocate nothing.
  template <class T>
  std::vector<T*>& buffers() {
    if constexpr (std::is_same_v<T, float>)
      return m_floats;
    else
      return m_doubles;
  }

  std::shared_ptr<ThreadGroup> m_group;
  int m_rank;
  std::vector<float*> m_floats;
  std::vector<double*> m_doubles;
  std::set<std::string> m_started;
  CommStats m_stats;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> threadRanks(int size, double timeoutSeconds) {
  auto group = std::make_shared<ThreadGroup>(size, timeoutSeconds);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<ThreadRank>(group, r));
  return ranks;
}

}  // namespace netloom
