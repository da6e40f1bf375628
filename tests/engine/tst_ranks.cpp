// Data-parallel jobs as a user runs them (`netloom-train --ranks N`), on real
// Fashion-MNIST: two ranks at batch 32 step as one rank at batch 64; a checkpoint
// written by two ranks resumes on one; a rank killed mid-run fails the job naming it
// and leaves no process or folder behind; the accuracy floor; bad settings named.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QtTest>
#include <cmath>

#include "../common/cli.h"
#include "../common/fashion.h"
#include "../common/wait.h"
#include "../common/weights.h"
#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"

using netloom::testing::Outcome;
using netloom::testing::runTrain;
using netloom::testing::weightsDiffer;

namespace {

using netloom::testing::haveFashion;

// Fashion-MNIST through an MLP with SGD and momentum, no dropout; `norm` puts a
// BatchNorm after the first layer, synchronised across ranks or not.
QString writeProject(const QTemporaryDir& dir, const QString& extraTrain = {},
                     const QString& norm = {},
                     const QString& optimizer = "kind: SGD lr: 0.05 momentum: 0.9") {
  const QString path = dir.filePath(norm.isEmpty() ? "mlp.nlproj" : "mlp-" + norm + ".nlproj");
  const QString act = norm.isEmpty() ? QString(R"(nodes { name: "act" op: "ReLU" inputs: "fc1" })")
                                     : QString(R"(nodes { name: "bn" op: "BatchNorm" inputs: "fc1"
                             attrs { key: "sync" value { b: %1 } } }
          nodes { name: "act" op: "ReLU" inputs: "bn" })")
                                           .arg(norm == "sync" ? "true" : "false");
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(QString(R"(
name: "ranks"
model {
  nodes { name: "image" op: "Input" attrs { key: "shape" value { ints { values: [1, 28, 28] } } } }
  nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } }
          attrs { key: "dtype" value { s: "int32" } } }
  nodes { name: "flat" op: "Flatten" inputs: "image" }
  nodes { name: "fc1" op: "Linear" inputs: "flat" attrs { key: "out_features" value { i: 64 } } }
  %2
  nodes { name: "logits" op: "Linear" inputs: "act" attrs { key: "out_features" value { i: 10 } } }
  nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["logits", "label"] }
  nodes { name: "accuracy" op: "Accuracy" inputs: ["logits", "label"] }
}
data {
  idx {
    train_images: "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
    train_labels: "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"
    test_images: "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
    test_labels: "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
  }
  normalization { kind: FIXED scale: 0.00392156862745098 mean: 0.2860 std: 0.3530 }
  train_limit: 4000
  test_limit: 1001
}
train {
  loss: "loss"
  optimizer { %3 }
  epochs: 2
  seed: 7
  %1
}
)")
              .arg(extraTrain, act, optimizer)
              .replace("/usr/share/datasets/fashion-mnist", NETLOOM_FASHION_DIR)
              .toUtf8());
  return path;
}

std::map<int64_t, double> stepLosses(const QString& events) {
  std::map<int64_t, double> out;
  auto read = netloom::readEvents(events.toStdString());
  if (read.ok())
    for (const auto& e : read->events)
      if (e.has_step()) out[e.step().step()] = e.step().loss();
  return out;
}

QString rankPid(const QString& events, int rank) {
  auto read = netloom::readEvents(events.toStdString());
  if (!read.ok()) return {};
  const QString prefix = QString("rank %1: pid ").arg(rank);
  for (const auto& e : read->events)
    if (e.has_log()) {
      QString text = QString::fromStdString(e.log().text());
      if (text.startsWith(prefix)) return text.mid(prefix.size()).section(' ', 0, 0);
    }
  return {};
}

}  // namespace

class TestRanks : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    if (!haveFashion())
      QSKIP("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)");
  }

  // The same losses and weights within 1e-5, relative: twenty steps of momentum SGD
  // and of AdamW, and a whole epoch whose last batch is short (4000 samples in
  // batches of 64: 62 full and one of 32, 16 per rank).
  void twoRanksStepAsOneRankWithTheirBatch_data() {
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<QStringList>("length");
    QTest::addColumn<int>("steps");
    QTest::newRow("momentum sgd") << QString("kind: SGD lr: 0.05 momentum: 0.9")
                                  << QStringList{"--max-steps", "20"} << 20;
    QTest::newRow("adamw") << QString("kind: ADAMW lr: 0.002 weight_decay: 0.01")
                           << QStringList{"--max-steps", "20"} << 20;
    QTest::newRow("short last batch")
        << QString("kind: ADAM lr: 0.001") << QStringList{"--epochs", "1"} << 63;
  }
  void twoRanksStepAsOneRankWithTheirBatch() {
    QFETCH(QString, optimizer);
    QFETCH(QStringList, length);
    QFETCH(int, steps);
    QTemporaryDir dir;
    const QString project = writeProject(dir, {}, {}, optimizer);
    const QStringList common = QStringList{project, "--quiet"} + length;
    Outcome two = runTrain(common + QStringList{"--ranks", "2", "--batch-size", "32", "--events",
                                                dir.filePath("two.pb"), "--save-weights",
                                                dir.filePath("two.safetensors")});
    QVERIFY2(two.code == 0, qPrintable(two.err));
    Outcome one = runTrain(common + QStringList{"--batch-size", "64", "--threads", "1", "--events",
                                                dir.filePath("one.pb"), "--save-weights",
                                                dir.filePath("one.safetensors")});
    QVERIFY2(one.code == 0, qPrintable(one.err));
    auto a = stepLosses(dir.filePath("one.pb")), b = stepLosses(dir.filePath("two.pb"));
    QCOMPARE(a.size(), size_t(steps));
    QCOMPARE(b.size(), size_t(steps));
    for (const auto& [step, loss] : a)
      QVERIFY2(std::fabs(loss - b[step]) <= 1e-5 * std::fabs(loss),
               qPrintable(QString("step %1: %2 against %3").arg(step).arg(loss).arg(b[step])));
    double differ = weightsDiffer(dir.filePath("one.safetensors"), dir.filePath("two.safetensors"));
    QVERIFY2(differ >= 0 && differ <= 1e-5, qPrintable(QString::number(differ)));
    // The job's stream says where each rank ran, and rank 1 logged to its file.
    QVERIFY(!rankPid(dir.filePath("two.pb"), 1).isEmpty());
    QVERIFY(QFile::exists(dir.filePath("logs/rank-1.log")));
  }

  // Ranks that are threads of one process (--thread-ranks) step exactly as ranks that
  // are processes: two ranks' sums are the same in either order, so the weights are
  // equal bit for bit; with BatchNorm synchronised through the same communicator too.
  void threadRanksStepAsProcessRanks_data() {
    QTest::addColumn<QString>("norm");
    QTest::newRow("mlp") << QString();
    QTest::newRow("synchronised BatchNorm") << QString("sync");
  }
  void threadRanksStepAsProcessRanks() {
    QFETCH(QString, norm);
    QTemporaryDir dir;
    const QString project = writeProject(dir, {}, norm);
    const QStringList common{project, "--max-steps", "12", "--quiet", "--batch-size", "32"};
    Outcome threads =
        runTrain(common + QStringList{"--thread-ranks", "2", "--events", dir.filePath("threads.pb"),
                                      "--save-weights", dir.filePath("threads.safetensors")});
    QVERIFY2(threads.code == 0, qPrintable(threads.err));
    Outcome procs = runTrain(
        common + QStringList{"--ranks", "2", "--save-weights", dir.filePath("procs.safetensors")});
    QVERIFY2(procs.code == 0, qPrintable(procs.err));
    QCOMPARE(weightsDiffer(dir.filePath("threads.safetensors"), dir.filePath("procs.safetensors")),
             0.0);
    QCOMPARE(stepLosses(dir.filePath("threads.pb")).size(), size_t(12));
  }

  // With BatchNorm synchronised across the ranks, two ranks still step as one rank
  // with their batch; with each rank's own statistics (the default), they do not.
  void syncBatchNormStepsAsOneRank() {
    QTemporaryDir dir;
    std::map<QString, std::map<int64_t, double>> losses;
    for (const QString norm : {"sync", "local"}) {
      const QString project = writeProject(dir, {}, norm);
      const QStringList common{project, "--max-steps", "10", "--quiet"};
      Outcome two = runTrain(common + QStringList{"--ranks", "2", "--batch-size", "32", "--events",
                                                  dir.filePath(norm + "-two.pb"), "--save-weights",
                                                  dir.filePath(norm + "-two.safetensors")});
      QVERIFY2(two.code == 0, qPrintable(two.err));
      Outcome one =
          runTrain(common + QStringList{"--batch-size", "64", "--threads", "1", "--events",
                                        dir.filePath(norm + "-one.pb"), "--save-weights",
                                        dir.filePath(norm + "-one.safetensors")});
      QVERIFY2(one.code == 0, qPrintable(one.err));
      double differ = weightsDiffer(dir.filePath(norm + "-one.safetensors"),
                                    dir.filePath(norm + "-two.safetensors"));
      QVERIFY2(differ >= 0, "weights unreadable");
      if (norm == "sync")
        QVERIFY2(differ <= 1e-5, qPrintable(QString::number(differ)));
      else
        QVERIFY2(differ > 1e-4, qPrintable(QString::number(differ)));
    }
  }

  // Written by two ranks at step 10, resumed by one rank at batch 64: steps 11 to 20
  // as in one uninterrupted run.
  void checkpointsCrossRankCounts() {
    QTemporaryDir dir;
    const QString project = writeProject(dir, "checkpoint { every_steps: 10 }");
    Outcome whole = runTrain({project, "--max-steps", "20", "--batch-size", "64", "--quiet",
                              "--threads", "1", "--events", dir.filePath("whole.pb"),
                              "--checkpoint-dir", dir.filePath("ck-whole")});
    QVERIFY2(whole.code == 0, qPrintable(whole.err));
    Outcome first = runTrain({project, "--max-steps", "10", "--ranks", "2", "--batch-size", "32",
                              "--quiet", "--checkpoint-dir", dir.filePath("ck")});
    QVERIFY2(first.code == 0, qPrintable(first.err));
    Outcome rest = runTrain({project, "--max-steps", "20", "--batch-size", "64", "--threads", "1",
                             "--quiet", "--resume", dir.filePath("ck"), "--checkpoint-dir",
                             dir.filePath("ck2"), "--events", dir.filePath("rest.pb")});
    QVERIFY2(rest.code == 0, qPrintable(rest.err));
    auto a = stepLosses(dir.filePath("whole.pb")), b = stepLosses(dir.filePath("rest.pb"));
    QCOMPARE(b.size(), size_t(10));
    for (const auto& [step, loss] : b)
      QVERIFY2(std::fabs(loss - a[step]) <= 1e-5 * std::fabs(a[step]),
               qPrintable(QString("step %1: %2 against %3").arg(step).arg(loss).arg(a[step])));
  }

  void aKilledRankFailsTheJobAndLeavesNothing() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("tmp"));
    const QString project = writeProject(dir);
    const QString events = dir.filePath("job.pb"), fifo = dir.filePath("hold");
    QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("NETLOOM_HOLD_AT_STEP", "3");
    env.insert("NETLOOM_HOLD_FIFO", fifo);
    env.insert("TMPDIR", dir.filePath("tmp"));  // where the job's rendezvous folder goes
    p.setProcessEnvironment(env);
    p.start(NETLOOM_TRAIN_EXE, {project, "--ranks", "2", "--batch-size", "32", "--quiet",
                                "--events", events, "--rank-timeout", "30"});
    const int held = netloom::testing::waitForHold(fifo);  // rank 0, after step 3
    QVERIFY2(held >= 0, p.readAllStandardError().constData());
    const QString pid0 = rankPid(events, 0), pid1 = rankPid(events, 1);
    QVERIFY(!pid0.isEmpty() && !pid1.isEmpty());
    QVERIFY(!QDir(dir.filePath("tmp")).isEmpty());
    QCOMPARE(::kill(pid_t(pid1.toInt()), SIGKILL), 0);
    QCOMPARE(::write(held, "go\n", 3), ssize_t(3));
    ::close(held);
    QVERIFY(p.waitForFinished(netloom::testing::kHangMs));
    QCOMPARE(p.exitCode(), 1);
    auto read = netloom::readEvents(events.toStdString());
    QVERIFY(read.ok() && !read->events.empty());
    const auto& last = read->events.back();
    QVERIFY(last.has_failed());
    const QString why = QString::fromStdString(last.failed().message());
    QVERIFY2(
        why.startsWith("rank 1 (pid " + pid1 + " on ") && why.contains("was killed by signal 9"),
        qPrintable(why));
    int failed = 0;
    for (const auto& e : read->events) failed += e.has_failed() ? 1 : 0;
    QCOMPARE(failed, 1);  // one Failed event, the job's
    // No rank is left, and the rendezvous folder is gone.
    QCOMPARE(::kill(pid_t(pid0.toInt()), 0), -1);
    QCOMPARE(::kill(pid_t(pid1.toInt()), 0), -1);
    QVERIFY(QDir(dir.filePath("tmp")).isEmpty());
  }

  // One epoch of Fashion-MNIST (the whole training set) on two ranks.
  void twoRanksReachTheAccuracyFloor() {
    QTemporaryDir dir;
    // The example project, its data where this machine keeps Fashion-MNIST.
    auto example = netloom::loadProject(NETLOOM_SOURCE_DIR "/projects/fashion-mlp.nlproj");
    QVERIFY(example.ok());
    const QString project = dir.filePath("fashion-mlp.nlproj");
    QVERIFY(netloom::saveProject(project.toStdString(), netloom::testing::withFashionDir(*example))
                .ok());
    Outcome o = runTrain({project, "--ranks", "2", "--epochs", "1", "--quiet", "--checkpoint-dir",
                          dir.filePath("ck"), "--rank-logs", dir.filePath("logs"), "--summary-json",
                          dir.filePath("s.json")});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    QFile f(dir.filePath("s.json"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto json = QJsonDocument::fromJson(f.readAll()).object();
    QVERIFY2(json["test_accuracy"].toDouble() >= 0.80,
             qPrintable(QString::number(json["test_accuracy"].toDouble())));
  }

  void badSettingsAreNamed() {
    QTemporaryDir dir;
    const QString project = writeProject(dir);
    Outcome zero = runTrain({project, "--ranks", "0"});
    QCOMPARE(zero.code, 2);
    QVERIFY2(zero.err.contains("--ranks needs a whole number from 1"), qPrintable(zero.err));
    Outcome many = runTrain({project, "--ranks", "4096"});
    QCOMPARE(many.code, 2);
    QVERIFY2(many.err.contains("--ranks 4096: this computer has") && many.err.contains("cores"),
             qPrintable(many.err));
    // GPU ranks take one GPU each: on a machine without one, the job says why.
    Outcome gpus = runTrain({project, "--ranks", "2", "--devices", "cuda"});
    if (gpus.err.contains("no NVIDIA driver") || gpus.err.contains("built without CUDA")) {
      QCOMPARE(gpus.code, 2);
    } else {
      QVERIFY2(gpus.code == 0 || gpus.err.contains("GPUs, and each rank needs one"),
               qPrintable(gpus.err));
    }
    Outcome both = runTrain({project, "--ranks", "2", "--thread-ranks", "2"});
    QCOMPARE(both.code, 2);
    QVERIFY2(both.err.contains("--thread-ranks and --ranks"), qPrintable(both.err));
    Outcome threads = runTrain({project, "--thread-ranks", "4096"});
    QCOMPARE(threads.code, 2);
    QVERIFY2(threads.err.contains("--thread-ranks 4096: this computer has"),
             qPrintable(threads.err));
    Outcome gpuThreads = runTrain({project, "--thread-ranks", "2", "--devices", "cuda"});
    QCOMPARE(gpuThreads.code, 2);
    QVERIFY2(gpuThreads.err.contains("train.distributed.threads) train on the CPU") ||
                 gpuThreads.err.contains("--devices cuda"),
             qPrintable(gpuThreads.err));
    const QString negative = writeProject(dir, "distributed { ranks: -1 }");
    Outcome bad = runTrain({negative});
    QCOMPARE(bad.code, 2);
    QVERIFY2(bad.err.contains("train.distributed.ranks must be at least 1"), qPrintable(bad.err));
  }
};

QTEST_GUILESS_MAIN(TestRanks)
#include "tst_ranks.moc"
