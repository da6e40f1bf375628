// A communicator over some of a run's ranks, made of the run's point-to-point
// messages: each collective sends every member what it needs and sums what it
// receives in member order, so every member gets the same bits on any transport.
// Over all the ranks it is the run's own communicator.
#include <chrono>
#include <cstring>
#include <map>

#include "engine/parallel/communicator.h"

namespace netloom {
namespace {

// The run's communicator, not owned: a group of every rank.
class Everyone : public Communicator {
 public:
  explicit Everyone(Communicator& all) : m_all(all) {}
  int rank() const override { return m_all.rank(); }
  int size() const override { return m_all.size(); }
  std::string describe() const override { return m_all.describe(); }
  bool plansOnly() const override { return m_all.plansOnly(); }
  void allreduce(float* d, int64_t n, bool mean) override { m_all.allreduce(d, n, mean); }
  void allreduce(double* d, int64_t n) override { m_all.allreduce(d, n); }
  void broadcast(void* d, int64_t b, int root) override { m_all.broadcast(d, b, root); }
  void allgather(const void* i, void* o, int64_t b) override { m_all.allgather(i, o, b); }
  void barrier() override { m_all.barrier(); }
  void reduceScatter(const float* i, float* o, int64_t n) override { m_all.reduceScatter(i, o, n); }
  void alltoall(const void* i, void* o, int64_t b) override { m_all.alltoall(i, o, b); }
  void send(const void* d, int64_t b, int to, uint32_t t) override { m_all.send(d, b, to, t); }
  void recv(void* d, int64_t b, int from, uint32_t t) override { m_all.recv(d, b, from, t); }
  void start(const std::string& b, const TensorRef* t, size_t n) override { m_all.start(b, t, n); }
  void wait(const std::string& b) override { m_all.wait(b); }
  CommStats stats() const override { return m_all.stats(); }
  bool sumsDeviceMemory() const override { return m_all.sumsDeviceMemory(); }
  Communicator* onDevice() override { return m_all.onDevice(); }

 private:
  Communicator& m_all;
};

class Members : public Communicator {
 public:
  Members(Communicator& all, std::vector<int> members, uint32_t tag)
      : m_all(all), m_members(std::move(members)), m_tag(tag) {
    for (size_t k = 0; k < m_members.size(); ++k)
      if (m_members[k] == all.rank()) m_me = int(k);
  }
  int rank() const override { return m_me; }
  int size() const override { return int(m_members.size()); }
  std::string describe() const override {
    std::string s;
    for (int r : m_members) s += (s.empty() ? "" : ",") + std::to_string(r);
    return "ranks " + s + " of " + m_all.describe();
  }

  void allreduce(float* data, int64_t count, bool mean) override {
    sum(data, count);
    if (mean)
      for (int64_t i = 0; i < count; ++i) data[i] /= float(size());
  }
  void allreduce(double* data, int64_t count) override { sum(data, count); }
  void broadcast(void* data, int64_t bytes, int root) override {
    if (m_me == root) {
      for (int k = 0; k < size(); ++k)
        if (k != root) send(data, bytes, k, kCollective);
    } else {
      recv(data, bytes, root, kCollective);
    }
  }
  void allgather(const void* in, void* out, int64_t bytes) override {
    for (int k = 0; k < size(); ++k)
      if (k != m_me) send(in, bytes, k, kCollective);
    char* o = static_cast<char*>(out);
    std::memmove(o + m_me * bytes, in, size_t(bytes));
    for (int k = 0; k < size(); ++k)
      if (k != m_me) recv(o + k * bytes, bytes, k, kCollective);
  }
  void barrier() override {
    std::vector<char> out(static_cast<size_t>(size()));
    char in = 0;
    allgather(&in, out.data(), 1);
  }
  void reduceScatter(const float* in, float* out, int64_t count) override {
    std::vector<float> got(size_t(count * size()));
    alltoall(in, got.data(), count * int64_t(sizeof(float)));
    for (int64_t i = 0; i < count; ++i) out[i] = got[size_t(i)];
    for (int k = 1; k < size(); ++k)
      for (int64_t i = 0; i < count; ++i) out[i] += got[size_t(k * count + i)];
  }
  void alltoall(const void* in, void* out, int64_t bytes) override {
    const char* i = static_cast<const char*>(in);
    char* o = static_cast<char*>(out);
    for (int k = 0; k < size(); ++k)
      if (k != m_me) send(i + k * bytes, bytes, k, kCollective);
    std::memcpy(o + m_me * bytes, i + m_me * bytes, size_t(bytes));
    for (int k = 0; k < size(); ++k)
      if (k != m_me) recv(o + k * bytes, bytes, k, kCollective);
  }
  void send(const void* data, int64_t bytes, int to, uint32_t tag) override {
    m_all.send(data, bytes, member(to), m_tag + tag);
  }
  void recv(void* data, int64_t bytes, int from, uint32_t tag) override {
    m_all.recv(data, bytes, member(from), m_tag + tag);
  }
  // Summed at once, on the caller's thread: the bucket is ready when start() returns.
  void start(const std::string&, const TensorRef* tensors, size_t count) override {
    for (size_t k = 0; k < count; ++k)
      sum(static_cast<float*>(tensors[k].data), numel(tensors[k].shape));
  }
  void wait(const std::string&) override {}

 private:
  static constexpr uint32_t kCollective = 0xffff;

  int member(int k) const {
    if (k < 0 || k >= size())
      throw CommError("a group of " + std::to_string(size()) + " ranks has no rank " +
                      std::to_string(k));
    return m_members[size_t(k)];
  }
  // Every member's values gathered, then summed in member order.
  template <typename T>
  void sum(T* data, int64_t count) {
    std::vector<T> all(size_t(count * size()));
    allgather(data, all.data(), count * int64_t(sizeof(T)));
    for (int64_t i = 0; i < count; ++i) {
      T s = all[size_t(i)];
      for (int k = 1; k < size(); ++k) s += all[size_t(k * count + i)];
      data[i] = s;
    }
  }

  Communicator& m_all;
  std::vector<int> m_members;
  uint32_t m_tag;
  int m_me = 0;
};

}  // namespace

std::unique_ptr<Communicator> subgroup(Communicator& all, std::vector<int> members, uint32_t tag) {
  bool everyone = int(members.size()) == all.size();
  for (size_t k = 0; everyone && k < members.size(); ++k) everyone = members[k] == int(k);
  if (everyone) return std::make_unique<Everyone>(all);
  if (auto own = all.group(members, tag)) return own;
  return std::make_unique<Members>(all, std::move(members), tag);
}

TensorGroups tensorGroups(Communicator& all, int tensorParallel) {
  TensorGroups g;
  const int n = all.size(), t = tensorParallel, r = all.rank();
  std::vector<int> tensor, data;
  for (int k = 0; k < t; ++k) tensor.push_back(r / t * t + k);
  for (int k = r % t; k < n; k += t) data.push_back(k);
  g.tensor = subgroup(all, tensor, 0x10000u * uint32_t(1 + r / t));
  g.data = subgroup(all, data, 0x10000u * uint32_t(1 + n / t + r % t));
  return g;
}

LinkCost measureLink(Communicator& comm) {
  const int ranks = comm.size();
  LinkCost link;
  if (ranks < 2 || comm.plansOnly()) return link;
  using Clock = std::chrono::steady_clock;
  auto timed = [&](std::vector<float>& data, int times) {
    comm.allreduce(data.data(), int64_t(data.size()));  // warm: buffers, connections
    comm.barrier();
    const auto t0 = Clock::now();
    for (int k = 0; k < times; ++k) comm.allreduce(data.data(), int64_t(data.size()));
    return std::chrono::duration<double>(Clock::now() - t0).count() / times;
  };
  std::vector<float> one(1, 0.f), big(size_t(1) << 18, 0.f);  // 4 bytes, 1 MiB
  const double small = timed(one, 16), large = timed(big, 4);
  const int steps = 2 * (ranks - 1);  // a ring all-reduce's
  const double sent = double(big.size() * sizeof(float)) * steps / ranks;
  double figures[2] = {small / steps, sent / std::max(large - small, 1e-9)};
  comm.allreduce(figures, 2);  // the ranks' mean, the same bits on each
  link.latencySeconds = figures[0] / ranks;
  link.bytesPerSecond = figures[1] / ranks;
  link.measured = true;
  comm.setLink(link);
  return link;
}

}  // namespace netloom
