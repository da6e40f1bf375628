#include "engine/parallel/communicator.h"

#include "engine/io/output_file.h"
#include "engine/parallel/tcp_store.h"

#ifdef NETLOOM_WITH_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>

#include "engine/parallel/gloo_sends.h"
#endif

#ifdef NETLOOM_WITH_NCCL
#include "kernels/cuda/nccl.h"
#endif

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace netloom {

#ifdef NETLOOM_WITH_GLOO
class RendezvousStore {
 public:
  explicit RendezvousStore(std::shared_ptr<gloo::rendezvous::Store> s) : store(std::move(s)) {}
  std::shared_ptr<gloo::rendezvous::Store> store;
};

std::shared_ptr<RendezvousStore> fileRendezvous(const std::string& dir) {
  return std::make_shared<RendezvousStore>(std::make_shared<gloo::rendezvous::FileStore>(dir));
}

std::shared_ptr<RendezvousStore> memoryRendezvous() {
  return std::make_shared<RendezvousStore>(std::make_shared<gloo::rendezvous::HashStore>());
}

namespace {

// Gloo's store interface over the TCP store's client (and, on rank 0, its server).
class TcpGlooStore : public gloo::rendezvous::Store {
 public:
  TcpGlooStore(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStoreClient> client,
               std::chrono::milliseconds timeout)
      : m_server(std::move(server)), m_client(std::move(client)), m_timeout(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard lock(m_mutex);
    if (Status s = m_client->set(key, data); !s) throw std::runtime_error(s.message());
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, m_timeout);
    std::lock_guard lock(m_mutex);
    bool found = false;
    auto v = m_client->get(key, found);
    if (!v) throw std::runtime_error(v.error().message);
    return *v;
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, m_timeout); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const std::string& key : keys) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      std::lock_guard lock(m_mutex);
      auto set = m_client->wait(key, std::max(left, std::chrono::milliseconds(0)));
      if (!set) throw std::runtime_error(set.error().message);
      if (!*set) throw std::runtime_error("no '" + key + "' in the rendezvous in time");
    }
  }

 private:
  std::unique_ptr<TcpStoreServer> m_server;
  std::unique_ptr<TcpStoreClient> m_client;
  std::chrono::milliseconds m_timeout;
  std::mutex m_mutex;
};

}  // namespace

Result<std::shared_ptr<RendezvousStore>> tcpRendezvous(const std::string& host, int port, int rank,
                                                       const std::string& secret,
                                                       const std::string& portFile,
                                                       double timeoutSeconds) {
  auto timeout = std::chrono::milliseconds(int64_t(timeoutSeconds * 1000));
  std::unique_ptr<TcpStoreServer> server;
  if (rank == 0) {
    auto started = TcpStoreServer::start(host, port, secret);
    if (!started) return started.error();
    server = std::move(*started);
    port = server->port();
    if (!portFile.empty())
      if (Status s = writeFileAtomic(portFile, std::to_string(port) + "\n"); !s) return s.error();
  }
  auto client = TcpStoreClient::connect(host, port, secret, timeout);
  if (!client) return client.error();
  return std::make_shared<RendezvousStore>(
      std::make_shared<TcpGlooStore>(std::move(server), std::move(*client), timeout));
}
#else
class RendezvousStore {};  // ranks cannot meet without Gloo

std::shared_ptr<RendezvousStore> fileRendezvous(const std::string&) {
  return std::make_shared<RendezvousStore>();
}

std::shared_ptr<RendezvousStore> memoryRendezvous() {
  return std::make_shared<RendezvousStore>();
}

Result<std::shared_ptr<RendezvousStore>> tcpRendezvous(const std::string&, int, int,
                                                       const std::string&, const std::string&,
                                                       double) {
  return makeError("this build has no Gloo (libgloo-dev), through which ranks meet");
}
#endif

namespace {

class SingleRank : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "a single rank"; }
  void allreduce(float*, int64_t, bool) override {}
  void allreduce(double*, int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  void allgather(const void* in, void* out, int64_t bytes) override {
    if (in != out) std::memcpy(out, in, size_t(bytes));
  }
  void barrier() override {}
  void reduceScatter(const float* in, float* out, int64_t count) override {
    std::memcpy(out, in, size_t(count) * sizeof(float));
  }
  void alltoall(const void* in, void* out, int64_t bytes) override {
    if (in != out) std::memcpy(out, in, size_t(bytes));
  }
  void send(const void*, int64_t, int to, uint32_t) override { noPeer(to); }
  void recv(void*, int64_t, int from, uint32_t) override { noPeer(from); }
  void start(const std::string&, const TensorRef*, size_t) override {}
  void wait(const std::string&) override {}

 private:
  [[noreturn]] static void noPeer(int rank) {
    throw CommError("a single rank has no rank " + std::to_string(rank) + " to message");
  }
};

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#ifdef NETLOOM_WITH_GLOO
// Gloo over TCP. Every collective runs on one communication thread, in the order the
// calls were made (the same on every rank); a bucket's sum runs there while the
// caller goes on, the blocking calls wait for theirs.
class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx,
                   std::shared_ptr<gloo::transport::Device> dev, std::chrono::milliseconds timeout,
                   std::shared_ptr<gloo::rendezvous::Store> store)
      : m_ctx(std::move(ctx)),
        m_dev(std::move(dev)),
        m_timeout(timeout),
        m_sends(m_ctx, timeout),
        m_store(std::move(store)) {
    widenSendBuffers();
    m_thread = std::thread([this] { work(); });
  }
  ~GlooCommunicator() override {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
    drain();
  }

  int rank() const override { return m_ctx->rank; }
  int size() const override { return m_ctx->size; }
  std::string describe() const override {
    return "gloo over TCP, rank " + std::to_string(rank()) + " of " + std::to_string(size());
  }
  // A group of the ranks connects apart, over its own TCP pairs: its traffic never
  // waits behind the others' collectives.
  std::unique_ptr<Communicator> group(const std::vector<int>& members, uint32_t id) override {
    const auto me = std::find(members.begin(), members.end(), rank());
    if (!m_store || me == members.end()) return nullptr;
    gloo::rendezvous::PrefixStore prefix("netloom/group/" + std::to_string(id), *m_store);
    auto ctx =
        std::make_shared<gloo::rendezvous::Context>(int(me - members.begin()), int(members.size()));
    ctx->setTimeout(m_timeout);
    try {
      ctx->connectFullMesh(prefix, m_dev);
    } catch (const std::exception& e) {
      throw CommError("the group of ranks " + std::to_string(members.front()) + ".." +
                      std::to_string(members.back()) + " could not connect: " + e.what());
    }
    return std::make_unique<GlooCommunicator>(std::move(ctx), m_dev, m_timeout, nullptr);
  }

  void allreduce(float* data, int64_t count, bool mean) override {
    call("allreduce", [&](uint32_t tag) {
      gloo::AllreduceOptions o(m_ctx);
      o.setOutput(data, size_t(count));
      o.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      o.setTag(tag);
      o.setTimeout(m_timeout);
      gloo::allreduce(o);
      if (mean)
        for (int64_t i = 0; i < count; ++i) data[i] /= float(size());
    });
  }
  void allreduce(double* data, int64_t count) override {
    call("allreduce", [&](uint32_t tag) {
      gloo::AllreduceOptions o(m_ctx);
      o.setOutput(data, size_t(count));
      o.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
      o.setTag(tag);
      o.setTimeout(m_timeout);
      gloo::allreduce(o);
    });
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    call("broadcast", [&](uint32_t tag) {
      gloo::BroadcastOptions o(m_ctx);
      o.setOutput(static_cast<char*>(data), size_t(bytes));
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(m_timeout);
      gloo::broadcast(o);
    });
  }
  void allgather(const void* in, void* out, int64_t bytes) override {
    call("allgather", [&](uint32_t tag) {
      gloo::AllgatherOptions o(m_ctx);
      o.setInput(const_cast<char*>(static_cast<const char*>(in)), size_t(bytes));
      o.setOutput(static_cast<char*>(out), size_t(bytes) * size_t(size()));
      o.setTag(tag);
      o.setTimeout(m_timeout);
      gloo::allgather(o);
    });
  }
  void barrier() override {
    call("barrier", [&](uint32_t tag) {
      gloo::BarrierOptions o(m_ctx);
      o.setTag(tag);
      o.setTimeout(m_timeout);
      gloo::barrier(o);
    });
  }
  void alltoall(const void* in, void* out, int64_t bytes) override {
    call("all-to-all", [&](uint32_t tag) { exchange(in, out, bytes, tag); });
  }
  // Each rank's block to its keeper (an all-to-all), then the blocks received summed
  // in rank order.
  void reduceScatter(const float* in, float* out, int64_t count) override {
    call("reduce-scatter", [&](uint32_t tag) {
      m_scatter.resize(size_t(count) * size_t(size()));
      exchange(in, m_scatter.data(), count * int64_t(sizeof(float)), tag);
      std::memcpy(out, m_scatter.data(), size_t(count) * sizeof(float));
      for (int k = 1; k < size(); ++k) {
        const float* part = m_scatter.data() + size_t(k) * size_t(count);
        for (int64_t i = 0; i < count; ++i) out[i] += part[i];
      }
    });
  }
  // On the caller's thread, not the communication thread: only two ranks take part,
  // so a message must not take a place in the order of the collectives (or its tag).
  void send(const void* data, int64_t bytes, int to, uint32_t tag) override {
    peer("send to", to, [&] { m_sends.post(data, bytes, to, messageSlot(tag)); });
  }
  void recv(void* data, int64_t bytes, int from, uint32_t tag) override {
    peer("receive from", from, [&] {
      auto buf = m_ctx->createUnboundBuffer(data, size_t(bytes));
      buf->recv(from, messageSlot(tag));
      if (!buf->waitRecv(m_timeout)) throw CommError("timed out");
    });
  }

  void start(const std::string& name, const TensorRef* tensors, size_t count) override {
    std::unique_lock lock(m_mutex);
    Bucket& b = m_buckets[name];
    if (b.pending) throw CommError("bucket '" + name + "' started twice without a wait");
    b.tensors.assign(tensors, tensors + count);
    b.pending = true;
    b.done = false;
    b.error = nullptr;
    m_jobs.push_back([this, &b, name] { sumBucket(name, b); });
    lock.unlock();
    m_cv.notify_all();
  }

  void wait(const std::string& name) override {
    double t0 = seconds();
    std::unique_lock lock(m_mutex);
    auto it = m_buckets.find(name);
    if (it == m_buckets.end() || !it->second.pending)
      throw CommError("bucket '" + name + "' waited for but never started");
    Bucket& b = it->second;
    m_cv.wait(lock, [&] { return b.done; });
    b.pending = false;
    m_stats.waitedSeconds += seconds() - t0;
    if (b.error) std::rethrow_exception(b.error);
  }

  CommStats stats() const override {
    std::lock_guard lock(m_mutex);
    return m_stats;
  }

 private:
  struct Bucket {
    std::vector<TensorRef> tensors;
    std::vector<float> flat;  // the bucket packed: the ring sums it in place
    std::unique_ptr<gloo::AllreduceRing<float>> ring;  // kept: a new ring costs its setup
    bool pending = false, done = false;
    std::exception_ptr error;
  };

  // On the communication thread: pack, sum, unpack.
  void sumBucket(const std::string& name, Bucket& b) {
    double t0 = seconds();
    try {
      int64_t total = 0;
      for (const TensorRef& t : b.tensors) total += t.numel();
      if (!b.ring || int64_t(b.flat.size()) != total) {
        b.flat.assign(size_t(total), 0.f);
        b.ring = std::make_unique<gloo::AllreduceRing<float>>(
            m_ctx, std::vector<float*>{b.flat.data()}, int(total));
      }
      float* at = b.flat.data();
      for (const TensorRef& t : b.tensors) {
        std::memcpy(at, t.data, size_t(t.numel()) * sizeof(float));
        at += t.numel();
      }
      m_ringLast = true;
      b.ring->run();
      at = b.flat.data();
      for (const TensorRef& t : b.tensors) {
        std::memcpy(t.data, at, size_t(t.numel()) * sizeof(float));
        at += t.numel();
      }
      std::lock_guard lock(m_mutex);
      m_stats.buckets += 1;
      m_stats.bytes += total * int64_t(sizeof(float));
    } catch (const std::exception& e) {
      std::lock_guard lock(m_mutex);
      b.error = std::make_exception_ptr(CommError("rank " + std::to_string(rank()) +
                                                  ": summing gradient bucket '" + name +
                                                  "' across the ranks failed: " + e.what()));
    }
    std::lock_guard lock(m_mutex);
    m_stats.bucketSeconds += seconds() - t0;
    b.done = true;
    m_cv.notify_all();
  }

  // Where the last collective was a bucket's ring, before the pairs close each rank
  // waits (a little) for the others to get this far: Gloo's ring returns while its last
  // message to the neighbour on the left may still be on its way, and a pair closed
  // under it failed that neighbour's sum ("connection closed by peer"). A barrier's own
  // sends are waited for, as are the other collectives'. A rank that has gone, or stays
  // in a collective of its own, keeps this one here for kDrain at most.
  void drain() noexcept {
    static constexpr std::chrono::milliseconds kDrain{10000};
    static constexpr uint32_t kDrainTag = 0xfffffff0u;  // above every call's tag
    if (size() < 2 || !m_ringLast) return;
    try {
      gloo::BarrierOptions o(m_ctx);
      o.setTag(kDrainTag);
      o.setTimeout(std::min(m_timeout, kDrain));
      gloo::barrier(o);
    } catch (const std::exception&) {  // the pairs close either way
    }
  }

  // Gloo sizes a pair's socket send buffer (SO_SNDBUF, which turns off the kernel's
  // own sizing) by the first message its ring sends: a first bucket of a few floats
  // left it at the kernel's least, 4.6 kB, and every later large message (a boxing's,
  // through the collectives that never resize it) crawled out in 4.6 kB pieces, each
  // waiting for the peer to drain the last: 2 MB/s between two processes here. A
  // first ring of 2 MiB chunks sizes it as large as the kernel allows instead.
  void widenSendBuffers() {
    if (size() < 2) return;
    const int64_t chunk = int64_t(1) << 19;  // floats: 2 MiB, the ring's largest send
    std::vector<float> wide(size_t(chunk * 2 * std::min(size(), 16)), 0.f);
    gloo::AllreduceRing<float>(m_ctx, {wide.data()}, int(wide.size())).run();
  }

  void exchange(const void* in, void* out, int64_t bytes, uint32_t tag) {
    gloo::AlltoallOptions o(m_ctx);
    o.setInput(const_cast<char*>(static_cast<const char*>(in)), size_t(bytes) * size_t(size()));
    o.setOutput(static_cast<char*>(out), size_t(bytes) * size_t(size()));
    o.setTag(tag);
    o.setTimeout(m_timeout);
    gloo::alltoall(o);
  }

  // Point-to-point messages' slots: a prefix of their own above Gloo's collectives'.
  static uint64_t messageSlot(uint32_t tag) { return (uint64_t(0x4e) << 56) | tag; }

  template <class F>
  void peer(const char* what, int other, const F& fn) {
    if (other < 0 || other >= size() || other == rank())
      throw CommError("rank " + std::to_string(rank()) + ": cannot " + what + " rank " +
                      std::to_string(other) + " of " + std::to_string(size()));
    try {
      fn();
    } catch (const std::exception& e) {
      throw CommError("rank " + std::to_string(rank()) + ": " + what + " rank " +
                      std::to_string(other) + " failed: " + e.what());
    }
  }

  // Runs `fn` on the communication thread with a fresh tag and waits for it.
  void call(const char* what, const std::function<void(uint32_t)>& fn) {
    std::unique_lock lock(m_mutex);
    bool done = false;
    std::exception_ptr error;
    uint32_t tag = ++m_tag;
    m_jobs.push_back([&, tag] {
      try {
        m_ringLast = false;
        fn(tag);
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(CommError("rank " + std::to_string(rank()) + ": " + what +
                                                  " across the ranks failed: " + e.what()));
      }
      std::lock_guard inner(m_mutex);
      done = true;
      m_cv.notify_all();
    });
    m_cv.notify_all();
    m_cv.wait(lock, [&] { return done; });
    if (error) std::rethrow_exception(error);
  }

  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [this] { return m_stop || !m_jobs.empty(); });
        if (m_jobs.empty()) return;
        job = std::move(m_jobs.front());
        m_jobs.pop_front();
      }
      job();
    }
  }

  std::shared_ptr<gloo::rendezvous::Context> m_ctx;
  std::shared_ptr<gloo::transport::Device> m_dev;
  std::chrono::milliseconds m_timeout;
  GlooSends m_sends;                                 // point-to-point messages in flight
  std::shared_ptr<gloo::rendezvous::Store> m_store;  // where groups of the ranks meet
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::function<void()>> m_jobs;
  std::map<std::string, Bucket> m_buckets;
  uint32_t m_tag = 0;            // the blocking calls', the same sequence on every rank
  std::vector<float> m_scatter;  // reduce-scatter: the blocks received, on the communication thread
  CommStats m_stats;
  bool m_stop = false;
  bool m_ringLast = false;  // on the communication thread: the last collective was a ring
  std::thread m_thread;
};

#endif  // NETLOOM_WITH_GLOO

}  // namespace

std::unique_ptr<Communicator> singleRank() {
  return std::make_unique<SingleRank>();
}

namespace {

class PlanningRanks : public SingleRank {
 public:
  explicit PlanningRanks(int size) : m_size(size) {}
  int size() const override { return m_size; }
  std::string describe() const override { return std::to_string(m_size) + " ranks (a plan only)"; }
  bool plansOnly() const override { return true; }
  // Plans for GPUs too (where NCCL would move their memory).
  Communicator* onDevice() override { return this; }
  // Rank 0's groups: planned for too.
  std::unique_ptr<Communicator> group(const std::vector<int>& members, uint32_t) override {
    return std::make_unique<PlanningRanks>(int(members.size()));
  }
  void allreduce(float*, int64_t, bool) override { refuse(); }
  void allreduce(double*, int64_t) override { refuse(); }
  void broadcast(void*, int64_t, int) override { refuse(); }
  void allgather(const void*, void*, int64_t) override { refuse(); }
  void barrier() override { refuse(); }
  void start(const std::string&, const TensorRef*, size_t) override { refuse(); }
  void wait(const std::string&) override { refuse(); }

 private:
  [[noreturn]] static void refuse() { throw CommError("ranks planned for cannot communicate"); }
  int m_size;
};

}  // namespace

std::unique_ptr<Communicator> planningRanks(int size) {
  return std::make_unique<PlanningRanks>(size);
}

Result<std::unique_ptr<Communicator>> connectRanks(const RankOptions& opts,
                                                   std::shared_ptr<RendezvousStore> store) {
  if (opts.size < 1 || opts.rank < 0 || opts.rank >= opts.size)
    return makeError("rank " + std::to_string(opts.rank) + " of " + std::to_string(opts.size) +
                     " does not exist");
  if (opts.size == 1) return singleRank();
  auto timeout = std::chrono::milliseconds(int64_t(opts.timeoutSeconds * 1000));
  std::string here = "rank " + std::to_string(opts.rank) + " of " + std::to_string(opts.size);
#ifndef NETLOOM_WITH_GLOO
  (void)store;
  (void)timeout;
  return makeError(here + ": this build has no Gloo (libgloo-dev), through which ranks meet");
#else
  try {
    // Each rank says it is here; the error names those that never came.
    std::vector<std::string> keys;
    for (int r = 0; r < opts.size; ++r) keys.push_back("netloom/arrived/" + std::to_string(r));
    store->store->set(keys[size_t(opts.rank)], {'1'});
    try {
      store->store->wait(keys, timeout);
    } catch (const std::exception&) {
      std::string missing;
      for (int r = 0; r < opts.size; ++r) {
        try {
          store->store->wait({keys[size_t(r)]}, std::chrono::milliseconds(1));
        } catch (const std::exception&) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      return makeError(here + ": rank" + (missing.find(',') == std::string::npos ? " " : "s ") +
                       missing + " never arrived within " +
                       std::to_string(int64_t(opts.timeoutSeconds)) + " s");
    }
    if (opts.device && !opts.device->hostAddressable()) {
#ifdef NETLOOM_WITH_NCCL
      // NCCL's unique id crosses the rendezvous: rank 0 makes it, the others read it.
      const std::string key = "netloom/nccl-id";
      return cuda::connectNccl(
          *opts.device, opts.rank, opts.size,
          [&](const std::string& id) {
            store->store->set(key, {id.begin(), id.end()});
          },
          [&] {
            store->store->wait({key}, timeout);
            std::vector<char> id = store->store->get(key);
            return std::string(id.begin(), id.end());
          });
#else
      return makeError(here + ": this build has no NCCL, which ranks on " +
                       opts.device->id().toString() + " need");
#endif
    }
    gloo::transport::tcp::attr attr(opts.hostname.c_str());
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(opts.rank, opts.size);
    ctx->setTimeout(timeout);
    ctx->connectFullMesh(*store->store, dev);
    return std::unique_ptr<Communicator>(
        std::make_unique<GlooCommunicator>(std::move(ctx), std::move(dev), timeout, store->store));
  } catch (const std::exception& e) {
    return makeError(here + ": could not connect to the other ranks: " + e.what());
  }
#endif
}

}  // namespace netloom
