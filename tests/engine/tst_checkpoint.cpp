// Checkpoints, resume and early stopping: a run killed with SIGKILL and resumed
// gives the same losses as one that never stopped; checkpoints of other models and
// half-written checkpoints are refused or ignored; keep-last, keep-best and early
// stopping do what the policy says.
#include <QtTest>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "../common/wait.h"
#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/train/checkpoint.h"
#include "engine/train/trainer.h"

using namespace netloom;
namespace fs = std::filesystem;

namespace {

proto::Project spirals() {
  auto p = loadProject(std::string(NETLOOM_SOURCE_DIR) + "/projects/spirals.nlproj");
  return p.ok() ? *p : proto::Project{};
}

// Spirals with a wide hidden layer and dropout: random enough that resuming must
// restore the data order and the random streams.
proto::Project droppingSpirals() {
  proto::Project p = spirals();
  for (auto& n : *p.mutable_model()->mutable_nodes()) {
    if (n.name() == "fc2") {
      (*n.mutable_attrs())["out_features"].set_i(1024);
      n.set_inputs(0, "drop");
    }
  }
  auto* d = p.mutable_model()->add_nodes();
  d->set_name("drop");
  d->set_op("Dropout");
  d->add_inputs("act1");
  (*d->mutable_attrs())["p"].set_f(0.2);
  for (auto& n : *p.mutable_model()->mutable_nodes())
    if (n.name() == "fc1") (*n.mutable_attrs())["out_features"].set_i(1024);
  p.mutable_data()->mutable_synthetic()->set_train_samples(2000);
  p.mutable_train()->set_batch_size(16);
  p.mutable_train()->set_epochs(6);
  p.mutable_train()->mutable_checkpoint()->set_every_steps(25);
  p.mutable_train()->mutable_checkpoint()->set_keep_last(3);
  return p;
}

std::map<int64_t, double> stepLosses(const std::string& events) {
  std::map<int64_t, double> out;
  auto r = readEvents(events);
  if (!r) return out;
  for (const auto& e : r->events)
    if (e.has_step())
      out[e.step().step()] = e.step().loss();  // a resumed step replaces its first try
  return out;
}

struct Run {
  Result<TrainSummary> result = makeError("not run");
  std::vector<proto::TrainEvent> events;
};

Run train(const proto::Project& p, TrainOptions o) {
  Run r;
  r.result = runTraining(p, o, [&](const proto::TrainEvent& e) { r.events.push_back(e); });
  return r;
}

}  // namespace

class TestCheckpoint : public QObject {
  Q_OBJECT

 private slots:
  void resumeAfterSigkillMatchesAnUninterruptedRun() {
    QTemporaryDir dir;
    std::string project = dir.filePath("slow.nlproj").toStdString();
    QVERIFY(saveProject(project, droppingSpirals()).ok());
    QString full = dir.filePath("full.pb"), killed = dir.filePath("killed.pb");
    QString ckA = dir.filePath("ckA"), ckB = dir.filePath("ckB");

    QProcess straight;
    straight.start(NETLOOM_TRAIN_EXE, {QString::fromStdString(project), "--threads", "1", "--quiet",
                                       "--events", full, "--checkpoint-dir", ckA});
    QVERIFY(straight.waitForFinished(300000));
    QCOMPARE(straight.exitCode(), 0);

    // Killed while held at step 60: mid-epoch, ten steps after its second checkpoint,
    // so the resumed run redoes steps the stream already holds.
    QProcess victim;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    const QString hold = dir.filePath("hold");
    env.insert("NETLOOM_HOLD_AT_STEP", "60");
    env.insert("NETLOOM_HOLD_FIFO", hold);
    victim.setProcessEnvironment(env);
    victim.start(NETLOOM_TRAIN_EXE, {QString::fromStdString(project), "--threads", "1", "--quiet",
                                     "--events", killed, "--checkpoint-dir", ckB});
    QVERIFY(victim.waitForStarted());
    const int held = testing::waitForHold(hold);
    QVERIFY2(held >= 0, victim.readAllStandardError().constData());
    ::kill(pid_t(victim.processId()), SIGKILL);
    ::close(held);
    QVERIFY(victim.waitForFinished());
    QCOMPARE(victim.exitStatus(), QProcess::CrashExit);
    QVERIFY(fs::exists(ckB.toStdString() + "/step-000000050"));
    QCOMPARE(stepLosses(killed.toStdString()).rbegin()->first, int64_t(60));

    QProcess resumed;
    resumed.start(NETLOOM_TRAIN_EXE,
                  {QString::fromStdString(project), "--threads", "1", "--quiet", "--events", killed,
                   "--checkpoint-dir", ckB, "--resume", ckB});
    QVERIFY(resumed.waitForFinished(300000));
    QVERIFY2(resumed.exitCode() == 0, resumed.readAllStandardError().constData());

    auto a = stepLosses(full.toStdString()), b = stepLosses(killed.toStdString());
    QVERIFY(a.size() > 100);
    QCOMPARE(a.size(), b.size());
    for (const auto& [step, loss] : a) {
      QVERIFY2(b.count(step), qPrintable(QString("step %1 missing").arg(step)));
      if (b[step] != loss)
        QFAIL(qPrintable(QString("step %1: %2 uninterrupted, %3 resumed")
                             .arg(step)
                             .arg(loss, 0, 'g', 17)
                             .arg(b[step], 0, 'g', 17)));
    }
    // The stream stays readable and ends with the resumed run's Finished.
    auto events = readEvents(killed.toStdString());
    QVERIFY(events.ok());
    QVERIFY(events->events.back().has_finished());
    auto reference = readEvents(full.toStdString());
    QCOMPARE(events->events.back().finished().test_accuracy(),
             reference->events.back().finished().test_accuracy());
    // keep_last 3: at most three step folders remain.
    int folders = 0;
    for (const auto& e : fs::directory_iterator(ckB.toStdString()))
      folders += e.path().filename().string().rfind("step-", 0) == 0;
    QVERIFY(folders >= 1 && folders <= 3);
  }

  // The conv+BN project stores its convolution weights and their Adam moments
  // packed; its checkpoints hold PyTorch's layout, so a run resumes from them in the
  // same layouts with the very same losses, and with --plain-layouts to rounding.
  void packedWeightsResumeInEitherLayout() {
    auto loaded = loadProject(std::string(NETLOOM_SOURCE_DIR) + "/projects/fashion-convbn.nlproj");
    QVERIFY(loaded.ok());
    proto::Project p = *loaded;
    p.mutable_train()->mutable_checkpoint()->set_every_steps(4);
    p.mutable_train()->mutable_checkpoint()->set_keep_last(4);
    QTemporaryDir dir;
    TrainOptions o;
    o.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
    o.epochs = 1;
    o.maxSteps = 8;
    o.batchSize = 32;
    o.threads = 1;
    o.trainLimit = 512;
    o.testLimit = 64;
    o.checkpointDir = dir.filePath("ck").toStdString();
    Run straight = train(p, o);
    QVERIFY2(straight.result.ok(),
             straight.result.ok() ? "" : straight.result.error().message.c_str());
    std::map<int64_t, double> want;
    for (const auto& e : straight.events)
      if (e.has_step()) want[e.step().step()] = e.step().loss();
    QCOMPARE(int(want.size()), 8);
    auto ckpt = readCheckpoint(o.checkpointDir + "/step-000000004");
    QVERIFY2(ckpt.ok(), ckpt.ok() ? "" : ckpt.error().message.c_str());
    QCOMPARE(ckpt->position.step, int64_t(4));
    for (bool plain : {false, true}) {
      TrainOptions r = o;
      r.resume = o.checkpointDir + "/step-000000004";
      r.checkpointDir = dir.filePath(plain ? "plain" : "same").toStdString();
      r.plainLayouts = plain;
      Run resumed = train(p, r);
      QVERIFY2(resumed.result.ok(),
               resumed.result.ok() ? "" : resumed.result.error().message.c_str());
      int compared = 0;
      for (const auto& e : resumed.events) {
        if (!e.has_step()) continue;
        double a = want.at(e.step().step()), b = e.step().loss();
        double tol = plain ? 1e-3 * std::fabs(a) : 0.0;
        QVERIFY2(std::fabs(a - b) <= tol, qPrintable(QString("step %1%2: %3 straight, %4 resumed")
                                                         .arg(e.step().step())
                                                         .arg(plain ? " (plain layouts)" : "")
                                                         .arg(a, 0, 'g', 9)
                                                         .arg(b, 0, 'g', 9)));
        ++compared;
      }
      QCOMPARE(compared, 4);
    }
  }

  void checkpointOfAnotherModelIsRefused() {
    QTemporaryDir dir;
    proto::Project p = spirals();
    p.mutable_train()->mutable_checkpoint()->set_every_epochs(1);
    TrainOptions o;
    o.epochs = 1;
    o.checkpointDir = dir.filePath("ck").toStdString();
    QVERIFY(train(p, o).result.ok());
    proto::Project other = spirals();
    for (auto& n : *other.mutable_model()->mutable_nodes())
      if (n.name() == "fc1") (*n.mutable_attrs())["out_features"].set_i(32);
    TrainOptions r;
    r.resume = o.checkpointDir;
    Run run = train(other, r);
    QVERIFY(!run.result.ok());
    QVERIFY2(run.result.error().message.find("'fc1.weight'") != std::string::npos,
             run.result.error().message.c_str());
    QVERIFY(run.events.back().has_failed());
  }

  void halfWrittenCheckpointNeverReplacesTheLastGoodOne() {
    QTemporaryDir dir;
    proto::Project p = spirals();
    p.mutable_train()->mutable_checkpoint()->set_every_epochs(1);
    TrainOptions o;
    o.epochs = 2;
    o.checkpointDir = dir.filePath("ck").toStdString();
    QVERIFY(train(p, o).result.ok());
    auto good = readCheckpoint(o.checkpointDir);
    QVERIFY(good.ok());
    // A crash while writing the next checkpoint leaves a temporary folder with a
    // truncated state file; `latest` still names the last complete checkpoint.
    fs::path torn = fs::path(o.checkpointDir) / "step-000009999.tmp-4242";
    fs::create_directories(torn);
    fs::copy_file(fs::path(good->path) / "state.safetensors", torn / "state.safetensors");
    fs::resize_file(torn / "state.safetensors", 100);
    auto again = readCheckpoint(o.checkpointDir);
    QVERIFY(again.ok());
    QCOMPARE(again->path, good->path);
    QCOMPARE(again->position.step, good->position.step);
    // A damaged checkpoint that is named explicitly is refused with the file named.
    fs::resize_file(fs::path(good->path) / "state.safetensors", 100);
    auto broken = readCheckpoint(good->path);
    QVERIFY(!broken.ok());
    QVERIFY2(broken.error().message.find("state.safetensors") != std::string::npos,
             broken.error().message.c_str());
  }

  void keepsTheBestCheckpoint() {
    QTemporaryDir dir;
    proto::Project p = spirals();
    auto* ck = p.mutable_train()->mutable_checkpoint();
    ck->set_every_epochs(1);
    ck->set_keep_last(2);
    ck->set_keep_best("test_accuracy");
    TrainOptions o;
    o.epochs = 6;
    o.checkpointDir = dir.filePath("ck").toStdString();
    Run r = train(p, o);
    QVERIFY2(r.result.ok(), r.result.ok() ? "" : r.result.error().message.c_str());
    int steps = 0;
    for (const auto& e : fs::directory_iterator(o.checkpointDir))
      steps += e.path().filename().string().rfind("step-", 0) == 0;
    QCOMPARE(steps, 2);
    auto best = readCheckpoint(o.checkpointDir + "/best");
    QVERIFY(best.ok());
    double bestAcc = 0;
    int bestEpoch = 0;
    for (const auto& e : r.events)
      if (e.has_epoch() && e.epoch().test_metrics().at("accuracy") > bestAcc)
        bestAcc = e.epoch().test_metrics().at("accuracy"), bestEpoch = e.epoch().epoch();
    QCOMPARE(best->position.epoch, bestEpoch + 1);  // saved at the start of the next epoch
  }

  void earlyStoppingHonoursPatience() {
    proto::Project p = spirals();
    auto* es = p.mutable_train()->mutable_early_stopping();
    es->set_metric("train_loss");
    es->set_mode(proto::MAX);  // a falling loss never "improves": stop after patience
    es->set_patience(2);
    TrainOptions o;
    o.epochs = 10;
    Run r = train(p, o);
    QVERIFY(r.result.ok());
    QVERIFY(r.result->stoppedEarly);
    QCOMPARE(r.result->epochs, 3);
    bool logged = false;
    for (const auto& e : r.events)
      logged =
          logged || (e.has_log() && e.log().text().find("early stopping") != std::string::npos);
    QVERIFY(logged);
  }

  // A PyTorch state dict saved as it is carries BatchNorm's step counter, an int64
  // scalar NetLoom has no use for: it loads, and a counter beside no BatchNorm does not.
  void pytorchStateDictWithBatchCounterLoads() {
    QTemporaryDir dir;
    proto::Project p = spirals();
    auto* bn = p.mutable_model()->add_nodes();
    bn->set_name("bn");
    bn->set_op("BatchNorm");
    bn->add_inputs("fc1");
    for (auto& n : *p.mutable_model()->mutable_nodes())
      if (n.name() == "act1") n.set_inputs(0, "bn");
    std::string path = dir.filePath("w.safetensors").toStdString();
    TrainOptions o;
    o.maxSteps = 1;
    o.saveWeights = path;
    QVERIFY(train(p, o).result.ok());
    auto tensors = readSafetensors(path);
    QVERIFY(tensors.ok());
    NamedTensor counter;
    counter.name = "bn.num_batches_tracked";
    counter.dtype = DType::I64;
    counter.shape = {};
    int64_t steps = 1;
    counter.data.resize(sizeof steps);
    std::memcpy(counter.data.data(), &steps, sizeof steps);
    tensors->push_back(counter);
    QVERIFY(writeSafetensors(path, *tensors).ok());
    TrainOptions load;
    load.initWeights = path;
    load.maxSteps = 1;
    Run loaded = train(p, load);
    QVERIFY2(loaded.result.ok(), loaded.result.ok() ? "" : loaded.result.error().message.c_str());

    tensors->back().name = "fc1.num_batches_tracked";
    QVERIFY(writeSafetensors(path, *tensors).ok());
    Run refused = train(p, load);
    QVERIFY(!refused.result.ok());
    QVERIFY2(refused.result.error().message.find("'fc1.num_batches_tracked'") != std::string::npos,
             refused.result.error().message.c_str());
  }

  void metricsThatDoNotExistAreRefused() {
    proto::Project p = spirals();
    p.mutable_train()->mutable_early_stopping()->set_metric("val_loss");
    Run r = train(p, {});
    QVERIFY(!r.result.ok());
    QVERIFY2(r.result.error().message.find("validation") != std::string::npos,
             r.result.error().message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestCheckpoint)
#include "tst_checkpoint.moc"
