// The GPU against the CPU: every op's forward pass and gradients, Dropout's masks,
// LeNet's accuracy floor, checkpoints that move between devices, and the recorded
// step (CUDA Graph) against launching each kernel. Each test skips, saying why, on a
// machine without a usable GPU.
#include <QtTest>
#include <filesystem>

#include "../common/fashion.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/runtime/devices.h"
#include "engine/train/trainer.h"
#include "model_text.h"
#include "op_cases.h"

using namespace netloom;
using harness::Vec;

namespace {

// The first GPU, or null with `why` saying why there is none.
Device* gpu(std::string& why) {
  return openDevice(DeviceId{DeviceKind::Cuda, 0}, why);
}

#define NEED_GPU()           \
  std::string why_;          \
  Device* cuda_ = gpu(why_); \
  if (!cuda_) QSKIP(("no GPU to test on: " + why_).c_str())

// A project, its Fashion-MNIST files taken from NETLOOM_FASHION_DIR.
proto::Project load(const char* name) {
  auto p = loadProject(std::string(NETLOOM_SOURCE_DIR) + "/projects/" + name);
  return p.ok() ? netloom::testing::withFashionDir(*p) : proto::Project{};
}

using netloom::testing::haveFashion;

struct Run {
  Result<TrainSummary> result = makeError("not run");
  std::vector<double> losses;
};

Run train(proto::Project p, const std::string& device, TrainOptions o) {
  Run r;
  p.mutable_train()->set_device(device);
  o.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
  r.result = runTraining(p, o, [&](const proto::TrainEvent& e) {
    if (e.has_step()) r.losses.push_back(e.step().loss());
  });
  return r;
}

std::map<std::string, std::vector<float>> weightsOf(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  auto tensors = readSafetensors(path);
  if (!tensors) return out;
  for (const NamedTensor& t : *tensors) {
    std::vector<float> v(t.data.size() / sizeof(float));
    std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
    out[t.name] = std::move(v);
  }
  return out;
}

// The largest |a - b| / (1 + |b|) over every weight, or infinity when they differ in
// what they hold.
double weightDistance(const std::string& a, const std::string& b) {
  auto wa = weightsOf(a), wb = weightsOf(b);
  if (wa.empty() || wa.size() != wb.size()) return INFINITY;
  double worst = 0;
  for (const auto& [name, va] : wa) {
    auto it = wb.find(name);
    if (it == wb.end() || it->second.size() != va.size()) return INFINITY;
    for (size_t i = 0; i < va.size(); ++i)
      worst = std::max(worst, std::fabs(double(va[i]) - it->second[i]) /
                                  (1.0 + std::fabs(double(it->second[i]))));
  }
  return worst;
}

// `body` compiled for `gpu` at `batch` in fp32 and in bf16: each plan's arena, the steps
// whose kernel starts with `prefix` and is a bf16 one (…_bf16), and the values stored in
// bf16; `error` says why a plan did not compile.
struct PrecisionPlans {
  std::map<Precision, int64_t> arena;
  std::map<Precision, int> bf16Kernels, bf16Values;
  std::string error;
};
PrecisionPlans precisionPlans(Device& gpu, const std::string& body, int64_t batch,
                              const std::string& prefix) {
  PrecisionPlans out;
  for (Precision p : {Precision::F32, Precision::BF16}) {
    ParamStore store(gpu);
    CompileOptions o;
    o.batch = batch;
    o.precision = p;
    auto prog = compile(testutil::model(body), o, store);
    if (!prog.ok()) {
      out.error = prog.error().message;
      return out;
    }
    out.arena[p] = (*prog)->arenaBytes;
    for (const PlanStep& s : (*prog)->steps)
      out.bf16Kernels[p] +=
          s.kernel.rfind(prefix, 0) == 0 && s.kernel.find("_bf16") != std::string::npos;
    for (const Value& v : (*prog)->graph.values) out.bf16Values[p] += v.desc.dtype == DType::BF16;
  }
  qInfo("arena: %lld bytes in fp32, %lld in bf16", (long long)out.arena[Precision::F32],
        (long long)out.arena[Precision::BF16]);
  return out;
}

}  // namespace

class TestGpu : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { qInfo("%s", listDevices().c_str()); }

  // The op harness on the GPU: each case's forward pass against the double reference
  // and its gradients against finite differences, then against the CPU's results.
  void opsMatchTheCpu_data() {
    QTest::addColumn<int>("index");
    auto cases = harness::allCases();
    for (size_t i = 0; i < cases.size(); ++i) QTest::newRow(cases[i].first.c_str()) << int(i);
  }
  void opsMatchTheCpu() {
    NEED_GPU();
    QFETCH(int, index);
    const auto cases = harness::allCases();  // held: a case refers into its vector
    const harness::OpCase& c = cases[index].second;
    Vec onCpu, onGpu;
    harness::runOnce(c, false, onCpu);
    if (QTest::currentTestFailed()) return;
    harness::runOnce(c, false, onGpu, *cuda_);
    if (QTest::currentTestFailed()) return;
    QCOMPARE(onGpu.size(), onCpu.size());
    for (size_t i = 0; i < onCpu.size(); ++i)
      if (!harness::close(onGpu[i], onCpu[i], 1e-4, 1e-5))
        QFAIL(qPrintable(QString("%1[%2]: cuda %3, cpu %4")
                             .arg(c.op.c_str())
                             .arg(i)
                             .arg(onGpu[i], 0, 'g', 9)
                             .arg(onCpu[i], 0, 'g', 9)));
  }

  // Dropout draws from the same counter-based stream on both devices: the same mask.
  void dropoutMasksAgree() {
    NEED_GPU();
    auto mask = [](Device& device) {
      proto::ModelDef m;
      auto* in = m.add_nodes();
      in->set_name("x");
      in->set_op("Input");
      (*in->mutable_attrs())["shape"] = attrToProto(Shape{3, 17, 5});
      auto* d = m.add_nodes();
      d->set_name("drop");
      d->set_op("Dropout");
      d->add_inputs("x");
      (*d->mutable_attrs())["p"] = attrToProto(0.3);
      auto* l = m.add_nodes();
      l->set_name("loss");
      l->set_op("MSELoss");
      l->add_inputs("drop");
      l->add_inputs("drop");
      CompileOptions o;
      o.batch = 4;
      o.training = false;
      o.keep = {"drop"};
      ParamStore store(device);
      auto p = compile(m, o, store);
      if (!p) return std::vector<float>{};
      std::vector<float> x(size_t(4 * 3 * 17 * 5), 1.f);
      writeFloats(device, (*p)->input("x")->data, x.data(), int64_t(x.size()));
      StepContext ctx;
      ctx.training = true;
      ctx.step = 7;
      ctx.seed = 11;
      (*p)->run(ctx, 0, (*p)->steps.size());
      return (*p)->read((*p)->graph.findValue("drop"));
    };
    std::vector<float> cpu = mask(cpuDevice()), cuda = mask(*cuda_);
    QVERIFY(!cpu.empty());
    QCOMPARE(cuda, cpu);
  }

  // An evaluation plan folds BatchNorm into the layer before it and fuses the residual
  // sum with its ReLU on either device: with the same trained weights and statistics,
  // the GPU's logits are the CPU's.
  void foldedEvaluationMatchesTheCpu() {
    NEED_GPU();
    using namespace testutil;
    const std::string conv = intAttr("out_channels", 16) + intAttr("kernel_size", 3) +
                             "attrs { key: 'padding' value { ints { values: [1] } } }";
    const std::string body = input("x", "3,8,8") + labels() + node("c1", "Conv2d", "x", conv) +
                             node("bn1", "BatchNorm", "c1") + node("r1", "ReLU", "bn1") +
                             node("c2", "Conv2d", "r1", conv) + node("sum", "Add", "c2,r1") +
                             node("r2", "ReLU", "sum") + node("gap", "GlobalAvgPool2d", "r2") +
                             node("fc", "Linear", "gap", intAttr("out_features", 8)) +
                             node("bn2", "BatchNorm", "fc") + node("r3", "ReLU", "bn2") +
                             node("out", "Linear", "r3", intAttr("out_features", 3)) +
                             node("loss", "SoftmaxCrossEntropy", "out,label");
    const int64_t batch = 4;
    std::vector<float> x(size_t(batch * 3 * 8 * 8));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 13)) / 4.f - 1.5f;
    std::vector<int32_t> labels{0, 1, 2, 1};
    // Three training steps on the CPU, in PyTorch's layouts, so the statistics move.
    ParamStore cpuStore;
    CompileOptions o;
    o.batch = batch;
    o.blockedLayouts = false;
    auto train = compile(model(body), o, cpuStore);
    QVERIFY2(train.ok(), train.ok() ? "" : train.error().message.c_str());
    StepContext ctx;
    ctx.lr = 1e-2;
    for (ctx.step = 1; ctx.step <= 3; ++ctx.step) {
      std::memcpy((*train)->input("x")->data, x.data(), x.size() * sizeof(float));
      std::memcpy((*train)->input("label")->data, labels.data(), labels.size() * 4);
      (*train)->run(ctx);
    }
    o.training = false;
    o.evaluation = true;
    o.keep = {"out"};
    ParamStore gpuStore(*cuda_);
    std::vector<std::vector<float>> logits;
    for (ParamStore* store : {&cpuStore, &gpuStore}) {
      Device& device = store == &cpuStore ? cpuDevice() : *cuda_;
      auto p = compile(model(body), o, *store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      if (store == &gpuStore)
        for (const auto& e : cpuStore.entries())
          if (ParamStore::Entry* t = gpuStore.find(e->name))
            ParamStore::setStored(*t, ParamStore::stored(*e));
      int folds = 0;
      for (const Node& n : (*p)->graph.nodes) folds += n.op->name == "FoldBatchNorm";
      QCOMPARE(folds, 2);
      bool addRelu = false;
      for (const std::string& f : (*p)->fusions)
        addRelu = addRelu || f == "sum + r2 -> Add with ReLU";
      QVERIFY(addRelu);
      writeFloats(device, (*p)->input("x")->data, x.data(), int64_t(x.size()));
      StepContext eval;
      eval.training = false;
      (*p)->run(eval, 0, (*p)->steps.size());
      logits.push_back((*p)->read((*p)->graph.findValue("out")));
    }
    QCOMPARE(logits[1].size(), logits[0].size());
    for (size_t i = 0; i < logits[0].size(); ++i)
      QVERIFY2(harness::close(logits[1][i], logits[0][i], 1e-4, 1e-5),
               qPrintable(
                   QString("out[%1]: cuda %2, cpu %3").arg(i).arg(logits[1][i]).arg(logits[0][i])));
  }

  // Element-wise chains (Tanh, Dropout, LeakyReLU, GELU forward; their gradients
  // backward) run as Pointwise kernels on either device: the GPU's loss and gradients
  // are the CPU's, Dropout's masks included, and so are the evaluation plan's logits
  // (its chain's Dropout the identity).
  void chainsMatchTheCpu() {
    NEED_GPU();
    using namespace testutil;
    const std::string body = input("x", "12") + labels() +
                             node("fc1", "Linear", "x", intAttr("out_features", 32)) +
                             node("t", "Tanh", "fc1") +
                             node("d", "Dropout", "t", "attrs { key: 'p' value { f: 0.25 } }") +
                             node("l", "LeakyReLU", "d") + node("g", "GELU", "l") +
                             node("fc2", "Linear", "g", intAttr("out_features", 3)) +
                             node("loss", "SoftmaxCrossEntropy", "fc2,label");
    const int64_t batch = 8;
    std::vector<float> x(size_t(batch * 12));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 17)) / 5.f - 1.5f;
    std::vector<int32_t> labels{0, 1, 2, 1, 0, 2, 2, 1};
    ParamStore cpuStore, gpuStore(*cuda_);
    std::vector<std::vector<float>> results;
    for (ParamStore* store : {&cpuStore, &gpuStore}) {
      Device& device = store == &cpuStore ? cpuDevice() : *cuda_;
      CompileOptions o;
      o.batch = batch;
      o.updateParams = false;
      auto p = compile(model(body), o, *store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      QCOMPARE(int((*p)->chains.size()), 2);
      if (store == &gpuStore)
        for (const auto& e : cpuStore.entries())
          if (ParamStore::Entry* t = gpuStore.find(e->name))
            ParamStore::setStored(*t, ParamStore::stored(*e));
      writeFloats(device, (*p)->input("x")->data, x.data(), int64_t(x.size()));
      // The labels' bytes, copied as floats are (int32 and float are both 4 bytes).
      writeFloats(device, (*p)->input("label")->data, reinterpret_cast<const float*>(labels.data()),
                  int64_t(labels.size()));
      StepContext ctx;
      ctx.step = 1;
      ctx.seed = 21;
      (*p)->run(ctx, 0, (*p)->steps.size());
      std::vector<float> all = (*p)->read((*p)->loss);
      for (const auto& [name, v] : (*p)->gradients) {
        auto grad = (*p)->read(v);
        all.insert(all.end(), grad.begin(), grad.end());
      }
      o.training = false;
      o.keep = {"fc2"};
      auto eval = compile(model(body), o, *store);
      QVERIFY2(eval.ok(), eval.ok() ? "" : eval.error().message.c_str());
      QCOMPARE(int((*eval)->chains.size()), 1);
      writeFloats(device, (*eval)->input("x")->data, x.data(), int64_t(x.size()));
      writeFloats(device, (*eval)->input("label")->data,
                  reinterpret_cast<const float*>(labels.data()), int64_t(labels.size()));
      StepContext evaluate;
      evaluate.training = false;
      (*eval)->run(evaluate, 0, (*eval)->steps.size());
      auto logits = (*eval)->read((*eval)->graph.findValue("fc2"));
      all.insert(all.end(), logits.begin(), logits.end());
      results.push_back(all);
    }
    QCOMPARE(results[1].size(), results[0].size());
    for (size_t i = 0; i < results[0].size(); ++i)
      QVERIFY2(
          harness::close(results[1][i], results[0][i], 1e-4, 1e-5),
          qPrintable(QString("%1: cuda %2, cpu %3").arg(i).arg(results[1][i]).arg(results[0][i])));
  }

  // bf16 storage on the GPU: the products run on bf16 operands (cuBLASLt's bf16
  // kernels), the activations between them are stored in 16 bits (the arena shrinks),
  // the other ops read them through their widened twins; and the MLP trained in bf16 on
  // the GPU follows the same run on the CPU (its bf16 units or not) and in float.
  void bf16StorageOnTheGpu() {
    NEED_GPU();
    using namespace testutil;
    const std::string body =
        input("x", "784") + labels() + node("fc1", "Linear", "x", intAttr("out_features", 256)) +
        node("a1", "ReLU", "fc1") + node("fc2", "Linear", "a1", intAttr("out_features", 128)) +
        node("a2", "GELU", "fc2") + node("fc3", "Linear", "a2", intAttr("out_features", 10)) +
        node("loss", "SoftmaxCrossEntropy", "fc3,label");
    const PrecisionPlans plans = precisionPlans(*cuda_, body, 64, "cublaslt.");
    QVERIFY2(plans.error.empty(), plans.error.c_str());
    QCOMPARE(plans.bf16Kernels.at(Precision::F32) + plans.bf16Values.at(Precision::F32), 0);
    QVERIFY2(plans.bf16Kernels.at(Precision::BF16) >= 3,
             qPrintable(QString("%1 products on bf16").arg(plans.bf16Kernels.at(Precision::BF16))));
    QVERIFY(plans.bf16Values.at(Precision::BF16) > 0);
    QVERIFY(plans.arena.at(Precision::BF16) < plans.arena.at(Precision::F32));
    if (!haveFashion()) QSKIP("Fashion-MNIST is not installed (dataset-fashion-mnist)");
    TrainOptions o;
    o.epochs = 1;
    o.trainLimit = 8192;
    std::map<std::string, double> loss, accuracy;
    for (const char* run : {"cuda:0 bf16", "cpu bf16", "cuda:0 fp32"}) {
      const std::string what = run;
      o.precision = what.substr(what.find(' ') + 1);
      Run r = train(load("fashion-mlp.nlproj"), what.substr(0, what.find(' ')), o);
      QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
      loss[what] = r.result->trainLoss;
      accuracy[what] = r.result->testAccuracy;
      qInfo("%s: train loss %.4f, test accuracy %.4f", run, loss[what], accuracy[what]);
    }
    for (const char* other : {"cpu bf16", "cuda:0 fp32"}) {
      QVERIFY2(std::fabs(accuracy["cuda:0 bf16"] - accuracy[other]) <= 0.015, other);
      QVERIFY2(std::fabs(loss["cuda:0 bf16"] - loss[other]) <= 0.05 * loss[other], other);
    }
  }

  // Conv2d and its gradients on bf16 tensors too (cuDNN's bf16 kernels): each pass of a
  // convolution runs its _bf16 kernel, the arena shrinks, and LeNet trained in bf16 on
  // the GPU reaches the accuracy of its fp32 run there.
  void bf16ConvolutionsOnTheGpu() {
    NEED_GPU();
    using namespace testutil;
    const std::string body =
        input("x", "1,12,12") + labels() +
        node("conv1", "Conv2d", "x",
             intAttr("out_channels", 16) + intAttr("kernel_size", 3) + intAttr("padding", 1)) +
        node("act1", "ReLU", "conv1") +
        node("conv2", "Conv2d", "act1",
             intAttr("out_channels", 16) + intAttr("kernel_size", 3) + intAttr("padding", 1)) +
        node("act2", "ReLU", "conv2") + node("flat", "Flatten", "act2") +
        node("fc", "Linear", "flat", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    const PrecisionPlans plans = precisionPlans(*cuda_, body, 32, "cudnn.conv_");
    QVERIFY2(plans.error.empty(), plans.error.c_str());
    QCOMPARE(plans.bf16Kernels.at(Precision::F32), 0);
    QVERIFY2(
        plans.bf16Kernels.at(Precision::BF16) >= 4,
        qPrintable(
            QString("%1 convolution passes on bf16").arg(plans.bf16Kernels.at(Precision::BF16))));
    QVERIFY(plans.arena.at(Precision::BF16) < plans.arena.at(Precision::F32));
    if (!haveFashion()) QSKIP("Fashion-MNIST is not installed (dataset-fashion-mnist)");
    TrainOptions o;
    o.epochs = 1;
    o.trainLimit = 10000;
    std::map<std::string, double> accuracy;
    for (const char* precision : {"bf16", "fp32"}) {
      o.precision = precision;
      Run r = train(load("fashion-lenet.nlproj"), "cuda:0", o);
      QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
      accuracy[precision] = r.result->testAccuracy;
      qInfo("LeNet on cuda:0 in %s: test accuracy %.4f", precision, accuracy[precision]);
    }
    QVERIFY(std::fabs(accuracy["bf16"] - accuracy["fp32"]) <= 0.015);
  }

  void lenetReachesTheCpuFloor() {
    NEED_GPU();
    if (!haveFashion()) QSKIP("Fashion-MNIST is not installed (dataset-fashion-mnist)");
    TrainOptions o;
    o.epochs = 1;
    o.trainLimit = 10000;
    // The same run on the CPU (same seed, order and initial weights) is the floor: the
    // GPU's arithmetic differs in rounding only, so its accuracy and final loss stay
    // within a point and a half, and 2 %, of the CPU's.
    Run r = train(load("fashion-lenet.nlproj"), "cuda:0", o);
    QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
    Run cpu = train(load("fashion-lenet.nlproj"), "cpu", o);
    QVERIFY2(cpu.result.ok(), cpu.result.ok() ? "" : cpu.result.error().message.c_str());
    const double gpuAcc = r.result->testAccuracy, cpuAcc = cpu.result->testAccuracy;
    QVERIFY2(std::fabs(gpuAcc - cpuAcc) <= 0.015,
             qPrintable(QString("cuda %1, cpu %2").arg(gpuAcc).arg(cpuAcc)));
    const double gpuLoss = r.result->trainLoss, cpuLoss = cpu.result->trainLoss;
    QVERIFY2(std::fabs(gpuLoss - cpuLoss) <= 0.02 * cpuLoss,
             qPrintable(QString("train loss: cuda %1, cpu %2").arg(gpuLoss).arg(cpuLoss)));
  }

  // Ten steps on one device, ten more from its checkpoint on the other, against all
  // twenty on the CPU.
  void checkpointsCrossDevices_data() {
    QTest::addColumn<QString>("first");
    QTest::addColumn<QString>("then");
    QTest::newRow("gpu then cpu") << "cuda:0"
                                  << "cpu";
    QTest::newRow("cpu then gpu") << "cpu"
                                  << "cuda:0";
    // The same resume on the CPU alone: a difference that shows here is the
    // checkpoint's, not the GPU's.
    QTest::newRow("cpu then cpu") << "cpu"
                                  << "cpu";
  }
  void checkpointsCrossDevices() {
    QFETCH(QString, first);
    QFETCH(QString, then);
    if (first != "cpu" || then != "cpu") {
      NEED_GPU();
    }
    QTemporaryDir dir;
    proto::Project p = load("spirals.nlproj");
    p.mutable_train()->mutable_checkpoint()->set_every_steps(10);
    TrainOptions o;
    o.maxSteps = 20;
    o.saveWeights = dir.filePath("all-cpu.safetensors").toStdString();
    o.checkpointDir = dir.filePath("cpu").toStdString();
    Run all = train(p, "cpu", o);
    QVERIFY2(all.result.ok(), all.result.ok() ? "" : all.result.error().message.c_str());

    // The first device trains all 20 steps (the schedule spans 20), the second
    // resumes from the first's checkpoint at step 10.
    TrainOptions a;
    a.maxSteps = 20;
    a.checkpointDir = dir.filePath("mixed").toStdString();
    Run firstHalf = train(p, first.toStdString(), a);
    QVERIFY2(firstHalf.result.ok(),
             firstHalf.result.ok() ? "" : firstHalf.result.error().message.c_str());
    TrainOptions b;
    b.maxSteps = 20;
    b.resume = a.checkpointDir + "/step-000000010";
    b.checkpointDir = a.checkpointDir;
    b.saveWeights = dir.filePath("mixed.safetensors").toStdString();
    Run secondHalf = train(p, then.toStdString(), b);
    QVERIFY2(secondHalf.result.ok(),
             secondHalf.result.ok() ? "" : secondHalf.result.error().message.c_str());
    double d = weightDistance(b.saveWeights, o.saveWeights);
    qInfo("largest relative weight difference after 20 steps: %.3g", d);
    QVERIFY2(d < 1e-4, qPrintable(QString::number(d)));
  }

  // The recorded step replays exactly what launching each kernel computes.
  void recordedStepMatchesLaunches() {
    NEED_GPU();
    TrainOptions o;
    o.maxSteps = 30;
    Run graphs = train(load("spirals.nlproj"), "cuda:0", o);
    o.graphs = false;
    Run launches = train(load("spirals.nlproj"), "cuda:0", o);
    QVERIFY2(graphs.result.ok(), graphs.result.ok() ? "" : graphs.result.error().message.c_str());
    QVERIFY2(launches.result.ok(),
             launches.result.ok() ? "" : launches.result.error().message.c_str());
    QCOMPARE(graphs.losses, launches.losses);
  }
};

QTEST_GUILESS_MAIN(TestGpu)
#include "tst_gpu.moc"
