// The communicator on real Gloo over TCP, with ranks as threads of this process
// meeting in memory, and the one for ranks that are threads (shared memory): every collective's
// result on every rank, gradient buckets summed while the caller goes on (and again, with the ring
// kept), the ranks that never arrived named, and a rank that leaves failing the others'
// collectives.
#include <QtTest>
#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include "engine/graph/sbp.h"
#include "engine/parallel/communicator.h"
#include "engine/parallel/tcp_store.h"
#include "kernels/core/moves.h"
#include "kernels/core/shard.h"

using namespace netloom;

namespace {

// How the ranks of a test talk: Gloo over TCP, or shared memory (threadRanks).
enum class Transport { Gloo, Shared };

// Runs body(rank, communicator) on `size` ranks, each a thread; returns each rank's
// failure, empty where it passed. A rank's communicator ends with its thread.
std::vector<std::string> onRanks(int size, const std::function<void(int, Communicator&)>& body,
                                 double timeout = 30, Transport transport = Transport::Gloo) {
  auto store = memoryRendezvous();
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Communicator>> shared;
  if (transport == Transport::Shared) shared = threadRanks(size, timeout);
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> mine;
      if (transport == Transport::Shared) {
        mine = std::move(shared[size_t(r)]);
      } else {
        RankOptions o;
        o.rank = r;
        o.size = size;
        o.timeoutSeconds = timeout;
        auto comm = connectRanks(o, store);
        if (!comm) {
          errors[size_t(r)] = comm.error().message;
          return;
        }
        mine = std::move(*comm);
      }
      try {
        body(r, *mine);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

std::string joined(const std::vector<std::string>& errors) {
  std::string s;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) s += "rank " + std::to_string(r) + ": " + errors[r] + "\n";
  return s;
}

// A check inside a rank's thread: throws, so the rank reports it.
void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

}  // namespace

class TestDist : public QObject {
  Q_OBJECT

  static void transports() {
    QTest::addColumn<bool>("shared");
    QTest::newRow("gloo over TCP") << false;
    QTest::newRow("shared memory") << true;
  }

 private slots:
  void collectivesAgreeOnEveryRank_data() { transports(); }
  void collectivesAgreeOnEveryRank() {
    const int size = 3;
    QFETCH(bool, shared);
    auto errors = onRanks(
        size,
        [](int r, Communicator& c) {
          expect(c.rank() == r && c.size() == size, "rank and size");
          std::vector<float> v{float(r), float(r * 10), 1.f};
          c.allreduce(v.data(), 3);
          expect(v == std::vector<float>{3.f, 30.f, 3.f}, "allreduce sum");
          c.allreduce(v.data(), 3, true);
          expect(v == std::vector<float>{3.f, 30.f, 3.f}, "allreduce mean of equal values");
          std::vector<double> d{0.1 * r, 1e300};
          c.allreduce(d.data(), 1);
          expect(std::abs(d[0] - 0.3) < 1e-15 && d[1] == 1e300, "allreduce of doubles, first only");
          int64_t word = r == 1 ? 424242 : -1;
          c.broadcast(&word, sizeof word, 1);
          expect(word == 424242, "broadcast from rank 1");
          int32_t mine = 100 + r;
          std::vector<int32_t> all(size);
          c.allgather(&mine, all.data(), sizeof mine);
          expect(all == std::vector<int32_t>{100, 101, 102}, "allgather in rank order");
          c.barrier();
        },
        30, shared ? Transport::Shared : Transport::Gloo);
    QVERIFY2(joined(errors).empty(), joined(errors).c_str());
  }

  // Sharded state moves: reduce-scatter leaves each rank its block of the sum (in
  // rank order: the same bits on both transports), all-to-all delivers block k of
  // each rank to rank k, and messages go round a ring and arrive in the order sent,
  // the ranks not involved waiting at a barrier. A message to oneself is refused.
  void shardsMoveBetweenRanks_data() {
    QTest::addColumn<bool>("shared");
    QTest::addColumn<int>("size");
    for (int n : {2, 4}) {
      QTest::addRow("gloo over TCP, %d ranks", n) << false << n;
      QTest::addRow("shared memory, %d ranks", n) << true << n;
    }
  }
  void shardsMoveBetweenRanks() {
    QFETCH(bool, shared);
    QFETCH(int, size);
    auto errors = onRanks(
        size,
        [size](int r, Communicator& c) {
          const int64_t count = 5;
          std::vector<float> in(size_t(size * count)), out(count);
          for (int k = 0; k < size; ++k)
            for (int64_t i = 0; i < count; ++i)
              in[size_t(k * count + i)] = 0.1f * float(r) + float(k * 10 + i);
          c.reduceScatter(in.data(), out.data(), count);
          for (int64_t i = 0; i < count; ++i) {
            float want = 0.f;  // summed in rank order, as the transports promise
            for (int q = 0; q < size; ++q) want += 0.1f * float(q) + float(r * 10 + i);
            expect(out[size_t(i)] == want, "reduce-scatter block of rank " + std::to_string(r));
          }
          std::vector<int32_t> blocks(size_t(2 * size)), got(size_t(2 * size));
          for (int k = 0; k < size; ++k)
            blocks[size_t(2 * k)] = r * 10 + k, blocks[size_t(2 * k + 1)] = -r;
          c.alltoall(blocks.data(), got.data(), 2 * sizeof(int32_t));
          for (int k = 0; k < size; ++k)
            expect(got[size_t(2 * k)] == k * 10 + r && got[size_t(2 * k + 1)] == -k,
                   "all-to-all block from rank " + std::to_string(k));

          const int next = (r + 1) % size, prev = (r + size - 1) % size;
          for (int64_t m = 0; m < 3; ++m) {
            const int64_t word = r * 1000 + m;
            c.send(&word, sizeof word, next, 7);
          }
          for (int64_t m = 0; m < 3; ++m) {
            int64_t word = -1;
            c.recv(&word, sizeof word, prev, 7);
            expect(word == prev * 1000 + m, "message " + std::to_string(m) + " round the ring");
          }
          if (r == 0) {
            const double pi = 3.25;
            c.send(&pi, sizeof pi, size - 1, 9);
          } else if (r == size - 1) {
            double got9 = 0;
            c.recv(&got9, sizeof got9, 0, 9);
            expect(got9 == 3.25, "a message between two ranks only");
          }
          c.barrier();
          bool refused = false;
          try {
            c.send(&r, sizeof r, r, 1);
          } catch (const CommError& e) {
            refused = std::string(e.what()).find("rank " + std::to_string(r)) != std::string::npos;
          }
          expect(refused, "a message to oneself refused, naming the rank");
        },
        30, shared ? Transport::Shared : Transport::Gloo);
    QVERIFY2(joined(errors).empty(), joined(errors).c_str());
  }

  // Four ranks as two tensor groups of two (0,1 and 2,3) and two data groups (0,2 and
  // 1,3): each group's collectives see only its members, in their order, and a
  // bucket summed over a group is that group's sum; the groups run side by side.
  void groupsKeepToTheirRanks_data() { transports(); }
  void groupsKeepToTheirRanks() {
    QFETCH(bool, shared);
    auto errors = onRanks(
        4,
        [](int r, Communicator& all) {
          TensorGroups g = tensorGroups(all, 2);
          expect(g.tensor->size() == 2 && g.tensor->rank() == r % 2, "tensor group rank");
          expect(g.data->size() == 2 && g.data->rank() == r / 2, "data group rank");
          for (Communicator* c : {g.tensor.get(), g.data.get()}) {
            const bool tensor = c == g.tensor.get();
            auto world = [&](int k) { return tensor ? r / 2 * 2 + k : r % 2 + 2 * k; };
            float x[2] = {float(r), float(10 * r)};
            c->allreduce(x, 2);
            expect(x[0] == float(world(0) + world(1)) && x[1] == 10 * x[0], "group sum");
            int32_t mine = 100 + r, got[2] = {0, 0};
            c->allgather(&mine, got, sizeof mine);
            expect(got[0] == 100 + world(0) && got[1] == 100 + world(1), "group gather");
            float blocks[2] = {float(r), float(r + 1)}, part = 0;
            c->reduceScatter(blocks, &part, 1);
            const int k = c->rank();
            expect(part == float(world(0) + world(1) + 2 * k), "group reduce-scatter");
            int64_t word = c->rank() == 1 ? 77 + r : 0;
            c->broadcast(&word, sizeof word, 1);
            expect(word == 77 + world(1), "group broadcast from its rank 1");
            std::vector<float> t{float(r), 1.f};
            TensorRef ref{t.data(), {2}, DType::F32, DeviceId{}};
            c->start("b", &ref, 1);
            c->wait("b");
            expect(t[0] == float(world(0) + world(1)) && t[1] == 2.f, "group bucket");
          }
        },
        30, shared ? Transport::Shared : Transport::Gloo);
    QVERIFY2(joined(errors).empty(), joined(errors).c_str());
  }

  // The link a plan's cost model reads: measured on a tensor group's ranks, the same
  // figures on each (so that they plan alike), positive and finite; ranks only planned
  // for are never measured (any collective of theirs throws).
  void linksAreMeasuredAlike_data() { transports(); }
  void linksAreMeasuredAlike() {
    QFETCH(bool, shared);
    std::vector<LinkCost> links(4);
    auto errors = onRanks(
        4,
        [&links](int r, Communicator& all) {
          TensorGroups g = tensorGroups(all, 2);
          links[size_t(r)] = measureLink(*g.tensor);
          expect(g.tensor->link().measured && !g.data->link().measured, "the tensor group's");
        },
        30, shared ? Transport::Shared : Transport::Gloo);
    QVERIFY2(joined(errors).empty(), joined(errors).c_str());
    for (int r = 0; r < 4; ++r) {
      const LinkCost& l = links[size_t(r)];
      qInfo("rank %d: %s", r, l.describe().c_str());
      QVERIFY(l.measured && std::isfinite(l.latencySeconds) && std::isfinite(l.bytesPerSecond));
      QVERIFY(l.latencySeconds > 0 && l.bytesPerSecond > 0);
      const LinkCost& peer = links[size_t(r ^ 1)];  // the other member of its group
      QCOMPARE(l.latencySeconds, peer.latencySeconds);
      QCOMPARE(l.bytesPerSecond, peer.bytesPerSecond);
    }
    auto planned = planningRanks(4);
    TensorGroups g = tensorGroups(*planned, 2);
    QVERIFY(!measureLink(*g.tensor).measured);
  }

  // A part along each axis of a 4×6×2 tensor, and each of its bytes' worth (2- and
  // 8-byte elements too), taken out and put back by strided copies through a device
  // (Device::copyRows, as a GPU does them): the same bytes as the host's loops.
  void partsMoveAlikeThroughADevice() {
    const Moves device = Moves::through(cpuDevice()), host(nullptr);
    QVERIFY(!device.onHost() && host.onHost());
    const Shape whole{4, 6, 2};
    for (size_t elem : {size_t(2), size_t(4), size_t(8)})
      for (int axis = 0; axis < 3; ++axis)
        for (int parts : {1, 2}) {
          std::vector<char> x(size_t(numel(whole)) * elem);
          for (size_t i = 0; i < x.size(); ++i) x[i] = char(i * 7 + 3);
          for (int k = 0; k < parts; ++k) {
            const size_t n = x.size() / size_t(parts);
            std::vector<char> a(n, 0), b(n, 1);
            device.takePart(x.data(), whole, axis, k, parts, a.data(), elem);
            host.takePart(x.data(), whole, axis, k, parts, b.data(), elem);
            QCOMPARE(a, b);
            std::vector<char> back(x.size(), 0), hostBack(x.size(), 0);
            device.putPart(a.data(), whole, axis, k, parts, back.data(), elem);
            host.putPart(b.data(), whole, axis, k, parts, hostBack.data(), elem);
            QCOMPARE(back, hostBack);
          }
        }
    // Scratch through the device is its memory: written and read like any.
    std::shared_ptr<char> s = device.scratch(64);
    QVERIFY(s != nullptr);
    device.zero(s.get(), 64);
    QCOMPARE(int(s.get()[63]), 0);
  }

  // Every boxing between B, P and a split on each even axis of a 4×6 and a 2×4×2×3
  // tensor, on 2 ranks: each rank's
  // part of the output is what the layout says of the whole (Boxing's kernel).
  void boxingMovesEveryLayout_data() { transports(); }
  void boxingMovesEveryLayout() {
    QFETCH(bool, shared);
    for (const Shape& whole : {Shape{4, 6}, Shape{2, 4, 2, 3}}) {
      std::vector<float> x(size_t(numel(whole)));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) + 0.5f;
      std::vector<Sbp> layouts{Sbp::broadcast(), Sbp::partial()};
      for (int axis = 0; axis < int(whole.size()); ++axis)
        if (whole[size_t(axis)] % 2 == 0) layouts.push_back(Sbp::split(axis));
      auto errors = onRanks(
          2,
          [&](int r, Communicator& c) {
            // This rank's part of x laid out as `l` (a partial: rank 0 holds x − 1, rank 1 one).
            auto part = [&](const Sbp& l) {
              if (l.kind == Sbp::Kind::Broadcast) return x;
              if (l.kind == Sbp::Kind::Partial) {
                std::vector<float> p = x;
                for (float& v : p) v = r == 0 ? v - 1.f : 1.f;
                return p;
              }
              std::vector<float> p(x.size() / 2);
              takePart(x.data(), whole, l.axis, r, 2, p.data(), sizeof(float));
              return p;
            };
            const auto* kernels = KernelRegistry::instance().list("Boxing", DeviceKind::Cpu);
            expect(kernels && !kernels->empty(), "a Boxing kernel");
            for (const Sbp& from : layouts)
              for (const Sbp& to : layouts) {
                if (from == to) continue;
                Attrs a;
                a.set("from", from.str());
                a.set("to", to.str());
                a.set("parts", int64_t(2));
                std::vector<float> in = part(from), want = part(to), out(want.size(), -9.f);
                KernelSig sig;
                sig.attrs = &a;
                sig.in = {TensorDesc{*localShape(whole, from, 2), DType::F32, {}}};
                sig.out = {TensorDesc{*localShape(whole, to, 2), DType::F32, {}}};
                sig.tensorComm = &c;
                KernelFn fn = kernels->front().prepare(sig);
                TensorRef i{in.data(), sig.in[0].shape, DType::F32, DeviceId{}};
                TensorRef o{out.data(), sig.out[0].shape, DType::F32, DeviceId{}};
                KernelIO io;
                io.in = &i;
                io.out = &o;
                io.nin = io.nout = 1;
                fn(io);
                if (to.kind == Sbp::Kind::Partial) {  // the parts must sum to x
                  std::vector<float> sum(out.size());
                  std::vector<float> both(2 * out.size());
                  c.allgather(out.data(), both.data(), int64_t(out.size() * sizeof(float)));
                  for (size_t k = 0; k < out.size(); ++k) sum[k] = both[k] + both[k + out.size()];
                  expect(sum == x, from.str() + " -> P: the parts sum to the whole");
                } else {
                  expect(out == want, shapeToString(whole) + ": " + from.str() + " -> " + to.str());
                }
              }
          },
          30, shared ? Transport::Shared : Transport::Gloo);
      QVERIFY2(joined(errors).empty(), joined(errors).c_str());
    }
  }

  // Two tensors of a bucket summed in place on the communication thread; the same
  // bucket again with other values (and other addresses) reuses its ring.
  void bucketsAreSummedWhileTheCallerGoesOn_data() { transports(); }
  void bucketsAreSummedWhileTheCallerGoesOn() {
    QFETCH(bool, shared);
    auto errors = onRanks(
        2,
        [](int r, Communicator& c) {
          for (int round = 0; round < 3; ++round) {
            std::vector<float> a(1000, float(r + round)), b(37, float(10 * r));
            std::vector<TensorRef> grads{TensorRef{a.data(), {1000}, DType::F32, DeviceId{}},
                                         TensorRef{b.data(), {37}, DType::F32, DeviceId{}}};
            c.start("fc", grads.data(), grads.size());
            std::vector<float> other{float(r)};
            c.wait("fc");
            c.allreduce(other.data(), 1);  // a blocking call after the bucket, in order
            expect(a == std::vector<float>(1000, float(1 + 2 * round)), "bucket tensor a");
            expect(b == std::vector<float>(37, 10.f), "bucket tensor b");
            expect(other[0] == 1.f, "allreduce after the bucket");
          }
          CommStats s = c.stats();
          expect(s.buckets == 3 && s.bytes == 3 * 1037 * 4, "bucket statistics");
          expect(s.waitedSeconds <= s.bucketSeconds + 1.0, "waited no longer than summed");
        },
        30, shared ? Transport::Shared : Transport::Gloo);
    QVERIFY2(joined(errors).empty(), joined(errors).c_str());
  }

  void missingRanksAreNamed() {
    auto store = memoryRendezvous();
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r : {0, 2})  // rank 1 of 3 never comes
      threads.emplace_back([&, r] {
        RankOptions o;
        o.rank = r;
        o.size = 3;
        o.timeoutSeconds = 0.5;
        auto comm = connectRanks(o, store);
        errors[r == 0 ? 0 : 1] = comm ? "connected" : comm.error().message;
      });
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors)
      QVERIFY2(e.find("rank 1 never arrived within") != std::string::npos, e.c_str());
  }

  void aRankThatLeavesFailsTheOthers_data() { transports(); }
  void aRankThatLeavesFailsTheOthers() {
    QFETCH(bool, shared);
    std::atomic<bool> left{false};
    auto errors = onRanks(
        2,
        [&](int r, Communicator& c) {
          std::vector<float> v{1.f};
          c.allreduce(v.data(), 1);  // both connected and working
          if (r == 1) {
            left = true;
            return;  // rank 1 ends: its communicator closes its connections
          }
          while (!left) std::this_thread::yield();
          c.allreduce(v.data(), 1);
        },
        20, shared ? Transport::Shared : Transport::Gloo);
    QVERIFY(errors[1].empty());
    QVERIFY2(errors[0].find("allreduce across the ranks failed") != std::string::npos,
             errors[0].c_str());
    if (shared)
      QVERIFY2(errors[0].find("rank 1 left the job") != std::string::npos, errors[0].c_str());
  }

  // Ranks that are threads sum slices of every buffer in rank order, so all get the
  // same bits even where the order matters (1e8 + 1 - 1e8); a bucket's slices cross
  // its tensors' edges; a rank nobody meets fails after the timeout, naming itself;
  // a bucket waited for without a start is an error.
  void sharedMemoryRanksAgreeBitForBit() {
    const int size = 3;
    std::vector<std::vector<float>> got(size);
    auto errors = onRanks(
        size,
        [&](int r, Communicator& c) {
          const float mine[3] = {1e8f, 1.f, -1e8f};
          std::vector<float> v(101, mine[r]);
          c.allreduce(v.data(), int64_t(v.size()));
          std::vector<float> a(5, float(r + 1)), b(2, float(r)), d(7, 1.f);
          std::vector<TensorRef> bucket{TensorRef{a.data(), {5}, DType::F32, DeviceId{}},
                                        TensorRef{b.data(), {2}, DType::F32, DeviceId{}},
                                        TensorRef{d.data(), {7}, DType::F32, DeviceId{}}};
          c.start("b", bucket.data(), bucket.size());
          c.wait("b");
          expect(a == std::vector<float>(5, 6.f) && b == std::vector<float>(2, 3.f) &&
                     d == std::vector<float>(7, 3.f),
                 "bucket across tensor edges");
          bool threw = false;
          try {
            c.wait("never started");
          } catch (const CommError&) {
            threw = true;
          }
          expect(threw, "a wait without a start");
          got[size_t(r)] = v;
        },
        30, Transport::Shared);
    QVERIFY2(joined(errors).empty(), joined(errors).c_str());
    QCOMPARE(got[1], got[0]);
    QCOMPARE(got[2], got[0]);
    QCOMPARE(got[0][0], (1e8f + 1.f) + -1e8f);  // rank order: 0, 1, 2

    auto alone = threadRanks(2, 0.2);
    try {
      alone[0]->barrier();  // rank 1 never comes
      QFAIL("a barrier without rank 1 returned");
    } catch (const CommError& e) {
      QVERIFY2(
          std::string(e.what()).find("rank 0 waited 0.2 s for the others") != std::string::npos,
          e.what());
    }
    // A message from a rank that left is not waited for; one from a rank that is
    // there but silent times out, naming it.
    auto pair = threadRanks(3, 0.2);
    pair[1].reset();
    int64_t word = 0;
    try {
      pair[0]->recv(&word, sizeof word, 1, 3);
      QFAIL("a message from a rank that left arrived");
    } catch (const CommError& e) {
      QVERIFY2(std::string(e.what()).find("rank 1 left the job") != std::string::npos, e.what());
    }
    try {
      pair[0]->recv(&word, sizeof word, 2, 3);
      QFAIL("a message never sent arrived");
    } catch (const CommError& e) {
      QVERIFY2(std::string(e.what()).find("receiving from rank 2 timed out") != std::string::npos,
               e.what());
    }
  }

  // Ranks on several hosts meet at rank 0's TCP store: it picks a free port and says
  // it in a file; the others present the job's secret, and a stranger is turned away.
  void tcpRendezvousAdmitsOnlyTheJob() {
    QTemporaryDir dir;
    const std::string portFile = dir.filePath("rendezvous.port").toStdString();
    auto zero = tcpRendezvous("127.0.0.1", 0, 0, "s3cret-of-this-job", portFile, 10);
    QVERIFY2(zero.ok(), zero.ok() ? "" : zero.error().message.c_str());
    QFile f(QString::fromStdString(portFile));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const int port = f.readAll().trimmed().toInt();
    QVERIFY(port > 0);
    auto stranger = tcpRendezvous("127.0.0.1", port, 1, "a-guess", "", 2);
    QVERIFY(!stranger.ok());
    QVERIFY2(stranger.error().message.find("not the job's secret") != std::string::npos,
             stranger.error().message.c_str());
    auto one = tcpRendezvous("127.0.0.1", port, 1, "s3cret-of-this-job", "", 10);
    QVERIFY2(one.ok(), one.ok() ? "" : one.error().message.c_str());
    std::vector<std::string> errors(2);
    std::vector<float> sums(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        RankOptions o;
        o.rank = r;
        o.size = 2;
        o.timeoutSeconds = 20;
        auto comm = connectRanks(o, r == 0 ? *zero : *one);
        if (!comm) {
          errors[size_t(r)] = comm.error().message;
          return;
        }
        float v = float(r + 1);
        (*comm)->allreduce(&v, 1);
        sums[size_t(r)] = v;
      });
    for (std::thread& t : threads) t.join();
    QVERIFY2(joined(errors).empty(), joined(errors).c_str());
    QCOMPARE(sums, (std::vector<float>{3.f, 3.f}));
  }

  // A wait is answered by the server when the key is set (before the wait or during
  // it), a key never set is answered "not set" at the deadline, and a server that
  // stops answers its waiters instead of holding them for the minute they asked.
  void tcpStoreWaitIsAnsweredWhenTheKeyIsSet() {
    auto server = TcpStoreServer::start("127.0.0.1", 0, "k");
    QVERIFY(server.ok());
    const int port = (*server)->port();
    auto waiter = TcpStoreClient::connect("127.0.0.1", port, "k", std::chrono::seconds(10));
    auto setter = TcpStoreClient::connect("127.0.0.1", port, "k", std::chrono::seconds(10));
    QVERIFY(waiter.ok() && setter.ok());
    std::promise<void> waiting;
    Result<bool> got = false;
    std::thread t([&] {
      waiting.set_value();
      got = (*waiter)->wait("late", std::chrono::seconds(60));
    });
    waiting.get_future().wait();
    QVERIFY((*setter)->set("late", {'1'}).ok());
    t.join();
    QVERIFY(got.ok() && *got);
    auto never = (*waiter)->wait("never", std::chrono::milliseconds(30));
    QVERIFY(never.ok() && !*never);
    std::thread stopper([&] { server->reset(); });
    auto stopped = (*setter)->wait("never", std::chrono::seconds(60));
    stopper.join();
    QVERIFY(!stopped.ok() || !*stopped);
  }

  void badRanksAreRefused() {
    RankOptions o;
    o.rank = 2;
    o.size = 2;
    auto c = connectRanks(o, memoryRendezvous());
    QVERIFY(!c.ok());
    QVERIFY2(c.error().message.find("rank 2 of 2 does not exist") != std::string::npos,
             c.error().message.c_str());
    o.rank = 0;
    o.size = 1;
    auto one = connectRanks(o, memoryRendezvous());
    QVERIFY(one.ok());
    float x = 5;
    (*one)->allreduce(&x, 1, true);
    QCOMPARE(x, 5.f);
  }
};

QTEST_APPLESS_MAIN(TestDist)
#include "tst_parallel.moc"
