// NaN and infinity end a run instead of hiding in it: a NaN planted in a weight
// reaches the loss through ReLU and max pooling (as in PyTorch), the step's check
// stops the run before any weight changes and names the planted tensor, in either
// activation layout; non-finite normalisation values are refused up front.
#include <QtTest>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "async_device.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/train/trainer.h"

using namespace netloom;

namespace {

struct Run {
  Result<TrainSummary> result = makeError("not run");
  std::vector<proto::TrainEvent> events;
};

Run train(const proto::Project& p, const TrainOptions& o) {
  Run r;
  r.result = runTraining(p, o, [&](const proto::TrainEvent& e) { r.events.push_back(e); });
  return r;
}

proto::Project parse(const std::string& text) {
  auto p = parseProject(text, "test");
  return p.ok() ? *p : proto::Project{};
}

// Spirals through an MLP whose ReLUs fuse into the Linear layers.
proto::Project mlp() {
  return parse(R"(
    model {
      nodes { name: "point" op: "Input" attrs { key: "shape" value { ints { values: [2] } } } }
      nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } }
              attrs { key: "dtype" value { s: "int32" } } }
      nodes { name: "fc1" op: "Linear" inputs: "point"
              attrs { key: "out_features" value { i: 32 } } }
      nodes { name: "act1" op: "ReLU" inputs: "fc1" }
      nodes { name: "fc2" op: "Linear" inputs: "act1"
              attrs { key: "out_features" value { i: 3 } } }
      nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["fc2", "label"] }
    }
    data { synthetic { kind: SPIRALS classes: 3 train_samples: 256 test_samples: 64 } }
    train { loss: "loss" optimizer { kind: SGD lr: 0.05 momentum: 0.9 } batch_size: 32
            epochs: 1 seed: 3 }
  )");
}

// Conv-BN-ReLU twice, then max pooling, on 16 channels: blocked where oneDNN has
// blocked convolutions, unless the run asks for plain layouts.
proto::Project cnn() {
  auto conv = [](const char* name, const char* in) {
    return std::string("nodes { name: '") + name + "' op: 'Conv2d' inputs: '" + in +
           "' attrs { key: 'out_channels' value { i: 16 } } attrs { key: 'kernel_size' value { "
           "ints { values: [3] } } } attrs { key: 'padding' value { ints { values: [1] } } } }";
  };
  return parse(R"(
    model {
      nodes { name: "image" op: "Input" attrs { key: "shape" value { ints { values: [1, 8, 8] } } } }
      nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } }
              attrs { key: "dtype" value { s: "int32" } } }
      )" + conv("conv1", "image") +
               R"(
      nodes { name: "bn1" op: "BatchNorm" inputs: "conv1" }
      nodes { name: "relu1" op: "ReLU" inputs: "bn1" }
      )" + conv("conv2", "relu1") +
               R"(
      nodes { name: "bn2" op: "BatchNorm" inputs: "conv2" }
      nodes { name: "relu2" op: "ReLU" inputs: "bn2" }
      nodes { name: "pool" op: "MaxPool2d" inputs: "relu2"
              attrs { key: "kernel_size" value { ints { values: [2] } } } }
      nodes { name: "gap" op: "GlobalAvgPool2d" inputs: "pool" }
      nodes { name: "fc" op: "Linear" inputs: "gap" attrs { key: "out_features" value { i: 3 } } }
      nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["fc", "label"] }
    }
    data { synthetic { kind: BLOBS classes: 3 features: 64 train_samples: 128 test_samples: 32 } }
    train { loss: "loss" optimizer { kind: SGD lr: 0.05 momentum: 0.9 } batch_size: 16
            epochs: 1 seed: 3 }
  )");
}

// The project's initial weights, with element `index` of `tensor` (every element when
// -1) set to `value`.
std::string plantedWeights(const QTemporaryDir& dir, const proto::Project& p,
                           const std::string& tensor, int64_t index, float value) {
  std::string path = dir.filePath("planted.safetensors").toStdString();
  TrainOptions o;
  o.maxSteps = 1;
  o.saveWeights = path;
  Run first = train(p, o);
  if (!first.result.ok()) return {};
  auto tensors = readSafetensors(path);
  if (!tensors.ok()) return {};
  bool planted = false;
  for (NamedTensor& t : *tensors)
    if (t.name == tensor) {
      for (size_t at = 0; at < t.data.size(); at += sizeof(float))
        if (index < 0 || at == index * sizeof(float))
          std::memcpy(t.data.data() + at, &value, sizeof value);
      planted = true;
    }
  return planted && writeSafetensors(path, *tensors).ok() ? path : std::string();
}

void expectStopsAtStepOne(const Run& r, const std::string& tensor, const std::string& value) {
  QVERIFY2(!r.result.ok(), "the run trained on");
  const std::string& m = r.result.error().message;
  for (const std::string& part :
       std::vector<std::string>{"step 1 ", "'" + tensor + "'", "parameter", value})
    QVERIFY2(m.find(part) != std::string::npos,
             qPrintable(QString::fromStdString("'" + part + "' missing from: " + m)));
  QVERIFY(!r.events.empty() && r.events.back().has_failed());
  QCOMPARE(r.events.back().failed().message(), m);
  QCOMPARE(r.events.back().failed().step(), int64_t(1));
  for (const auto& e : r.events) QVERIFY(!e.has_step());  // no step completed
}

}  // namespace

class TestNonFinite : public QObject {
  Q_OBJECT

 private slots:
  void nanWeightStopsTheMlpAtStepOne_data() {
    QTest::addColumn<float>("value");
    QTest::addColumn<QString>("spelled");
    QTest::newRow("NaN") << std::nanf("") << QString("NaN");
    QTest::newRow("inf") << float(INFINITY) << QString("inf");
  }
  void nanWeightStopsTheMlpAtStepOne() {
    QFETCH(float, value);
    QFETCH(QString, spelled);
    QTemporaryDir dir;
    proto::Project p = mlp();
    std::string weights = plantedWeights(dir, p, "fc1.weight", 5, value);
    QVERIFY(!weights.empty());
    TrainOptions o;
    o.initWeights = weights;
    expectStopsAtStepOne(train(p, o), "fc1.weight", spelled.toStdString());
  }

  // On a device the host cannot address the check runs on the device, with no wait:
  // the step's updates and every later one do nothing, and when the host reads the
  // guard back it replays that step as the CPU does. The same failure, word for word.
  void checkedOnTheDeviceAsOnTheCpu() {
    QTemporaryDir dir;
    proto::Project p = mlp();
    std::string weights = plantedWeights(dir, p, "fc1.weight", 5, std::nanf(""));
    QVERIFY(!weights.empty());
    TrainOptions o;
    o.initWeights = weights;
    Run cpu = train(p, o);
    testing::AsyncHostDevice async;
    o.device = &async;
    Run gpuLike = train(p, o);
    expectStopsAtStepOne(cpu, "fc1.weight", "NaN");
    expectStopsAtStepOne(gpuLike, "fc1.weight", "NaN");
    QCOMPARE(gpuLike.result.error().message, cpu.result.error().message);
  }

  void nanWeightStopsTheCnnInEitherLayout_data() {
    QTest::addColumn<bool>("plain");
    QTest::newRow("blocked where available") << false;
    QTest::newRow("plain") << true;
  }
  void nanWeightStopsTheCnnInEitherLayout() {
    QFETCH(bool, plain);
    QTemporaryDir dir;
    proto::Project p = cnn();
    std::string weights = plantedWeights(dir, p, "conv2.weight", 40, std::nanf(""));
    QVERIFY(!weights.empty());
    TrainOptions o;
    o.initWeights = weights;
    o.plainLayouts = plain;
    expectStopsAtStepOne(train(p, o), "conv2.weight", "NaN");
  }

  // Finite weights whose products overflow (on the first batch with points far
  // enough out): the first non-finite tensor is the activation they write.
  void overflowNamesTheActivation() {
    QTemporaryDir dir;
    proto::Project p = mlp();
    std::string weights = plantedWeights(dir, p, "fc1.weight", -1, FLT_MAX);
    QVERIFY(!weights.empty());
    TrainOptions o;
    o.initWeights = weights;
    Run r = train(p, o);
    QVERIFY(!r.result.ok());
    const std::string& m = r.result.error().message;
    QVERIFY2(m.find("first non-finite tensor: activation '") != std::string::npos &&
                 m.find("(from node 'fc1')") != std::string::npos,
             m.c_str());
  }

  // Under bf16 a convolution's output is stored in bf16 where the CPU computes it so:
  // the search reads such a tensor too, and names it.
  void overflowNamesTheActivationStoredInBf16() {
    QTemporaryDir dir;
    proto::Project p = cnn();
    std::string weights = plantedWeights(dir, p, "conv2.weight", -1, 1e38f);  // finite in bf16
    QVERIFY(!weights.empty());
    TrainOptions o;
    o.initWeights = weights;
    o.precision = "bf16";
    Run r = train(p, o);
    QVERIFY(!r.result.ok());
    const std::string& m = r.result.error().message;
    QVERIFY2(m.find("first non-finite tensor: activation 'conv2'") != std::string::npos, m.c_str());
  }

  // A bad interval is refused naming the field; -1 turns the search off.
  void checkFiniteEveryIsCheckedAndCanBeOff() {
    QTemporaryDir dir;
    proto::Project p = mlp();
    p.mutable_train()->set_check_finite_every(-2);
    Run bad = train(p, {});
    QVERIFY(!bad.result.ok());
    QVERIFY2(bad.result.error().message.find("train.check_finite_every") != std::string::npos,
             bad.result.error().message.c_str());

    // Off: the planted NaN still ends the run through the loss, without the search.
    p.mutable_train()->set_check_finite_every(-1);
    std::string weights = plantedWeights(dir, p, "fc1.weight", 0, std::nanf(""));
    TrainOptions o;
    o.initWeights = weights;
    Run off = train(p, o);
    QVERIFY(!off.result.ok());
    QVERIFY2(off.result.error().message.find("first non-finite") == std::string::npos,
             off.result.error().message.c_str());
  }

  void nonFiniteNormalisationIsRefused_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<double>("value");
    QTest::newRow("mean NaN") << QString("mean") << double(NAN);
    QTest::newRow("std inf") << QString("std") << double(INFINITY);
    QTest::newRow("scale -inf") << QString("scale") << -double(INFINITY);
    QTest::newRow("mean beyond float") << QString("mean") << 1e300;
  }
  void nonFiniteNormalisationIsRefused() {
    QFETCH(QString, field);
    QFETCH(double, value);
    proto::Project p = mlp();
    auto* n = p.mutable_data()->mutable_normalization();
    n->set_kind(proto::Normalization::FIXED);
    n->set_std(1.0);
    if (field == "mean") n->set_mean(value);
    if (field == "std") n->set_std(value);
    if (field == "scale") n->set_scale(value);
    Run r = train(p, {});
    QVERIFY(!r.result.ok());
    std::string want = "data.normalization." + field.toStdString();
    QVERIFY2(r.result.error().message.find(want) != std::string::npos,
             r.result.error().message.c_str());
    QVERIFY(r.events.back().has_failed());
  }
};

QTEST_GUILESS_MAIN(TestNonFinite)
#include "tst_nonfinite.moc"
