// netloom-train as a user runs it: exit codes, messages that name the file, line,
// node and port, the summary JSON, the event stream and --explain.
#include <sys/sysmacros.h>

#include <QtTest>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>

#include "../common/cli.h"
#include "../common/wait.h"
#include "engine/io/event_stream.h"
#include "engine/io/json.h"
#include "engine/io/safetensors.h"
#include "output_fixture.h"

namespace {

using netloom::testing::Outcome;
using netloom::testing::runTrain;

QString project(const char* name) {
  return QString(NETLOOM_SOURCE_DIR) + "/projects/" + name;
}

QString writeProject(QTemporaryDir& dir, const QString& name, const QString& text) {
  QString path = dir.filePath(name);
  QFile f(path);
  f.open(QIODevice::WriteOnly);
  f.write(text.toUtf8());
  return path;
}

QString spiralsWithModel(const QString& model) {
  QFile f(project("spirals.nlproj"));
  f.open(QIODevice::ReadOnly);
  QString text = QString::fromUtf8(f.readAll());
  int start = text.indexOf("model {"), end = text.indexOf("\ndata {");
  return text.left(start) + "model {\n" + model + "\n}" + text.mid(end);
}

}  // namespace

class TestCli : public QObject {
  Q_OBJECT

 private slots:
  void versionAndUsage() {
    Outcome v = runTrain({"--version"});
    QCOMPARE(v.code, 0);
    QVERIFY(v.out.startsWith("netloom-train "));
    Outcome u = runTrain({project("spirals.nlproj"), "--frobnicate"});
    QCOMPARE(u.code, 2);
    QVERIFY(u.err.contains("unknown option '--frobnicate'"));
    QVERIFY(u.err.contains("usage:"));
    Outcome n = runTrain({project("spirals.nlproj"), "--threads", "zero"});
    QCOMPARE(n.code, 2);
    QVERIFY(n.err.contains("--threads"));
    // --help is generated from the options themselves: every group, every option.
    Outcome h = runTrain({"--help"});
    QCOMPARE(h.code, 0);
    for (const char* part :
         {"usage: netloom-train PROJECT.nlproj", "--epochs N", "--disable-pass", "--thread-ranks N",
          "--export-onnx F", "--import-onnx F", "Conversions:", "Data parallel:"})
      QVERIFY2(h.out.contains(part), part);
    QVERIFY2(!h.out.contains("--world-size"), "the launcher's own options stay out of --help");
    // Given twice, an option takes its last value (a rank launcher appends its own).
    QTemporaryDir dir;
    const QString summary = dir.filePath("s.json");
    Outcome twice = runTrain({project("spirals.nlproj"), "--max-steps", "1", "--max-steps", "2",
                              "--quiet", "--test-limit", "8", "--summary-json", summary});
    QVERIFY2(twice.code == 0, qPrintable(twice.err));
    QFile f(summary);
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto json = netloom::Json::parse(f.readAll().toStdString());
    QVERIFY(json.ok() && json->find("steps"));
    QCOMPARE(json->find("steps")->asNumber(), 2.0);
    Outcome conv = runTrain(
        {project("spirals.nlproj"), "--export-onnx", dir.filePath("m.onnx"), "--epochs", "3"});
    QCOMPARE(conv.code, 2);
    QVERIFY2(conv.err.contains("'--epochs' does not go with a conversion"), qPrintable(conv.err));
  }

  void syntaxErrorNamesFileLineAndColumn() {
    QTemporaryDir dir;
    QString path = writeProject(dir, "broken.nlproj",
                                "name: \"x\"\nmodel {\n  nodes { name: \"a\" op: }\n}\n");
    Outcome o = runTrain({path});
    QCOMPARE(o.code, 2);
    QVERIFY2(o.err.contains(path + ":3:"), qPrintable(o.err));
  }

  void missingProjectFileIsNamed() {
    Outcome o = runTrain({"/nonexistent/model.nlproj"});
    QCOMPARE(o.code, 2);
    QVERIFY(o.err.contains("/nonexistent/model.nlproj"));
  }

  void modelErrorsNameNodeAndPort_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QStringList>("mentions");
    const QString inputs =
        "nodes { name: 'point' op: 'Input' attrs { key: 'shape' value { ints { values: [2] } } } "
        "}\n"
        "nodes { name: 'label' op: 'Input' attrs { key: 'field' value { s: 'label' } } attrs { "
        "key: "
        "'dtype' value { s: 'int32' } } }\n";
    const QString head =
        "nodes { name: 'logits' op: 'Linear' inputs: 'point' attrs { key: 'out_features' value { "
        "i: "
        "3 } } }\nnodes { name: 'loss' op: 'SoftmaxCrossEntropy' inputs: ['logits', 'label'] }\n";
    QTest::newRow("unknown op") << inputs +
                                       "nodes { name: 'mystery' op: 'Conv9d' inputs: 'point' }\n" +
                                       head
                                << QStringList{"'mystery'", "Conv9d"};
    QTest::newRow("dangling") << inputs +
                                     "nodes { name: 'logits' op: 'Linear' inputs: 'pint' attrs { "
                                     "key: 'out_features' value { i: 3 } } }\nnodes { name: 'loss' "
                                     "op: 'SoftmaxCrossEntropy' inputs: ['logits', 'label'] }\n"
                              << QStringList{"'logits'", "input 'x'", "'pint'"};
    QTest::newRow("cycle") << inputs +
                                  "nodes { name: 'a' op: 'Add' inputs: ['point', 'b'] }\nnodes { "
                                  "name: 'b' op: 'Tanh' inputs: 'a' }\n" +
                                  head
                           << QStringList{"cycle", "'a'", "'b'"};
    QTest::newRow("shape mismatch")
        << inputs +
               "nodes { name: 'wide' op: 'Linear' inputs: 'point' attrs { key: 'out_features' "
               "value { i: 5 } } }\nnodes { name: 'sum' op: 'Add' inputs: ['point', 'wide'] }\n" +
               head
        << QStringList{"'sum'", "input 'b'", "×5", "×2"};
  }
  void modelErrorsNameNodeAndPort() {
    QFETCH(QString, model);
    QFETCH(QStringList, mentions);
    QTemporaryDir dir;
    QString path = writeProject(dir, "bad.nlproj", spiralsWithModel(model));
    Outcome o = runTrain({path, "--quiet"});
    QVERIFY2(o.code != 0, qPrintable(o.err));
    for (const QString& m : mentions)
      QVERIFY2(o.err.contains(m), qPrintable(m + " missing: " + o.err));
  }

  void summaryJsonAndEventStream() {
    QTemporaryDir dir;
    QString summary = dir.filePath("summary.json"), events = dir.filePath("events.pb");
    Outcome o = runTrain({project("spirals.nlproj"), "--epochs", "3", "--threads", "1",
                          "--summary-json", summary, "--events", events, "--warmup-steps", "20"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    QFile f(summary);
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto json = netloom::Json::parse(f.readAll().toStdString());
    QVERIFY(json.ok());
    for (const char* key :
         {"epochs", "steps", "train_loss", "test_loss", "test_accuracy", "samples_per_sec",
          "steady_samples_per_sec", "wall_seconds", "compile_ms", "arena_bytes", "naive_bytes"}) {
      const netloom::Json* v = json->find(key);
      QVERIFY2(v && v->isNumber(), key);
    }
    // The steps after the warm-up are timed too (3 epochs have more than 20 steps).
    QVERIFY(json->find("steady_samples_per_sec")->asNumber() > 0);
    QCOMPARE(json->find("epochs")->asNumber(), 3.0);
    QVERIFY(json->find("arena_bytes")->asNumber() <= json->find("naive_bytes")->asNumber());

    auto read = netloom::readEvents(events.toStdString());
    QVERIFY(read.ok());
    const auto& ev = read->events;
    QVERIFY(ev.front().has_run_started());
    QVERIFY(ev.back().has_finished());
    int steps = 0, epochs = 0;
    for (const auto& e : ev) steps += e.has_step(), epochs += e.has_epoch();
    QCOMPARE(double(steps), json->find("steps")->asNumber());
    QCOMPARE(epochs, 3);
    QCOMPARE(ev.back().finished().test_accuracy(), json->find("test_accuracy")->asNumber());
  }

  // --summary-json, --save-weights and --events never replace what their paths name.
  // A FIFO, a link and a device node of the test's own come first; /dev/null only
  // once those came through.
  void outputPathsAreNeverReplaced() {
    using namespace outputfixture;
    QTemporaryDir dir;
    const std::string fifo = dir.filePath("summary.fifo").toStdString();
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    QVERIFY(QDir(dir.path()).mkpath("w"));
    const std::string link = dir.filePath("weights").toStdString();
    QCOMPARE(::symlink("w/weights.safetensors", link.c_str()), 0);
    const std::string node = dir.filePath("null").toStdString();
    const dev_t nullDevice = makedev(1, 3);
    const bool haveNode = ::mknod(node.c_str(), S_IFCHR | 0666, nullDevice) == 0;
    if (!haveNode && ::geteuid() == 0)
      QSKIP(qPrintable(QString("root cannot make a device node in ") + dir.path() + " (" +
                       std::strerror(errno) + "), so /dev/null is not tried"));
    const QStringList train = {
        project("spirals.nlproj"), "--max-steps", "2", "--threads", "1", "--quiet"};
    {
      FifoReader reader(fifo);
      QVERIFY(reader.ok());
      QStringList args = train + QStringList{"--summary-json", QString::fromStdString(fifo),
                                             "--save-weights", QString::fromStdString(link)};
      if (haveNode) args << "--events" << QString::fromStdString(node);
      Outcome o = runTrain(args);
      QVERIFY2(o.code == 0, qPrintable(o.err));
      auto json = netloom::Json::parse(reader.drain());
      QVERIFY(json.ok() && json->find("steps"));
      QCOMPARE(json->find("steps")->asNumber(), 2.0);
    }
    QCOMPARE(typeOf(fifo), mode_t(S_IFIFO));
    QCOMPARE(typeOf(link), mode_t(S_IFLNK));
    QVERIFY(netloom::readSafetensors(dir.filePath("w/weights.safetensors").toStdString()).ok());
    if (haveNode) {
      QCOMPARE(typeOf(node), mode_t(S_IFCHR));
      QCOMPARE(statOf(node).st_rdev, nullDevice);
    }

    // /dev/stdout: through /proc's link to the pipe QProcess reads.
    Outcome toStdout = runTrain(train + QStringList{"--summary-json", "/dev/stdout"});
    QVERIFY2(toStdout.code == 0, qPrintable(toStdout.err));
    QVERIFY2(toStdout.out.startsWith("{\"epochs\":1,\"steps\":2,"), qPrintable(toStdout.out));

    // A folder is refused before any training, naming it.
    const QString events = dir.filePath("events.pb");
    Outcome o =
        runTrain(train + QStringList{"--summary-json", dir.filePath("w"), "--events", events});
    QCOMPARE(o.code, 2);
    QVERIFY2(o.err.contains(dir.filePath("w") + ": it is a directory"), qPrintable(o.err));
    QVERIFY(!QFile::exists(events));

    // Without root /dev/null could not be replaced; with it, the node above came through.
    if (typeOf("/dev/null") != S_IFCHR) QSKIP("this machine has no /dev/null device");
    o = runTrain(train + QStringList{"--summary-json", "/dev/null", "--save-weights", "/dev/null",
                                     "--events", "/dev/null"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    QCOMPARE(typeOf("/dev/null"), mode_t(S_IFCHR));
    QCOMPARE(statOf("/dev/null").st_rdev, nullDevice);
  }

  void failedRunKeepsItsEvents() {
    QTemporaryDir dir;
    QFile f(project("spirals.nlproj"));
    f.open(QIODevice::ReadOnly);
    QString text =
        QString::fromUtf8(f.readAll())
            .replace("optimizer { kind: ADAM lr: 0.01 }", "optimizer { kind: SGD lr: 1e38 }");
    QString path = writeProject(dir, "diverge.nlproj", text);
    QString events = dir.filePath("events.pb");
    Outcome o = runTrain({path, "--events", events});
    QCOMPARE(o.code, 1);
    QVERIFY2(o.err.contains("NaN") || o.err.contains("infinite"), qPrintable(o.err));
    auto read = netloom::readEvents(events.toStdString());
    QVERIFY(read.ok());
    QVERIFY(read->events.back().has_failed());
    QVERIFY(read->events.front().has_run_started());
  }

  // A NaN planted in a weight ends the run at step 1: exit status 1, and the message
  // names the step and the tensor.
  void nanWeightFailsNamingTheTensor() {
    QTemporaryDir dir;
    QString weights = dir.filePath("w.safetensors");
    Outcome first =
        runTrain({project("spirals.nlproj"), "--max-steps", "1", "--save-weights", weights});
    QVERIFY2(first.code == 0, qPrintable(first.err));
    auto tensors = netloom::readSafetensors(weights.toStdString());
    QVERIFY(tensors.ok());
    const float nan = std::nanf("");
    for (auto& t : *tensors)
      if (t.name == "fc2.weight") std::memcpy(t.data.data() + 3 * sizeof nan, &nan, sizeof nan);
    QVERIFY(netloom::writeSafetensors(weights.toStdString(), *tensors).ok());
    QString events = dir.filePath("events.pb");
    Outcome o = runTrain(
        {project("spirals.nlproj"), "--init-weights", weights, "--events", events, "--quiet"});
    QCOMPARE(o.code, 1);
    QVERIFY2(o.err.contains("step 1 ") && o.err.contains("parameter 'fc2.weight' holds NaN"),
             qPrintable(o.err));
    auto read = netloom::readEvents(events.toStdString());
    QVERIFY(read.ok() && read->events.back().has_failed());
  }

  void summaryListsNodesAndTotals() {
    Outcome o = runTrain({project("fashion-mlp.nlproj"), "--summary"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    // 784·256 + 256 + 256·128 + 128 + 128·10 + 10 parameters, as torchinfo counts them.
    QVERIFY2(o.out.contains("235,146 parameters"), qPrintable(o.out));
    QVERIFY(o.out.contains("fc1"));
    QVERIFY(o.out.contains("64×256"));
    // fc1's forward: 64 samples × 256 outputs × 784 inputs × 2.
    QVERIFY(o.out.contains("25,690,112"));
  }

  void profileBreaksDownTimeByOp() {
    Outcome o = runTrain({project("spirals.nlproj"), "--epochs", "1", "--profile", "--quiet"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    QVERIFY(o.out.contains("profile: 47 training steps"));
    QVERIFY(o.out.contains("onednn.sgemm+bias"));
    QVERIFY(o.out.contains("AdamUpdate"));
    // Each matrix kernel is set against the peak measured in the same run.
    QVERIFY2(o.out.contains("peak: ") && o.out.contains("GFLOP/s"), qPrintable(o.out));
    QRegularExpression sgemm(R"(onednn\.sgemm\+bias\s+\d+\s+[\d.]+\s+[\d.]+%\s+([\d.]+)\s+(\d+)%)");
    auto m = sgemm.match(o.out);
    QVERIFY2(m.hasMatch(), qPrintable(o.out));
    QVERIFY(m.captured(1).toDouble() > 0);
  }

  // The training step's FLOPs per sample, as the summary gives them: the MLP's matrix
  // products (forward, each weight's gradient, and the input gradients of all but the
  // first layer) and a little element-wise arithmetic beside them.
  void summaryCountsTheStepsFlops() {
    QTemporaryDir dir;
    QString summary = dir.filePath("summary.json");
    Outcome o = runTrain({project("fashion-mlp.nlproj"), "--max-steps", "1", "--threads", "1",
                          "--train-limit", "256", "--summary-json", summary, "--quiet"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    QFile f(summary);
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto json = netloom::Json::parse(f.readAll().toStdString());
    QVERIFY(json.ok() && json->find("flops_per_sample"));
    const double layers = 784.0 * 256 + 256.0 * 128 + 128.0 * 10;
    const double matrix = 2 * layers + 2 * layers + 2 * (256.0 * 128 + 128.0 * 10);
    const double flops = json->find("flops_per_sample")->asNumber();
    QVERIFY2(flops >= matrix && flops < matrix * 1.01, qPrintable(QString::number(flops)));
  }

  void peakIsMeasured() {
    Outcome o = runTrain({"--peak", "--threads", "1"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    auto json = netloom::Json::parse(o.out.toStdString());
    QVERIFY2(json.ok(), qPrintable(o.out));
    QCOMPARE(json->find("threads")->asNumber(), 1.0);
    QVERIFY(json->find("gflops")->asNumber() > 0);
    QVERIFY(runTrain({"--peak", "--threads", "zero"}).code != 0);
  }

  void explainPrintsPlanKernelsAndMemory() {
    Outcome o = runTrain({project("fashion-mlp.nlproj"), "--explain", "--train-limit", "100"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    QVERIFY(o.out.contains("training plan"));
    QVERIFY(o.out.contains("evaluation plan"));
    QVERIFY(o.out.contains("onednn.sgemm"));
    QVERIFY(o.out.contains("memory: arena"));
    QVERIFY(o.out.contains("fc1.weight/update"));
    QVERIFY(o.out.contains("fused: fc1 + relu1 -> Linear with ReLU"));
    // --no-fuse: every op its own kernel, and the passes say they were off.
    Outcome unfused =
        runTrain({project("fashion-mlp.nlproj"), "--explain", "--train-limit", "100", "--no-fuse"});
    QVERIFY2(unfused.code == 0, qPrintable(unfused.err));
    QVERIFY(!unfused.out.contains("fused:"));
    QVERIFY(unfused.out.contains(QRegularExpression("fusion +\\d+ -> \\d+: off")));
    QVERIFY(unfused.out.contains(QRegularExpression("chains +\\d+ -> \\d+: off")));
  }

  // --explain --ranks N adds the parallel plan; --sbp picks a node's signature, and a
  // hint that cannot be is refused naming the node, as --sbp without ranks is.
  void explainPlansTheRanks() {
    const QString spirals = project("spirals.nlproj");
    Outcome data = runTrain({spirals, "--explain", "--ranks", "2"});
    QVERIFY2(data.code == 0, qPrintable(data.err));
    QVERIFY2(data.out.contains("parallel plan at 2 ranks"), qPrintable(data.out));
    QVERIFY(data.out.contains("fc1 (Linear): S(0) | B, B -> S(0)"));
    QVERIFY(data.out.contains("boxing in all: 0 bytes per rank"));
    Outcome column =
        runTrain({spirals, "--explain", "--ranks", "2", "--sbp", "fc1=B | S(0), S(0) -> S(1)"});
    QVERIFY2(column.code == 0, qPrintable(column.err));
    QVERIFY(column.out.contains("-> fc1: S(1) 64×(64/2)"));
    QVERIFY(
        column.out.contains("boxing S(0) -> B of point for fc1: all-gather, 256 bytes per rank"));
    Outcome bad = runTrain({spirals, "--explain", "--ranks", "2", "--sbp", "act1=P -> P"});
    QVERIFY(bad.code != 0);
    QVERIFY2(bad.err.contains("node 'act1': has no signature 'P -> P'"), qPrintable(bad.err));
    Outcome alone = runTrain({spirals, "--explain", "--sbp", "fc1=B"});
    QVERIFY(alone.code != 0);
    QVERIFY2(alone.err.contains("give --ranks N too"), qPrintable(alone.err));

    // The project's hints (train.distributed.sbp) plan alike; --sbp overrides a node's.
    QFile f(spirals);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QString text = QString::fromUtf8(f.readAll());
    text.replace("\ntrain {",
                 "\ntrain {\n  distributed { sbp { node: \"fc1\" signature: "
                 "\"B | S(0), S(0) -> S(1)\" } }");
    QTemporaryDir dir;
    const QString hinted = writeProject(dir, "hinted.nlproj", text);
    Outcome saved = runTrain({hinted, "--explain", "--ranks", "2"});
    QVERIFY2(saved.code == 0, qPrintable(saved.err));
    QVERIFY2(saved.out.contains("-> fc1: S(1) 64×(64/2)"), qPrintable(saved.out));
    Outcome over =
        runTrain({hinted, "--explain", "--ranks", "2", "--sbp", "fc1=S(0) | B, B -> S(0)"});
    QVERIFY2(over.code == 0, qPrintable(over.err));
    QVERIFY(over.out.contains("-> fc1: S(0) (64/2)×64"));
  }

  // The hold tests use to act on a run in progress: it holds after step N's event
  // until a line comes, and a stop (SIGTERM) ends it there cleanly.
  void holdsAtAStepUntilReleasedOrStopped() {
    QTemporaryDir dir;
    for (bool release : {true, false}) {
      const QString events = dir.filePath(release ? "released.pb" : "stopped.pb");
      const QString fifo = dir.filePath(release ? "released" : "stopped");
      QProcess p;
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("NETLOOM_HOLD_AT_STEP", "5");
      env.insert("NETLOOM_HOLD_FIFO", fifo);
      p.setProcessEnvironment(env);
      p.start(NETLOOM_TRAIN_EXE, {project("spirals.nlproj"), "--epochs", "1", "--threads", "1",
                                  "--quiet", "--events", events});
      const int held = netloom::testing::waitForHold(fifo);
      QVERIFY2(held >= 0, p.readAllStandardError().constData());
      auto sofar = netloom::readEvents(events.toStdString());
      QVERIFY(sofar.ok() && sofar->events.back().has_step());
      QCOMPARE(sofar->events.back().step().step(), int64_t(5));  // and nothing after
      if (release)
        QCOMPARE(::write(held, "go\n", 3), ssize_t(3));
      else
        ::kill(pid_t(p.processId()), SIGTERM);
      QVERIFY(p.waitForFinished(netloom::testing::kHangMs));
      ::close(held);
      QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0,
               p.readAllStandardError().constData());
      auto all = netloom::readEvents(events.toStdString());
      QVERIFY(all.ok() && all->events.back().has_finished());
      QCOMPARE(all->events.back().finished().steps(), int64_t(release ? 47 : 5));
    }
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("NETLOOM_HOLD_AT_STEP", "soon");
    env.insert("NETLOOM_HOLD_FIFO", dir.filePath("bad"));
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(NETLOOM_TRAIN_EXE, {project("spirals.nlproj"), "--quiet"});
    QVERIFY(p.waitForFinished(netloom::testing::kHangMs));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(p.readAllStandardError().contains("NETLOOM_HOLD_AT_STEP"));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
