// Nothing silent: every invalid setting is an error that names its field, file or
// line, values PyTorch accepts are warnings, and no command-line number wraps.
#include <sys/stat.h>

#include <QtTest>

#include "engine/graph/graph.h"
#include "engine/io/project_file.h"
#include "engine/train/project_check.h"
#include "engine/train/trainer.h"

using namespace netloom;

namespace {

struct Outcome {
  int code = -1;
  QString err;
};

Outcome runTrain(const QStringList& args) {
  QProcess p;
  p.start(NETLOOM_TRAIN_EXE, args);
  p.waitForFinished(-1);
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardError())};
}

QString spiralsPath() {
  return QString(NETLOOM_SOURCE_DIR) + "/projects/spirals.nlproj";
}

QString spiralsText() {
  QFile f(spiralsPath());
  f.open(QIODevice::ReadOnly);
  return QString::fromUtf8(f.readAll());
}

proto::Project spirals() {
  auto p = loadProject(spiralsPath().toStdString());
  if (!p) qFatal("%s", p.error().message.c_str());
  return *p;
}

QString write(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
  QString path = dir.filePath(name);
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) qFatal("cannot write");
  return path;
}

// A three-class CSV problem: rows of (a, b, label) with one label replaced.
QByteArray csvRows(int rows, int badRow, const char* badLabel) {
  QByteArray out = "a,b,label\n";
  for (int i = 0; i < rows; ++i) {
    QByteArray label = i == badRow ? QByteArray(badLabel) : QByteArray::number(i % 3);
    out +=
        QByteArray::number(i * 0.1) + "," + QByteArray::number(1 - i * 0.05) + "," + label + "\n";
  }
  return out;
}

const char* kCsvProject = R"(format_version: 1
model {
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [2] } } } }
  nodes {
    name: "label" op: "Input"
    attrs { key: "field" value { s: "label" } }
    attrs { key: "dtype" value { s: "int32" } }
  }
  nodes { name: "fc" op: "Linear" inputs: "x" attrs { key: "out_features" value { i: 3 } } }
  nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["fc", "label"] }
}
data { csv { train_path: "train.csv" test_path: "test.csv" has_header: true } }
train { loss: "loss" batch_size: 8 epochs: 1 }
)";

}  // namespace

class TestValidation : public QObject {
  Q_OBJECT

 private slots:
  void everyExampleProjectIsValid() {
    QDir dir(QString(NETLOOM_SOURCE_DIR) + "/projects");
    const QStringList files = dir.entryList({"*.nlproj"});
    QVERIFY(files.size() >= 5);
    for (const QString& f : files) {
      auto p = loadProject(dir.filePath(f).toStdString());
      QVERIFY2(p.ok(), qPrintable(f));
      std::vector<std::string> warnings;
      Status s = checkProject(*p, &warnings);
      QVERIFY2(s.ok(), qPrintable(f + ": " + QString::fromStdString(s.ok() ? "" : s.message())));
      QVERIFY2(warnings.empty(), qPrintable(f));
    }
  }

  // Each edit of the spirals project is refused with a message naming the field.
  void invalidSettingsNameTheirField_data() {
    QTest::addColumn<QString>("edit");
    QTest::addColumn<QString>("message");
    QTest::newRow("negative batch") << "batch:-4"
                                    << "train.batch_size must be at least 1, got -4";
    QTest::newRow("zero batch") << "batch:0"
                                << "train.batch_size must be at least 1, got 0";
    QTest::newRow("negative epochs") << "epochs:-1"
                                     << "train.epochs must be at least 0, got -1";
    QTest::newRow("negative threads") << "threads:-2"
                                      << "train.threads must be at least 0";
    QTest::newRow("absurd threads") << "threads:100000"
                                    << "train.threads must be at most 1024, got 100000";
    QTest::newRow("negative classes") << "classes:-3"
                                      << "data.synthetic.classes must be at least 2, got -3";
    QTest::newRow("zero classes") << "classes:0"
                                  << "data.synthetic.classes must be at least 2, got 0";
    QTest::newRow("one class") << "classes:1"
                               << "data.synthetic.classes must be at least 2";
    QTest::newRow("negative samples") << "train_samples:-5"
                                      << "data.synthetic.train_samples must be at least 0";
    QTest::newRow("negative test samples") << "test_samples:-1"
                                           << "data.synthetic.test_samples must be at least 0";
    QTest::newRow("negative features") << "features:-2"
                                       << "data.synthetic.features must be at least 0";
    QTest::newRow("NaN noise") << "noise:nan"
                               << "data.synthetic.noise must be a finite number";
    QTest::newRow("negative noise") << "noise:-1"
                                    << "data.synthetic.noise must not be negative";
    QTest::newRow("unknown optimizer") << "optimizer:99"
                                       << "train.optimizer.kind: 99 is not a known value";
    QTest::newRow("unknown schedule") << "schedule:12"
                                      << "train.schedule.kind: 12 is not a known value";
    QTest::newRow("unknown metric mode") << "mode:7"
                                         << "train.early_stopping.mode: 7 is not a known value";
    QTest::newRow("unknown normalization") << "normalization:5"
                                           << "data.normalization.kind: 5 is not a known value";
    QTest::newRow("newer format") << "format:7"
                                  << "format_version 7";
    QTest::newRow("negative format") << "format:-1"
                                     << "format_version must not be negative";
    QTest::newRow("negative eps") << "eps:-1"
                                  << "train.optimizer.eps must not be negative";
    QTest::newRow("NaN lr") << "lr:nan"
                            << "train.optimizer.lr must be a finite number";
    QTest::newRow("negative lr") << "lr:-0.1"
                                 << "train.optimizer.lr must not be negative";
    QTest::newRow("beta1 of 1") << "beta1:1"
                                << "train.optimizer.beta1 must be in [0, 1)";
    QTest::newRow("negative weight decay") << "weight_decay:-1"
                                           << "train.optimizer.weight_decay must not be negative";
    QTest::newRow("nesterov without momentum")
        << "nesterov:0"
        << "train.optimizer.nesterov needs a momentum above 0";
    QTest::newRow("outputs naming no node") << "outputs:nothere"
                                            << "model.outputs: no node named 'nothere'";
    QTest::newRow("validation fraction 1") << "validation:1"
                                           << "data.validation_fraction must be in [0, 1), got 1";
    QTest::newRow("NaN normalization mean") << "mean:nan"
                                            << "data.normalization.mean must be a finite number";
    QTest::newRow("negative crop padding") << "crop:-1"
                                           << "data.augmentation.crop_padding must be at least 0";
    QTest::newRow("negative checkpoint steps") << "every_steps:-1"
                                               << "train.checkpoint.every_steps must be at least 0";
    QTest::newRow("negative patience") << "patience:-2"
                                       << "train.early_stopping.patience must be at least 0";
    QTest::newRow("prefetch") << "prefetch:1000"
                              << "data.prefetch_batches must be at most 64";
    QTest::newRow("FIXED std 0") << "fixed_std:0"
                                 << "data.normalization.std must be above 0 for FIXED";
    QTest::newRow("FIXED channel std 0") << "channel_std:0"
                                         << "data.normalization.channel_std[1] must be above 0";
  }

  void invalidSettingsNameTheirField() {
    QFETCH(QString, edit);
    QFETCH(QString, message);
    proto::Project p = spirals();
    const QString key = edit.section(':', 0, 0);
    const QString value = edit.section(':', 1);
    const double v = value.toDouble();
    const int i = int(v);
    auto* t = p.mutable_train();
    auto* o = t->mutable_optimizer();
    auto* syn = p.mutable_data()->mutable_synthetic();
    if (key == "batch") t->set_batch_size(i);
    if (key == "epochs") t->set_epochs(i);
    if (key == "threads") t->set_threads(i);
    if (key == "classes") syn->set_classes(i);
    if (key == "train_samples") syn->set_train_samples(i);
    if (key == "test_samples") syn->set_test_samples(i);
    if (key == "features") syn->set_features(i);
    if (key == "noise") syn->set_noise(v);
    if (key == "optimizer") o->set_kind(proto::Optimizer::Kind(i));
    if (key == "schedule") t->mutable_schedule()->set_kind(proto::LrSchedule::Kind(i));
    if (key == "mode") t->mutable_early_stopping()->set_mode(proto::MetricMode(i));
    if (key == "normalization")
      p.mutable_data()->mutable_normalization()->set_kind(proto::Normalization::Kind(i));
    if (key == "format") p.set_format_version(i);
    if (key == "eps") o->set_eps(v);
    if (key == "lr") o->set_lr(v);
    if (key == "beta1") o->set_beta1(v);
    if (key == "weight_decay") o->set_weight_decay(v);
    if (key == "nesterov") o->set_nesterov(true), o->set_momentum(v);
    if (key == "outputs") p.mutable_model()->add_outputs(value.toStdString());
    if (key == "validation") p.mutable_data()->set_validation_fraction(v);
    if (key == "mean") p.mutable_data()->mutable_normalization()->set_mean(v);
    if (key == "crop") p.mutable_data()->mutable_augmentation()->set_crop_padding(i);
    if (key == "every_steps") t->mutable_checkpoint()->set_every_steps(i);
    if (key == "patience") t->mutable_early_stopping()->set_patience(i);
    if (key == "prefetch") p.mutable_data()->set_prefetch_batches(i);
    auto* norm = p.mutable_data()->mutable_normalization();
    if (key == "fixed_std") norm->set_kind(proto::Normalization::FIXED), norm->set_std(v);
    if (key == "channel_std")
      norm->set_kind(proto::Normalization::FIXED), norm->add_channel_std(1),
          norm->add_channel_std(v);

    Status s = checkProject(p);
    QVERIFY2(!s.ok(), qPrintable(edit));
    QVERIFY2(QString::fromStdString(s.message()).contains(message), s.message().c_str());

    // The trainer refuses the same project before it reads any data, with a Failed event.
    std::vector<proto::TrainEvent> events;
    TrainOptions opts;
    opts.projectDir = NETLOOM_SOURCE_DIR "/projects";
    auto r = runTraining(p, opts, [&](const proto::TrainEvent& e) { events.push_back(e); });
    QVERIFY(!r.ok());
    QCOMPARE(r.error().message, s.message());
    QCOMPARE(events.size(), size_t(1));
    QVERIFY(events[0].has_failed());
  }

  // A batch size or class count left unset takes its default; only one set to an
  // impossible value is refused, by netloom-train too, unless --batch-size replaces it.
  void unsetSizesTakeTheirDefaults() {
    proto::Project p = spirals();
    p.mutable_train()->clear_batch_size();
    p.mutable_data()->mutable_synthetic()->clear_classes();
    QVERIFY(checkProject(p).ok());
    p.mutable_train()->set_batch_size(0);
    QTemporaryDir dir;
    const QString path = dir.filePath("zero.nlproj");
    QVERIFY(saveProject(path.toStdString(), p).ok());
    Outcome o = runTrain({path, "--max-steps", "1", "--quiet"});
    QVERIFY(o.code != 0);
    QVERIFY2(o.err.contains("train.batch_size must be at least 1, got 0"), qPrintable(o.err));
    o = runTrain({path, "--max-steps", "1", "--quiet", "--batch-size", "8"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
  }

  // What the run minimises must be named and there: a project with no train.loss, a
  // model with no loss, or train.loss naming a node that is not, is refused by the
  // trainer and the CLI, naming train.loss.
  void aProjectWithoutALossIsRefused() {
    for (const char* how : {"no loss node", "a missing node", "unset"}) {
      proto::Project p = spirals();
      if (std::string(how) == "unset") {
        p.mutable_train()->clear_loss();  // even with one loss node to take
      } else if (std::string(how) == "no loss node") {
        p.mutable_train()->clear_loss();
        auto* nodes = p.mutable_model()->mutable_nodes();
        for (int i = nodes->size() - 1; i >= 0; --i)
          if (nodes->Get(i).op() == "SoftmaxCrossEntropy") nodes->DeleteSubrange(i, 1);
      } else {
        p.mutable_train()->set_loss("nothere");
      }
      TrainOptions opts;
      opts.projectDir = NETLOOM_SOURCE_DIR "/projects";
      auto r = runTraining(p, opts, [](const proto::TrainEvent&) {});
      QVERIFY2(!r.ok(), how);
      QVERIFY2(QString::fromStdString(r.error().message).startsWith("train.loss"),
               r.error().message.c_str());
      QTemporaryDir dir;
      const QString path = dir.filePath("p.nlproj");
      QVERIFY(saveProject(path.toStdString(), p).ok());
      Outcome o = runTrain({path, "--max-steps", "1", "--quiet"});
      QVERIFY(o.code != 0);
      QVERIFY2(o.err.contains("train.loss"), qPrintable(o.err));
    }
  }

  // What torch.optim accepts runs, with a warning in the stream naming the field.
  void acceptedButSuspiciousValuesWarn_data() {
    QTest::addColumn<QString>("edit");
    QTest::addColumn<QString>("warning");
    QTest::newRow("lr 0") << "lr"
                          << "train.optimizer.lr is 0";
    QTest::newRow("weight decay 3") << "weight_decay"
                                    << "train.optimizer.weight_decay 3 is above 1";
    QTest::newRow("momentum 1") << "momentum"
                                << "train.optimizer.momentum 1 is 1 or more";
  }

  void acceptedButSuspiciousValuesWarn() {
    QFETCH(QString, edit);
    QFETCH(QString, warning);
    proto::Project p = spirals();
    auto* o = p.mutable_train()->mutable_optimizer();
    if (edit == "lr") o->set_lr(0);
    if (edit == "weight_decay") o->set_weight_decay(3);
    if (edit == "momentum") o->set_kind(proto::Optimizer::SGD), o->set_momentum(1);
    std::vector<proto::TrainEvent> events;
    TrainOptions opts;
    opts.maxSteps = 2;
    opts.testLimit = 10;
    auto r = runTraining(p, opts, [&](const proto::TrainEvent& e) { events.push_back(e); });
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    QCOMPARE(r->steps, int64_t(2));
    int warnings = 0;
    for (const auto& e : events)
      if (e.has_log() && e.log().level() == proto::Log::WARNING) {
        ++warnings;
        QVERIFY2(QString::fromStdString(e.log().text()).contains(warning), e.log().text().c_str());
      }
    QCOMPARE(warnings, 1);
  }

  void nodeNamesAreCheckedOnLoadAndRun_data() {
    QTest::addColumn<QByteArray>("name");
    QTest::addColumn<QString>("message");
    QTest::newRow("invalid UTF-8")
        << QByteArray("act\xff") << "node 'act\\xff': the name is not valid UTF-8";
    QTest::newRow("overlong UTF-8") << QByteArray("a\xc0\xaf") << "is not valid UTF-8";
    QTest::newRow("surrogate") << QByteArray("a\xed\xa0\x80") << "is not valid UTF-8";
    QTest::newRow("control character")
        << QByteArray("act\x01") << "node 'act\\x01': the name holds a control character";
    QTest::newRow("too long") << QByteArray(300, 'n') << "the name is 300 bytes long; at most 256";
    QTest::newRow("port separator") << QByteArray("a:b") << "the name holds ':'";
  }

  void nodeNamesAreCheckedOnLoadAndRun() {
    QFETCH(QByteArray, name);
    QFETCH(QString, message);
    proto::Project p = spirals();
    auto* model = p.mutable_model();
    for (auto& n : *model->mutable_nodes()) {
      if (n.name() == "act1") n.set_name(name.toStdString());
      for (auto& in : *n.mutable_inputs())
        if (in == "act1") in = name.toStdString();
    }
    Status s = checkProject(p);
    QVERIFY(!s.ok());
    QVERIFY2(QString::fromStdString(s.message()).contains(message), s.message().c_str());
    // The message itself stays printable UTF-8, whatever the name held.
    QVERIFY(QString::fromStdString(s.message()).toUtf8() == QByteArray::fromStdString(s.message()));
    QVERIFY(nodeNameProblem("fc1").empty());
    QVERIFY(nodeNameProblem("résumé/層").empty());
  }

  void absurdAugmentationIsRefused() {
    const Shape image{1, 28, 28};
    proto::Augmentation def;
    def.set_crop_padding(2147483647);
    auto crop = Augmenter::fromProto(def);
    QVERIFY(crop.ok());
    Status s = crop->check(image);
    QVERIFY(!s.ok());
    QVERIFY2(QString::fromStdString(s.message())
                 .contains("data.augmentation.crop_padding 2147483647 is larger than the images"),
             s.message().c_str());
    def.set_crop_padding(0);
    def.set_max_translation(1000000);
    s = Augmenter::fromProto(def)->check(image);
    QVERIFY(!s.ok());
    QVERIFY(QString::fromStdString(s.message()).contains("max_translation 1000000"));
    def.set_max_translation(28);
    def.set_crop_padding(4);
    QVERIFY(Augmenter::fromProto(def)->check(image).ok());
  }

  void projectFilesThatAreNotProjectsAreNamed() {
    QTemporaryDir dir;
    auto directory = loadProject(dir.path().toStdString());
    QVERIFY(!directory.ok());
    QVERIFY2(QString::fromStdString(directory.error().message).contains("is a directory"),
             directory.error().message.c_str());
    auto zero = loadProject("/dev/zero");
    QVERIFY(!zero.ok());
    QVERIFY(
        QString::fromStdString(zero.error().message).contains("/dev/zero: is not a regular file"));
    QString fifo = dir.filePath("pipe.nlproj");
    QCOMPARE(mkfifo(fifo.toLocal8Bit().constData(), 0600), 0);
    auto pipe = loadProject(fifo.toStdString());  // must not block waiting for a writer
    QVERIFY(!pipe.ok());
    QVERIFY(QString::fromStdString(pipe.error().message).contains("is not a regular file"));
    auto missing = loadProject(dir.filePath("none.nlproj").toStdString());
    QVERIFY(!missing.ok());
    QVERIFY(QString::fromStdString(missing.error().message).contains("no such project file"));
  }

  void aProjectCutOffMidTokenSaysSo() {
    QTemporaryDir dir;
    const QByteArray text = spiralsText().toUtf8();
    // Every cut inside the model's node list ends mid-message.
    int checked = 0;
    for (int cut : {text.indexOf("nodes {") + 9, text.indexOf("op: \"Tanh\"") + 3,
                    text.indexOf("attrs {") + 7}) {
      QString path = write(dir, "cut.nlproj", text.left(cut));
      auto p = loadProject(path.toStdString());
      QVERIFY(!p.ok());
      QString m = QString::fromStdString(p.error().message);
      QVERIFY2(m.contains("unexpected end of file") && m.startsWith(path + ":"), qPrintable(m));
      QVERIFY2(!m.endsWith("got: "), qPrintable(m));
      ++checked;
    }
    QCOMPARE(checked, 3);
  }

  void commandLineNumbersNeverWrap_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("batch 2^32+1") << QStringList{"--batch-size", "4294967297"}
                                  << "--batch-size needs a whole number from 1 to 2147483647";
    QTest::newRow("batch 2^40") << QStringList{"--batch-size", "1099511627776"}
                                << "--batch-size needs a whole number";
    QTest::newRow("epochs 10^12") << QStringList{"--epochs", "1000000000000"}
                                  << "--epochs needs a whole number from 1 to 2147483647";
    QTest::newRow("threads 2^32") << QStringList{"--threads", "4294967296"}
                                  << "--threads needs a whole number from 1 to 1024";
    QTest::newRow("threads 100000") << QStringList{"--threads", "100000"} << "--threads";
    QTest::newRow("negative epochs") << QStringList{"--epochs", "-3"} << "--epochs";
    QTest::newRow("signed seed") << QStringList{"--seed", "-1"} << "--seed";
    QTest::newRow("seed past 64 bits") << QStringList{"--seed", "18446744073709551616"} << "--seed";
    QTest::newRow("trailing text") << QStringList{"--max-steps", "10x"} << "--max-steps";
    QTest::newRow("plus sign") << QStringList{"--batch-size", "+8"} << "--batch-size";
    QTest::newRow("no value") << QStringList{"--test-limit"} << "--test-limit";
  }

  void commandLineNumbersNeverWrap() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    Outcome o = runTrain(QStringList{spiralsPath()} + args);
    QCOMPARE(o.code, 2);
    QVERIFY2(o.err.contains(message), qPrintable(o.err));
  }

  void theLargestSeedIsTaken() {
    QTemporaryDir dir;
    QString events = dir.filePath("events.pb");
    Outcome o = runTrain({spiralsPath(), "--seed", "18446744073709551615", "--max-steps", "1",
                          "--test-limit", "1", "--quiet", "--events", events});
    QCOMPARE(o.code, 0);
    QVERIFY(QFileInfo(events).size() > 0);
  }

  // Class labels are whole numbers in [0, classes): anything else names its file and line.
  void labelsOutsideTheClassesNameFileAndLine_data() {
    QTest::addColumn<QString>("split");
    QTest::addColumn<QByteArray>("label");
    QTest::addColumn<QString>("message");
    QTest::newRow("-1 in test") << "test" << QByteArray("-1") << "test.csv' line 9: label -1";
    QTest::newRow("1.5 in training")
        << "train" << QByteArray("1.5") << "train.csv' line 9: label 1.5";
    QTest::newRow("3 of 3 classes") << "test" << QByteArray("3") << "test.csv' line 9: label 3";
    QTest::newRow("1e9 in training")
        << "train" << QByteArray("1e9") << "train.csv' line 9: label 1e+09";
  }

  void labelsOutsideTheClassesNameFileAndLine() {
    QFETCH(QString, split);
    QFETCH(QByteArray, label);
    QFETCH(QString, message);
    QTemporaryDir dir;
    QString project = write(dir, "csv.nlproj", kCsvProject);
    write(dir, "train.csv", csvRows(30, split == "train" ? 7 : -1, label.constData()));
    write(dir, "test.csv", csvRows(12, split == "test" ? 7 : -1, label.constData()));
    Outcome o = runTrain({project, "--quiet"});
    QCOMPARE(o.code, 1);
    QVERIFY2(o.err.contains(message), qPrintable(o.err));
    QVERIFY2(o.err.contains("labels must be whole numbers from 0 to 2"), qPrintable(o.err));

    write(dir, "train.csv", csvRows(30, -1, ""));
    write(dir, "test.csv", csvRows(12, -1, ""));
    QCOMPARE(runTrain({project, "--quiet"}).code, 0);
  }
};

QTEST_GUILESS_MAIN(TestValidation)
#include "tst_validation.moc"
