// The parallel kernels on a GPU (boxing, ZeRO's, the pipelines'), their collectives
// NCCL's on the device's stream, against the same kernels on the CPU. One GPU is
// enough: the communicator is NCCL's with one rank, so every collective runs on the
// device's stream, and each kernel's copies, strided parts and arithmetic are the
// GPU's. (Messages between two GPUs, on the lanes, need two.) Skips, saying why,
// without a GPU or without NCCL.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/parallel/communicator.h"
#include "engine/runtime/devices.h"
#include "kernels/core/device.h"
#include "kernels/core/kernel.h"
#ifdef NETLOOM_WITH_NCCL
#include "kernels/cuda/nccl.h"
#endif

using namespace netloom;

namespace {

struct Tensor {
  Shape shape;
  std::vector<float> values;
};

// One launch of `op`'s first kernel that takes it on `device` (null: the CPU), with
// `comm` as every group of the run; the outputs' values, and the inputs' after it
// (an update writes them).
struct Launched {
  std::vector<std::vector<float>> in, out;
};

Launched launch(Device* device, Communicator& comm, const std::string& op, const Attrs& a,
                const std::vector<Tensor>& in, const std::vector<Shape>& out, std::string& error) {
  Launched got;
  Device& d = device ? *device : cpuDevice();
  const auto* list = KernelRegistry::instance().list(op, d.id().kind);
  if (!list || list->empty()) {
    error = op + ": no kernel";
    return got;
  }
  KernelSig sig;
  sig.attrs = &a;
  sig.device = &d;
  sig.comm = sig.tensorComm = sig.dataComm = sig.stageComm = &comm;
  for (const Tensor& t : in) sig.in.push_back(TensorDesc{t.shape, DType::F32, {}});
  for (const Shape& s : out) sig.out.push_back(TensorDesc{s, DType::F32, {}});
  const KernelImpl& k = list->front();
  if (std::string no = k.decline(sig); !no.empty()) {
    error = op + " declines: " + no;
    return got;
  }
  KernelFn fn = k.prepare(sig);
  std::vector<DeviceBuffer> buffers;
  std::vector<TensorRef> ins, outs;
  for (const Tensor& t : in) {
    buffers.emplace_back(d, int64_t(t.values.size() * 4));
    d.copyToDevice(buffers.back().data(), t.values.data(), int64_t(t.values.size() * 4));
    ins.push_back(TensorRef{buffers.back().data(), t.shape, DType::F32, d.id()});
  }
  for (const Shape& s : out) {
    buffers.emplace_back(d, numel(s) * 4);
    d.fill(buffers.back().data(), 0, numel(s) * 4);
    outs.push_back(TensorRef{buffers.back().data(), s, DType::F32, d.id()});
  }
  StepContext ctx;
  ctx.step = 3;
  ctx.lr = 0.01;
  DeviceStepValues values{ctx.step, ctx.lr, 0, 1.0};
  DeviceBuffer stepValues(d, sizeof values);
  d.copyToDevice(stepValues.data(), &values, sizeof values);
  KernelIO io;
  io.in = ins.data();
  io.out = outs.data();
  io.nin = ins.size();
  io.nout = outs.size();
  io.ctx = &ctx;
  if (device) io.stepValues = static_cast<const DeviceStepValues*>(stepValues.data());
  fn(io);
  auto read = [&](const TensorRef& t) {
    std::vector<float> v(size_t(t.numel()));
    d.copyToHost(v.data(), t.data, t.numel() * 4);
    return v;
  };
  d.synchronize();
  for (const TensorRef& t : ins) got.in.push_back(read(t));
  for (const TensorRef& t : outs) got.out.push_back(read(t));
  d.synchronize();
  return got;
}

std::vector<float> ramp(int64_t n, float from, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = from + step * float(i % 13) - 0.05f * float(i);
  return v;
}

struct Case {
  std::string name, op;
  Attrs attrs;
  std::vector<Tensor> in;
  std::vector<Shape> out;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  const Shape x{4, 6, 2};
  const Tensor t{x, ramp(numel(x), 0.5f, 0.25f)};
  const char* layouts[] = {"S(0)", "S(1)", "S(2)", "B", "P"};
  for (const char* from : layouts)
    for (const char* to : layouts) {
      if (std::string(from) == to) continue;
      auto bare = [](std::string l) {  // "S(1)" as "S1": row names without brackets
        l.erase(std::remove_if(l.begin(), l.end(), [](char ch) { return ch == '(' || ch == ')'; }),
                l.end());
        return l;
      };
      Case c{"boxing " + bare(from) + " to " + bare(to), "Boxing", {}, {t}, {x}};
      c.attrs.set("from", std::string(from));
      c.attrs.set("to", std::string(to));
      c.attrs.set("parts", int64_t(1));
      all.push_back(c);
    }
  const Tensor a{{3, 5}, ramp(15, -1.f, 0.125f)}, b{{7}, ramp(7, 2.f, -0.5f)};
  Case scatter{"ZeRO's reduce-scatter", "ZeroScatter", {}, {a, b}, {{22}}};
  scatter.attrs.set("parts", int64_t(1));
  all.push_back(scatter);
  for (const char* kind : {"adam", "sgd"}) {
    Case u{std::string("ZeRO's update, ") + kind, "ZeroUpdate", {}, {a, b}, {}};
    const Tensor ga{{3, 5}, ramp(15, 0.3f, -0.07f)}, gb{{7}, ramp(7, -0.2f, 0.11f)};
    u.in.push_back(ga);
    u.in.push_back(gb);
    u.in.push_back(Tensor{{22}, ramp(22, 0.01f, 0.002f)});  // the first moment or momentum
    if (std::string(kind) == "adam") u.in.push_back(Tensor{{22}, ramp(22, 0.2f, 0.01f)});
    for (auto& v : u.in.back().values) v = std::fabs(v);  // a second moment is positive
    u.attrs.set("kind", std::string(kind));
    u.attrs.set("params", int64_t(2));
    u.attrs.set("grads", std::string("whole"));
    u.attrs.set("parts", int64_t(1));
    u.attrs.set("beta1", 0.9);
    u.attrs.set("beta2", 0.999);
    u.attrs.set("eps", 1e-8);
    u.attrs.set("weight_decay", 0.01);
    u.attrs.set("decoupled", true);
    u.attrs.set("momentum", 0.9);
    u.attrs.set("nesterov", false);
    u.attrs.set("loss_scaled", false);
    all.push_back(u);
  }
  Case micro{"a micro-batch", "MicroBatch", {}, {t}, {{2, 6, 2}}};
  micro.attrs.set("index", int64_t(1));
  micro.attrs.set("parts", int64_t(2));
  all.push_back(micro);
  Case mean{"the mean over micro-batches", "MicroMean", {}, {}, {{}}};
  for (int k = 0; k < 40; ++k) mean.in.push_back(Tensor{{}, {0.1f * float(k) - 1.f}});
  all.push_back(mean);
  Case meanGrad{"its gradient", "MicroMeanGrad", {}, {Tensor{{}, {3.f}}}, {{}}};
  meanGrad.attrs.set("parts", int64_t(8));
  all.push_back(meanGrad);
  Case tie{"a tied weight's gradient", "PipeTie", {}, {a}, {{3, 5}}};
  tie.attrs.set("stages", std::vector<int64_t>{0});
  tie.attrs.set("tag", int64_t(4));
  all.push_back(tie);
  return all;
}

// NCCL with one rank on the first GPU, as `gpu` and `nccl`; skips where there is none.
struct OneRank {
  Device* gpu = nullptr;
  std::unique_ptr<Communicator> nccl;
  std::string why;
};
OneRank oneRank() {
  OneRank r;
#ifdef NETLOOM_WITH_NCCL
  r.gpu = openDevice(DeviceId{DeviceKind::Cuda, 0}, r.why);
  if (!r.gpu) return r;
  std::string id;
  r.nccl = cuda::connectNccl(
      *r.gpu, 0, 1, [&](const std::string& s) { id = s; }, [&] { return id; });
#else
  r.why = "built without NCCL";
#endif
  return r;
}

#define NEED_NCCL()                                                  \
  OneRank one_ = oneRank();                                          \
  if (!one_.nccl) QSKIP(("no GPU to test on: " + one_.why).c_str()); \
  Device* gpu = one_.gpu;                                            \
  Communicator* nccl = one_.nccl.get()

}  // namespace

class TestGpuParallel : public QObject {
  Q_OBJECT

 private slots:
  void kernelsMatchTheCpu_data() {
    QTest::addColumn<int>("index");
    const auto all = cases();
    for (size_t i = 0; i < all.size(); ++i) QTest::newRow(all[i].name.c_str()) << int(i);
  }
  void kernelsMatchTheCpu() {
    QFETCH(int, index);
    // The CPU's side first, on every machine: each case launches and gives finite values.
    auto host = singleRank();
    const Case c = cases()[size_t(index)];
    std::string error;
    Launched want = launch(nullptr, *host, c.op, c.attrs, c.in, c.out, error);
    QVERIFY2(error.empty(), error.c_str());
    for (const auto& t : want.out)
      for (float v : t) QVERIFY(std::isfinite(v));
    NEED_NCCL();
    Launched got = launch(gpu, *nccl, c.op, c.attrs, c.in, c.out, error);
    QVERIFY2(error.empty(), error.c_str());
    for (auto [g, w] : {std::pair{&got.in, &want.in}, std::pair{&got.out, &want.out}}) {
      QCOMPARE(g->size(), w->size());
      for (size_t t = 0; t < w->size(); ++t) {
        QCOMPARE((*g)[t].size(), (*w)[t].size());
        for (size_t i = 0; i < (*w)[t].size(); ++i)
          QVERIFY2(std::fabs((*g)[t][i] - (*w)[t][i]) <= 1e-6f * (1.f + std::fabs((*w)[t][i])),
                   qPrintable(QString("tensor %1[%2]: cuda %3, cpu %4")
                                  .arg(t)
                                  .arg(i)
                                  .arg((*g)[t][i], 0, 'g', 9)
                                  .arg((*w)[t][i], 0, 'g', 9)));
      }
    }
  }

  // Messages a rank sends itself arrive whole, by tag in the order sent, though the
  // memory sent from is overwritten at once (the device side keeps a copy).
  void messagesToItselfArrive() {
    NEED_NCCL();
    Communicator* on = nccl->onDevice();
    QVERIFY(on != nullptr);
    const int64_t n = 1000;
    std::vector<DeviceBuffer> sent, got;
    for (int k = 0; k < 3; ++k) {
      std::vector<float> v = ramp(n, float(k), 1.f);
      sent.emplace_back(*gpu, n * 4);
      got.emplace_back(*gpu, n * 4);
      gpu->copyToDevice(sent.back().data(), v.data(), n * 4);
    }
    for (int k = 0; k < 3; ++k) on->send(sent[size_t(k)].data(), n * 4, 0, uint32_t(k));
    // Overwritten at once: the sends took their bytes in stream order.
    for (int k = 0; k < 3; ++k) gpu->fill(sent[size_t(k)].data(), 0, n * 4);
    for (int k = 2; k >= 0; --k) on->recv(got[size_t(k)].data(), n * 4, 0, uint32_t(k));
    gpu->synchronize();
    for (int k = 0; k < 3; ++k) {
      std::vector<float> back(static_cast<size_t>(n));
      gpu->copyToHost(back.data(), got[size_t(k)].data(), n * 4);
      gpu->synchronize();
      QCOMPARE(back, ramp(n, float(k), 1.f));
    }
  }
};

QTEST_GUILESS_MAIN(TestGpuParallel)
#include "tst_gpu_parallel.moc"
