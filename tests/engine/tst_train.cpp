// End to end: training the example projects to their accuracy floors, bit-for-bit
// determinism, failures that stop a run with a Failed event, and weights that go
// in and out as safetensors with bad files refused by name.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/train/trainer.h"
#include "kernels/core/functors.h"

using namespace netloom;

namespace {

std::string projectPath(const char* name) {
  return std::string(NETLOOM_SOURCE_DIR) + "/projects/" + name;
}

struct Run {
  Result<TrainSummary> result = makeError("not run");
  std::vector<proto::TrainEvent> events;
  std::vector<float> losses;
};

Run train(const proto::Project& p, TrainOptions o) {
  Run r;
  if (o.projectDir == ".") o.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
  r.result = runTraining(p, o, [&](const proto::TrainEvent& e) {
    r.events.push_back(e);
    if (e.has_step()) r.losses.push_back(float(e.step().loss()));
  });
  return r;
}

proto::Project load(const char* name) {
  auto p = loadProject(projectPath(name));
  return p.ok() ? *p : proto::Project{};
}

bool haveFashion() {
  return std::filesystem::exists(std::string(NETLOOM_FASHION_DIR) + "/train-images-idx3-ubyte.gz");
}

}  // namespace

class TestTrain : public QObject {
  Q_OBJECT

 private slots:
  void spiralsReachTheirFloor() {
    Run r = train(load("spirals.nlproj"), {});
    QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
    QVERIFY2(r.result->testAccuracy >= 0.95, qPrintable(QString::number(r.result->testAccuracy)));
    QVERIFY(r.events.front().has_run_started());
    QVERIFY(r.events.back().has_finished());
    QCOMPARE(int64_t(r.losses.size()), r.result->steps);
  }

  // The CI floors: one epoch on a 10,000-image subset reaches 0.80 test accuracy.
  void fashionSubsetReachesEightyPercent_data() {
    QTest::addColumn<QString>("project");
    QTest::newRow("mlp") << "fashion-mlp.nlproj";
    QTest::newRow("lenet") << "fashion-lenet.nlproj";
  }
  void fashionSubsetReachesEightyPercent() {
    QFETCH(QString, project);
    if (!haveFashion())
      QSKIP("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)");
    TrainOptions o;
    o.epochs = 1;
    o.trainLimit = 10000;
    Run r = train(load(project.toStdString().c_str()), o);
    QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
    QVERIFY2(r.result->testAccuracy >= 0.80, qPrintable(QString::number(r.result->testAccuracy)));
    QVERIFY(r.result->samplesPerSec > 0);
    QVERIFY(r.result->arenaBytes > 0 && r.result->arenaBytes <= r.result->naiveBytes);
  }

  void everyExampleProjectCompiles() {
    int count = 0;
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(NETLOOM_SOURCE_DIR) + "/projects")) {
      if (entry.path().extension() != ".nlproj") continue;
      ++count;
      auto p = loadProject(entry.path().string());
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      TrainOptions o;
      o.trainLimit = 256;
      o.testLimit = 256;
      o.projectDir = entry.path().parent_path().string();
      // An image-folder project reads a folder the user writes with
      // scripts/fashion_folder.py; a clean checkout has none, so write a small one.
      QTemporaryDir written;
      if (p->data().has_image_folder() &&
          !std::filesystem::exists(o.projectDir + "/" + p->data().image_folder().train())) {
        if (!haveFashion()) {
          qInfo("%s: skipped, Fashion-MNIST is not installed", entry.path().c_str());
          continue;
        }
        QVERIFY(written.isValid());
        const std::string folder =
            std::filesystem::path(p->data().image_folder().train()).parent_path().string();
        QProcess script;
        script.start("/usr/bin/python3",
                     {QString(NETLOOM_SOURCE_DIR) + "/scripts/fashion_folder.py",
                      written.path() + "/" + QString::fromStdString(folder), "--limit", "300",
                      "--idx-dir", NETLOOM_FASHION_DIR});
        QVERIFY(script.waitForFinished(-1));
        QVERIFY2(script.exitCode() == 0, script.readAllStandardError().constData());
        o.projectDir = written.path().toStdString();
      }
      auto plans = explainTraining(*p, o);
      QVERIFY2(plans.ok(),
               (entry.path().string() + ": " + (plans.ok() ? "" : plans.error().message)).c_str());
    }
    QVERIFY(count >= 6);
  }

  // A run that reports norms: on its first step and every tenth, each parameter's
  // gradient and weight come with an L2 norm and a histogram whose counts cover the
  // tensor and whose range bounds the norm.
  void normsComeWithHistograms() {
    proto::Project p = load("spirals.nlproj");
    TrainOptions o;
    o.threads = 1;
    o.maxSteps = 21;
    o.reportNorms = true;
    Run r = train(p, o);
    QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
    std::map<std::string, int64_t> sizes{{"fc1.weight", 64 * 2},    {"fc1.bias", 64},
                                         {"fc2.weight", 64 * 64},   {"fc2.bias", 64},
                                         {"logits.weight", 3 * 64}, {"logits.bias", 3}};
    std::vector<int64_t> reported;
    for (const auto& e : r.events) {
      if (!e.has_step() || e.step().weight_histograms().empty()) continue;
      const proto::Step& s = e.step();
      reported.push_back(s.step());
      QCOMPARE(s.weight_histograms_size(), int(sizes.size()));
      QCOMPARE(s.grad_histograms_size(), int(sizes.size()));
      for (const auto& [name, numel] : sizes) {
        for (const auto* maps : {&s.weight_histograms(), &s.grad_histograms()}) {
          const proto::Histogram& h = maps->at(name);
          QCOMPARE(h.counts_size(), fn::Histogram::kBins);
          double total = 0;
          for (double c : h.counts()) total += c;
          QCOMPARE(int64_t(total), numel);
          QVERIFY(h.min() <= h.max());
        }
        // Every value lies within the range, so the norm is at most √n × its end.
        const proto::Histogram& w = s.weight_histograms().at(name);
        double bound = std::max(std::abs(w.min()), std::abs(w.max()));
        QVERIFY(s.weight_norms().at(name) <= std::sqrt(double(numel)) * bound * (1 + 1e-6));
        QVERIFY(s.weight_norms().at(name) >= bound * (1 - 1e-6));
        const proto::Histogram& g = s.grad_histograms().at(name);
        double gbound = std::max(std::abs(g.min()), std::abs(g.max()));
        QVERIFY(s.grad_norms().at(name) >= gbound * (1 - 1e-5));
        QVERIFY(gbound > 0);
      }
    }
    QCOMPARE(reported, (std::vector<int64_t>{1, 10, 20}));
  }

  void oneThreadIsBitForBitDeterministic() {
    proto::Project p = load("spirals.nlproj");
    // Dropout makes the run depend on the per-step random streams as well.
    auto* drop = p.mutable_model()->add_nodes();
    drop->set_name("drop");
    drop->set_op("Dropout");
    drop->add_inputs("act1");
    for (auto& n : *p.mutable_model()->mutable_nodes())
      if (n.name() == "fc2") n.set_inputs(0, "drop");
    TrainOptions o;
    o.threads = 1;
    o.epochs = 3;
    Run a = train(p, o), b = train(p, o);
    QVERIFY(a.result.ok() && b.result.ok());
    QVERIFY(!a.losses.empty());
    QCOMPARE(a.losses.size(), b.losses.size());
    QVERIFY(std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(float)) == 0);
    o.seed = 12345;
    Run c = train(p, o);
    QVERIFY(c.result.ok());
    QVERIFY(std::memcmp(a.losses.data(), c.losses.data(), a.losses.size() * sizeof(float)) != 0);
  }

  void divergenceStopsWithFailedNamingTheStep() {
    proto::Project p = load("spirals.nlproj");
    p.mutable_train()->mutable_optimizer()->set_kind(proto::Optimizer::SGD);
    p.mutable_train()->mutable_optimizer()->set_lr(1e38);
    Run r = train(p, {});
    QVERIFY(!r.result.ok());
    QVERIFY(!r.events.empty() && r.events.back().has_failed());
    const auto& f = r.events.back().failed();
    QVERIFY(f.step() > 0);
    QVERIFY2(f.message().find("step " + std::to_string(f.step())) != std::string::npos,
             f.message().c_str());
    // Every step before the failure was reported.
    QCOMPARE(int64_t(r.losses.size()), f.step() - 1);
  }

  void missingOrCorruptDataNamesTheFile() {
    QTemporaryDir dir;
    proto::Project p = load("fashion-mlp.nlproj");
    p.mutable_data()->mutable_idx()->set_train_images(dir.filePath("nothing.gz").toStdString());
    Run r = train(p, {});
    QVERIFY(!r.result.ok());
    QVERIFY2(r.result.error().message.find("nothing.gz") != std::string::npos,
             r.result.error().message.c_str());
    QVERIFY(r.events.back().has_failed());

    std::string junk = dir.filePath("junk-images").toStdString();
    std::ofstream(junk) << "this is not an IDX file at all";
    p.mutable_data()->mutable_idx()->set_train_images(junk);
    r = train(p, {});
    QVERIFY(!r.result.ok());
    QVERIFY2(r.result.error().message.find("junk-images") != std::string::npos,
             r.result.error().message.c_str());
  }

  void inputThatDoesNotFitTheDataIsRefused() {
    proto::Project p = load("spirals.nlproj");
    (*p.mutable_model()->mutable_nodes(0)->mutable_attrs())["shape"].mutable_ints()->set_values(0,
                                                                                                3);
    Run r = train(p, {});
    QVERIFY(!r.result.ok());
    QVERIFY2(r.result.error().message.find("'point'") != std::string::npos,
             r.result.error().message.c_str());
  }

  void weightsRoundTripInPyTorchLayout() {
    QTemporaryDir dir;
    std::string path = dir.filePath("w.safetensors").toStdString();
    proto::Project p = load("spirals.nlproj");
    TrainOptions o;
    o.epochs = 10;
    o.saveWeights = path;
    Run r = train(p, o);
    QVERIFY(r.result.ok());
    auto tensors = readSafetensors(path);
    QVERIFY(tensors.ok());
    std::map<std::string, Shape> shapes;
    for (const auto& t : *tensors) shapes[t.name] = t.shape;
    QCOMPARE(shapes.at("fc1.weight"), (Shape{64, 2}));  // [out, in]
    QCOMPARE(shapes.at("fc1.bias"), (Shape{64}));
    QCOMPARE(shapes.at("logits.weight"), (Shape{3, 64}));
    QCOMPARE(int(shapes.size()), 6);

    // Starting from the trained weights, the first loss is already low.
    TrainOptions again;
    again.initWeights = path;
    again.maxSteps = 1;
    Run warm = train(p, again);
    QVERIFY(warm.result.ok());
    QVERIFY2(warm.losses[0] < 0.5f * r.losses[0], qPrintable(QString::number(warm.losses[0])));
  }

  void badWeightFilesNameTheTensor_data() {
    QTest::addColumn<int>("fault");
    QTest::addColumn<QString>("mention");
    QTest::newRow("wrong name") << 0 << "fc9.weight";
    QTest::newRow("wrong shape") << 1 << "fc1.weight";
    QTest::newRow("wrong dtype") << 2 << "fc1.bias";
    QTest::newRow("missing") << 3 << "logits.bias";
  }
  void badWeightFilesNameTheTensor() {
    QFETCH(int, fault);
    QFETCH(QString, mention);
    QTemporaryDir dir;
    std::string path = dir.filePath("w.safetensors").toStdString();
    proto::Project p = load("spirals.nlproj");
    TrainOptions o;
    o.maxSteps = 1;
    o.saveWeights = path;
    QVERIFY(train(p, o).result.ok());
    auto tensors = *readSafetensors(path);
    for (auto it = tensors.begin(); it != tensors.end(); ++it) {
      if (fault == 0 && it->name == "fc1.weight") it->name = "fc9.weight";
      if (fault == 1 && it->name == "fc1.weight") it->shape = {2, 64};
      if (fault == 2 && it->name == "fc1.bias") {
        it->dtype = DType::I32;
      }
      if (fault == 3 && it->name == "logits.bias") {
        tensors.erase(it);
        break;
      }
    }
    QVERIFY(writeSafetensors(path, tensors).ok());
    TrainOptions load;
    load.initWeights = path;
    Run r = train(p, load);
    QVERIFY(!r.result.ok());
    QVERIFY2(r.result.error().message.find(mention.toStdString()) != std::string::npos,
             r.result.error().message.c_str());
    QVERIFY(r.events.back().has_failed());
  }

  void schedulesAndOptimizersTrain_data() {
    QTest::addColumn<int>("optimizer");
    QTest::addColumn<int>("schedule");
    QTest::newRow("sgd momentum, step")
        << int(proto::Optimizer::SGD) << int(proto::LrSchedule::STEP);
    QTest::newRow("adamw, cosine")
        << int(proto::Optimizer::ADAMW) << int(proto::LrSchedule::COSINE);
    QTest::newRow("adam, constant")
        << int(proto::Optimizer::ADAM) << int(proto::LrSchedule::CONSTANT);
  }
  void schedulesAndOptimizersTrain() {
    QFETCH(int, optimizer);
    QFETCH(int, schedule);
    proto::Project p = load("spirals.nlproj");
    auto* opt = p.mutable_train()->mutable_optimizer();
    opt->set_kind(proto::Optimizer::Kind(optimizer));
    if (optimizer == proto::Optimizer::SGD) {
      opt->set_lr(0.1);
      opt->set_momentum(0.9);
      opt->set_nesterov(true);
    }
    auto* s = p.mutable_train()->mutable_schedule();
    s->set_kind(proto::LrSchedule::Kind(schedule));
    s->set_step_epochs(10);
    s->set_gamma(0.5);
    s->set_warmup_steps(20);
    TrainOptions o;
    o.epochs = 20;
    Run r = train(p, o);
    QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
    QVERIFY2(r.result->testAccuracy > 0.85, qPrintable(QString::number(r.result->testAccuracy)));
    // The whole curve, step by step, against the schedules as PyTorch defines them:
    // a linear warm-up over 20 steps (step k at k/20 of the rate), then StepLR over
    // epochs (halved every 10), CosineAnnealingLR stepped per step from the base rate
    // over the steps after warm-up (to min_lr 0), or the base rate.
    const double base = opt->lr();
    const int64_t perEpoch = (1500 + 31) / 32, total = 20 * perEpoch, warm = 20;
    int64_t checked = 0, last = 0;
    for (const auto& e : r.events) {
      if (!e.has_step()) continue;
      const int64_t k = e.step().step();
      QVERIFY(k > last);
      last = k;
      double want = base;
      if (schedule == proto::LrSchedule::STEP)
        want = base * std::pow(0.5, double((k - 1) / perEpoch / 10));
      else if (schedule == proto::LrSchedule::COSINE)
        want = base * 0.5 *
               (1 + std::cos(M_PI * std::max(0.0, double(k - 1 - warm)) / double(total - warm)));
      if (k <= warm) want *= double(k) / double(warm);
      QVERIFY2(std::fabs(e.step().lr() - want) <= 1e-12 * base,
               qPrintable(QString("step %1: lr %2, want %3").arg(k).arg(e.step().lr()).arg(want)));
      ++checked;
    }
    QCOMPARE(last, total);
    QVERIFY2(checked >= 100, qPrintable(QString::number(checked)));
  }
};

QTEST_APPLESS_MAIN(TestTrain)
#include "tst_train.moc"
