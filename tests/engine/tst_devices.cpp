// The device seam on the CPU: device names and lists, what a missing GPU says, the
// CPU device's copies, batches and scalars crossing through the feeder, plans made
// without allocating, and the fit check that --explain prints.
#include <omp.h>

#include <QtTest>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include "../common/cli.h"
#include "../common/fashion.h"
#include "async_device.h"
#include "engine/compiler/compile.h"
#include "engine/io/project_file.h"
#include "engine/runtime/devices.h"
#include "engine/runtime/feeder.h"
#include "engine/train/trainer.h"
#include "kernels/core/device.h"
#include "kernels/core/kernel.h"
#include "kernels/cpu/cpu_util.h"

using namespace netloom;

namespace {

using netloom::testing::Outcome;
using netloom::testing::runTrain;

QString projectPath(const char* name) {
  return QString(NETLOOM_SOURCE_DIR) + "/projects/" + name;
}

// A project, its Fashion-MNIST files taken from NETLOOM_FASHION_DIR.
proto::Project load(const char* name) {
  auto p = loadProject(projectPath(name).toStdString());
  return p.ok() ? netloom::testing::withFashionDir(*p) : proto::Project{};
}

// Why this machine has no CUDA device, or empty when it has one.
std::string noGpuReason() {
  const Backend* cuda = findBackend(DeviceKind::Cuda);
  if (!cuda) return "no CUDA backend";
  DeviceProbe p = cuda->probe();
  return p.devices.empty() ? p.unavailable : std::string();
}

}  // namespace

class TestDevices : public QObject {
  Q_OBJECT

 private slots:
  void deviceNamesParse_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<bool>("ok");
    QTest::addColumn<QString>("canonical");
    QTest::newRow("cpu") << "cpu" << true << "cpu";
    QTest::newRow("cuda") << "cuda" << true << "cuda:0";
    QTest::newRow("cuda:3") << "cuda:3" << true << "cuda:3";
    QTest::newRow("cpu:1") << "cpu:1" << false << "";
    QTest::newRow("gpu") << "gpu" << false << "";
    QTest::newRow("cuda:") << "cuda:" << false << "";
    QTest::newRow("cuda:-1") << "cuda:-1" << false << "";
    QTest::newRow("cuda:1x") << "cuda:1x" << false << "";
    QTest::newRow("cuda:99999") << "cuda:99999" << false << "";
    QTest::newRow("empty") << "" << false << "";
  }
  void deviceNamesParse() {
    QFETCH(QString, text);
    QFETCH(bool, ok);
    QFETCH(QString, canonical);
    DeviceId id;
    std::string why = parseDeviceId(text.toStdString(), id);
    QCOMPARE(why.empty(), ok);
    if (ok) QCOMPARE(QString::fromStdString(id.toString()), canonical);
    if (!ok) QVERIFY2(why.find('\'' + text.toStdString() + '\'') != std::string::npos, why.c_str());
  }

  // Every kind of device has a line: the CPU always, a GPU or the reason for none.
  void listSaysWhyThereIsNoGpu() {
    std::string list = listDevices();
    QVERIFY2(list.rfind("cpu: ", 0) == 0, list.c_str());
    std::string why = noGpuReason();
    if (why.empty()) {
      QVERIFY2(list.find("\ncuda:0: ") != std::string::npos, list.c_str());
    } else {
      QVERIFY2(list.find("cuda: none (" + why + ")") != std::string::npos, list.c_str());
#ifdef NETLOOM_WITH_CUDA
      QVERIFY(why != "built without CUDA");
#else
      QCOMPARE(QString::fromStdString(why), QString("built without CUDA"));
#endif
    }
    auto listed = parseDeviceList(list);
    QVERIFY(!listed.empty());
    QCOMPARE(QString::fromStdString(listed[0].id), QString("cpu"));
    for (const ListedDevice& d : listed) QVERIFY(d.label.rfind("none (", 0) != 0);
  }

  void cliListsDevicesAndRefusesAMissingGpu() {
    Outcome list = runTrain({"--list-devices"});
    QCOMPARE(list.code, 0);
    QVERIFY2(list.out.startsWith("cpu: "), qPrintable(list.out));
    std::string why = noGpuReason();
    if (!why.empty()) {
      Outcome run = runTrain({projectPath("spirals.nlproj"), "--devices", "cuda:0", "--quiet"});
      QCOMPARE(run.code, 2);
      QVERIFY2(run.err.contains(QString::fromStdString("cuda:0 is not available: " + why)),
               qPrintable(run.err));
      // The project's own train.device says the same under its name.
      auto p = load("spirals.nlproj");
      p.mutable_train()->set_device("cuda:0");
      TrainOptions o;
      o.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
      auto r = runTraining(p, o, [](const proto::TrainEvent&) {});
      QVERIFY(!r.ok());
      QCOMPARE(r.error().kind, ErrorKind::Refused);
      QVERIFY2(r.error().message.find("train.device: cuda:0 is not available: " + why) !=
                   std::string::npos,
               r.error().message.c_str());
    }
    Outcome bad = runTrain({projectPath("spirals.nlproj"), "--devices", "tpu:0"});
    QCOMPARE(bad.code, 2);
    QVERIFY2(bad.err.contains("unknown device 'tpu:0'"), qPrintable(bad.err));
    // A GPU index past the last one names how many there are.
    Outcome far = runTrain({projectPath("spirals.nlproj"), "--devices", "cuda:97", "--quiet"});
    QCOMPARE(far.code, 2);
    QVERIFY2(far.err.contains("cuda:97 is not available"), qPrintable(far.err));
  }

  // Every op the CPU runs has a CUDA kernel: nothing falls back to the CPU. (Reorder
  // converts to and from the CPU's blocked layouts, which plans on a GPU never use.)
  void everyOpHasACudaKernel() {
#ifndef NETLOOM_WITH_CUDA
    QSKIP("built without CUDA");
#else
    const KernelRegistry& r = KernelRegistry::instance();
    for (const std::string& op : r.ops(DeviceKind::Cpu)) {
      if (op == "Reorder") continue;
      const auto* cuda = r.list(op, DeviceKind::Cuda);
      QVERIFY2(cuda && !cuda->empty(), ("no CUDA kernel for " + op).c_str());
    }
#endif
  }

  void cpuDeviceCopiesAndFills() {
    Device& cpu = cpuDevice();
    QVERIFY(cpu.hostAddressable());
    QCOMPARE(cpu.id(), DeviceId{});
    DeviceInfo info = cpu.info();
    QVERIFY(!info.name.empty());
    QVERIFY(info.totalBytes > 0 && info.freeBytes > 0 && info.freeBytes <= info.totalBytes);
    QVERIFY(cpu.memoryInUse() > 0);
    DeviceBuffer a(cpu, 1000), b(cpu, 1000);
    QVERIFY(a.ok() && b.ok());
    QCOMPARE(reinterpret_cast<uintptr_t>(a.data()) % 64, uintptr_t(0));
    cpu.fill(a.data(), 0x3f, 1000);
    cpu.copyWithin(b.data(), a.data(), 1000);
    std::vector<uint8_t> host(1000);
    cpu.copyToHost(host.data(), b.data(), 1000);
    QVERIFY(std::all_of(host.begin(), host.end(), [](uint8_t v) { return v == 0x3f; }));
    std::vector<float> values{1.5f, -2.f, 3.25f};
    writeFloats(cpu, a.data(), values.data(), 3);
    QCOMPARE(readFloats(cpu, a.data(), 3), values);
    DeviceBuffer moved = std::move(a);
    QVERIFY(moved.ok() && !a.ok());
    QCOMPARE(moved.bytes(), int64_t(1000));
    std::string why;
    QVERIFY(!cpu.capture([] {}, why));
    QVERIFY(!why.empty());
  }

  // Copies large enough to be shared between threads, of sizes that are no whole
  // number of floats, land byte for byte on 1 to 3 threads.
  void cpuCopiesSharedBetweenThreadsLandWhole() {
    Device& cpu = cpuDevice();
    const int before = omp_get_max_threads();
    for (int threads : {1, 2, 3})
      for (int64_t bytes : {int64_t(3), int64_t(1) << 19, (int64_t(1) << 19) + 7}) {
        omp_set_num_threads(threads);
        std::vector<uint8_t> src(static_cast<size_t>(bytes));
        std::vector<uint8_t> dst(static_cast<size_t>(bytes) + 1, 0xee);
        for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
        cpu.copyToDevice(dst.data(), src.data(), bytes);
        QVERIFY2(std::memcmp(dst.data(), src.data(), size_t(bytes)) == 0,
                 qPrintable(QString("%1 bytes on %2 threads").arg(bytes).arg(threads)));
        QCOMPARE(dst.back(), uint8_t(0xee));  // nothing past the end
      }
    omp_set_num_threads(before);
  }

  // The per-step finite check: a NaN or infinity anywhere in any tensor is found,
  // at the first or last element of a tensor shared between threads, in a small one;
  // the largest floats, subnormals and -0 are finite.
  void cpuFindsEveryNonFiniteElement() {
    Device& cpu = cpuDevice();
    const int before = omp_get_max_threads();
    omp_set_num_threads(2);
    const int64_t big = 100003;
    std::vector<float> a(size_t(big), 1.f), b(7, -0.f);
    a[5] = std::numeric_limits<float>::max();
    a[6] = -std::numeric_limits<float>::denorm_min();
    b[3] = std::numeric_limits<float>::lowest();
    std::vector<TensorRef> tensors{{a.data(), Shape{big}, DType::F32, {}},
                                   {b.data(), Shape{7}, DType::F32, {}}};
    QVERIFY(cpu.allFinite(tensors));
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()})
      for (auto [v, at] : {std::pair{&a, size_t(0)},
                           {&a, size_t(big - 1)},
                           {&a, size_t(big / 2)},
                           {&b, size_t(6)}}) {
        const float kept = (*v)[at];
        (*v)[at] = bad;
        QVERIFY2(!cpu.allFinite(tensors), qPrintable(QString("%1 at %2").arg(bad).arg(at)));
        QVERIFY(!std::isfinite(cpu.sumOfSquares(tensors)));
        (*v)[at] = kept;
      }
    QVERIFY(cpu.allFinite(tensors));
    omp_set_num_threads(before);
  }

  // Each thread's part of an element-wise loop starts on a 64-byte line, and the
  // parts cover every element once, whatever the count of elements and threads.
  void elementRangesStartOnLines() {
    const int before = omp_get_max_threads();
    for (int threads : {2, 3, 4})
      for (int64_t n : {int64_t(32768), int64_t(100003), int64_t(235146)}) {
        omp_set_num_threads(threads);
        std::vector<int> hits(size_t(n), 0);
        std::vector<int64_t> starts;
        std::mutex m;
        cpu::parallelForElements(n, [&](int64_t lo, int64_t hi) {
          std::lock_guard lock(m);
          starts.push_back(lo);
          for (int64_t i = lo; i < hi; ++i) ++hits[size_t(i)];
        });
        QVERIFY(starts.size() > 1);
        for (int64_t lo : starts) QCOMPARE(lo % 16, int64_t(0));
        QVERIFY(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
      }
    omp_set_num_threads(before);
  }

  // The feeder and the scalar ring on the CPU: batches land in the inputs, and each
  // step's scalars are read as it is recorded.
  void feederAndRingOnTheCpu() {
    auto p = load("spirals.nlproj");
    CompileOptions o;
    o.batch = 4;
    ParamStore store;
    auto prog = compile(p.model(), o, store);
    QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
    Program& pr = **prog;
    Batch b;
    b.size = 4;
    b.x = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    b.labels = {0, 1, 1, 0};
    b.labelFloats = {0, 1, 1, 0};
    BatchFeeder feeder(store.device());
    feeder.stage(b);
    feeder.bind(pr, b);
    QCOMPARE(readFloats(store.device(), pr.input("x")->data, 8), b.x);
    QCOMPARE(std::memcmp(pr.input("label")->data, b.labels.data(), 16), 0);
    ScalarRing ring(store.device(), 1, 16);
    StepContext ctx;
    ctx.step = 1;
    ctx.lr = 0.01;
    pr.run(ctx);
    ring.record(pr, {pr.loss});
    QVERIFY(ring.full());  // one step at a time where the host reads the device directly
    std::vector<float> got = ring.drain();
    QCOMPARE(got.size(), size_t(1));
    QCOMPARE(got[0], pr.scalar(pr.loss));
    QCOMPARE(ring.pending(), int64_t(0));
  }

  // The run says where it trains, and how much memory is in use there as it goes.
  void runReportsItsDeviceAndMemory() {
    auto p = load("spirals.nlproj");
    TrainOptions o;
    o.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
    o.maxSteps = 5;
    std::vector<proto::TrainEvent> events;
    auto r = runTraining(p, o, [&](const proto::TrainEvent& e) { events.push_back(e); });
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    QVERIFY(events.front().has_run_started());
    const proto::RunStarted& rs = events.front().run_started();
    QCOMPARE(rs.device(), std::string("cpu"));
    QVERIFY(!rs.device_name().empty());
    QVERIFY(rs.device_memory_total() > 0);
    QCOMPARE(r->device, std::string("cpu"));
    QVERIFY(r->issueSeconds > 0 && r->issueSeconds <= r->trainSeconds);
    const proto::Step* first = nullptr;
    for (const auto& e : events)
      if (e.has_step() && !first) first = &e.step();
    QVERIFY(first);
    QVERIFY(first->device_memory_used() > 0);  // the first step reports, then once a second
    QVERIFY(first->device_memory_used() < rs.device_memory_total());
  }

  // Every GPU path of the trainer (staged, double-buffered batches; scalars read back
  // every 16 steps; values copied out for checks, checkpoints and evaluation) on a
  // device that keeps a GPU's rules but runs the CPU's kernels: the same losses,
  // metrics and weights as the CPU, bit for bit.
  void asynchronousDeviceTrainsAsTheCpu_data() {
    QTest::addColumn<QString>("project");
    QTest::addColumn<int>("checkEvery");
    QTest::newRow("mlp, every step checked") << "spirals.nlproj" << 0;
    QTest::newRow("mlp, unchecked") << "spirals.nlproj" << -1;
    if (QFile::exists(QString(NETLOOM_FASHION_DIR) + "/train-images-idx3-ubyte.gz"))
      QTest::newRow("lenet, unchecked") << "fashion-lenet.nlproj" << -1;
  }
  void asynchronousDeviceTrainsAsTheCpu() {
    QFETCH(QString, project);
    QFETCH(int, checkEvery);
    QTemporaryDir dir;
    auto p = load(project.toStdString().c_str());
    p.mutable_train()->set_check_finite_every(checkEvery);
    p.mutable_train()->mutable_checkpoint()->set_every_steps(10);
    p.mutable_data()->set_train_limit(1280);
    p.mutable_data()->set_test_limit(300);
    p.mutable_data()->set_validation_fraction(0.1);
    struct Outcome {
      std::vector<std::string> steps, epochs;  // the events, as text
      std::vector<std::string> warnings;
      QByteArray weights;
      Result<TrainSummary> result = makeError("not run");
    };
    auto train = [&](Device* device, const QString& name) {
      Outcome out;
      TrainOptions o;
      o.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
      o.maxSteps = 45;  // past two read-backs and a checkpoint, ending mid-window
      o.threads = 1;
      o.device = device;
      o.checkpointDir = dir.filePath(name + "-ck").toStdString();
      o.saveWeights = dir.filePath(name + ".safetensors").toStdString();
      out.result = runTraining(p, o, [&](const proto::TrainEvent& e) {
        proto::TrainEvent kept = e;
        if (kept.has_step()) {
          kept.clear_time();
          kept.mutable_step()->clear_samples_per_sec();
          kept.mutable_step()->clear_seconds();
          kept.mutable_step()->clear_device_memory_used();
          out.steps.push_back(kept.ShortDebugString());
        }
        if (kept.has_log() && kept.log().level() == proto::Log::WARNING)
          out.warnings.push_back(kept.log().text());
        if (kept.has_epoch()) {
          kept.clear_time();
          kept.mutable_epoch()->clear_seconds();
          kept.mutable_epoch()->clear_run_seconds();
          out.epochs.push_back(kept.ShortDebugString());
        }
      });
      QFile f(QString::fromStdString(o.saveWeights));
      if (f.open(QIODevice::ReadOnly)) out.weights = f.readAll();
      return out;
    };
    testing::AsyncHostDevice async;
    Outcome cpu = train(nullptr, "cpu"), gpuLike = train(&async, "async");
    QVERIFY2(cpu.result.ok(), cpu.result.ok() ? "" : cpu.result.error().message.c_str());
    QVERIFY2(gpuLike.result.ok(),
             gpuLike.result.ok() ? "" : gpuLike.result.error().message.c_str());
    QCOMPARE(int(gpuLike.steps.size()), 45);
    QCOMPARE(gpuLike.steps, cpu.steps);
    QCOMPARE(gpuLike.epochs, cpu.epochs);
    QVERIFY(!cpu.weights.isEmpty());
    QVERIFY(gpuLike.weights == cpu.weights);
    QCOMPARE(gpuLike.result->testLoss, cpu.result->testLoss);
    QVERIFY(async.synchronizations > 0);
    // A step the device cannot record is said once, and launched kernel by kernel.
    QVERIFY(cpu.warnings.empty());
    QVERIFY(!gpuLike.warnings.empty());
    std::set<std::string> distinct(gpuLike.warnings.begin(), gpuLike.warnings.end());
    QCOMPARE(distinct.size(), gpuLike.warnings.size());
    QVERIFY2(gpuLike.warnings[0].find("could not be recorded as a CUDA Graph (the test device "
                                      "records nothing)") != std::string::npos,
             gpuLike.warnings[0].c_str());
    // Its checkpoint resumes on the CPU, to the CPU's own weights.
    TrainOptions resume;
    resume.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
    resume.maxSteps = 45;
    resume.threads = 1;
    auto ck = dir.filePath("async-ck").toStdString();
    resume.resume = ck;
    resume.checkpointDir = dir.filePath("resumed-ck").toStdString();
    resume.saveWeights = dir.filePath("resumed.safetensors").toStdString();
    auto again = runTraining(p, resume, [](const proto::TrainEvent&) {});
    QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
    QFile f(QString::fromStdString(resume.saveWeights));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(f.readAll() == cpu.weights);
  }

  // A plan made without allocating plans what the real one allocates.
  void planOnlyMatchesTheRealPlan() {
    auto p = load("fashion-lenet.nlproj");
    for (int64_t batch : {1, 7, 64}) {
      CompileOptions o;
      o.batch = batch;
      o.optimizer = p.train().optimizer();
      ParamStore real, scratch;
      auto full = compile(p.model(), o, real);
      QVERIFY2(full.ok(), full.ok() ? "" : full.error().message.c_str());
      o.planOnly = true;
      auto planned = compile(p.model(), o, scratch);
      QVERIFY2(planned.ok(), planned.ok() ? "" : planned.error().message.c_str());
      QCOMPARE((*planned)->arenaBytes, (*full)->arenaBytes);
      QVERIFY(scratch.entries().empty());
      int64_t stored = 0;
      for (const auto& e : real.entries()) stored += e->numel() * 4;
      QCOMPARE((*planned)->persistentBytes, stored);
      QCOMPARE((*full)->persistentBytes, stored);
    }
  }

  // --explain gives the largest batch that fits; a run at that batch is planned, one
  // sample more is refused naming the three largest tensors.
  void explainGivesTheLargestBatchThatFits() {
    auto p = load("fashion-mlp.nlproj");
    p.mutable_data()->set_train_limit(20000);
    p.mutable_data()->set_test_limit(500);
    TrainOptions o;
    o.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
    o.memoryLimit = int64_t(112) << 20;
    auto text = explainTraining(p, o);
    QVERIFY2(text.ok(), text.ok() ? "" : text.error().message.c_str());
    const std::string key = "the largest batch that fits: ";
    auto at = text->find(key);
    QVERIFY2(at != std::string::npos, text->c_str());
    int64_t largest = std::stoll(text->substr(at + key.size()));
    QVERIFY2(largest > 1 && largest < 20000, text->c_str());  // below the set: no clamping
    QVERIFY(text->find("fit on cpu: batch ") != std::string::npos);
    o.batchSize = int(largest);
    QVERIFY2(explainTraining(p, o).ok(), "the largest batch said to fit does not");
    o.batchSize = int(largest + 1);
    auto refused = explainTraining(p, o);
    QVERIFY(!refused.ok());
    QCOMPARE(refused.error().kind, ErrorKind::Refused);
    const std::string& m = refused.error().message;
    auto largestAt = m.find("largest: ");
    QVERIFY2(largestAt != std::string::npos, m.c_str());
    QVERIFY2(std::count(m.begin() + long(largestAt), m.end(), '\'') >= 6, m.c_str());
  }
};

QTEST_GUILESS_MAIN(TestDevices)
#include "tst_devices.moc"
