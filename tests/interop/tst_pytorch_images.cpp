// PyTorch export of image projects: train.py reads a generated folder of PNG class
// folders, and a path,label list, as NetLoom does (files, order, seeded splits,
// channels, bilinear resizing and centre crops, per-channel normalisation,
// augmentation): its first training batch equals NetLoom's loader's, and it trains an
// epoch. Needs Debian's /usr/bin/python3 with torch, numpy and PIL; without them the
// Python side is skipped, and said so.
#include <QtTest>
#include <cmath>

#include "../common/cli.h"
#include "engine/data/dataset.h"
#include "engine/interop/pytorch_export.h"
#include "engine/io/project_file.h"
#include "python.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace {

using netloom::testing::havePython;
using netloom::testing::Outcome;
using netloom::testing::runPython;

// Deterministic pixels with edges and gradients, so that resampling has work to do.
std::vector<uint8_t> pixels(int w, int h, int c, uint32_t seed) {
  std::vector<uint8_t> p(size_t(w) * h * c);
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < p.size(); ++i) {
    s = s * 1664525u + 1013904223u;
    const size_t x = (i / c) % w, y = i / c / w;
    p[i] = uint8_t(((s >> 24) & 63) + (x * 97 + y * 31 + i % c * 40) % 192);
  }
  return p;
}

// Writes one PNG of `w` × `h` with `c` channels (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA).
bool writePng(const QString& path, int w, int h, int c, uint32_t seed) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  const std::vector<uint8_t> p = pixels(w, h, c, seed);
  return stbi_write_png(path.toStdString().c_str(), w, h, c, p.data(), w * c) != 0;
}

// Three classes of PNGs of assorted sizes and channel counts, some in subfolders
// and with upper-case extensions, beside a file that is not an image. Returns the
// files relative to `root`, with their classes.
QList<QPair<QString, QString>> writeFolder(const QString& root) {
  const char* classes[] = {"cat", "dog", "emu"};
  QList<QPair<QString, QString>> files;
  uint32_t seed = 1;
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 9; ++i, ++seed) {
      const int w = 7 + int(seed * 5 % 23), h = 6 + int(seed * 11 % 19), c = 1 + int(seed % 4);
      QString rel = QString("%1/%2img%3.%4")
                        .arg(classes[k], i % 4 == 3 ? "deep/" : "", QString::number(i),
                             i % 5 == 2 ? "PNG" : "png");
      if (writePng(root + "/" + rel, w, h, c, seed)) files.append({rel, classes[k]});
    }
    QFile note(root + "/" + classes[k] + "/notes.txt");
    if (note.open(QIODevice::WriteOnly)) note.write("not an image\n");
  }
  return files;
}

QString project(const QString& data) {
  return R"(
name: "images"
model {
  name: "net"
  nodes { name: "image" op: "Input" attrs { key: "shape" value { ints { values: [3, 12, 10] } } } }
  nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } } attrs { key: "dtype" value { s: "int32" } } }
  nodes { name: "conv" op: "Conv2d" inputs: "image" attrs { key: "out_channels" value { i: 4 } } attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "padding" value { ints { values: [1] } } } }
  nodes { name: "act" op: "ReLU" inputs: "conv" }
  nodes { name: "gap" op: "GlobalAvgPool2d" inputs: "act" }
  nodes { name: "fc" op: "Linear" inputs: "gap" attrs { key: "out_features" value { i: 3 } } }
  nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["fc", "label"] }
  nodes { name: "accuracy" op: "Accuracy" inputs: ["fc", "label"] }
  outputs: "fc"
}
)" + data +
         R"(
train { loss: "loss" optimizer { kind: ADAM } batch_size: 8 epochs: 1 seed: 11 }
)";
}

}  // namespace

class TestPytorchImages : public QObject {
  Q_OBJECT

  // Writes `text` as a project beside the images, exports it, and compares
  // train.py's first training batch and normalisation with NetLoom's.
  void compare(const QTemporaryDir& dir, const QString& text) {
    const QString path = dir.filePath("images.nlproj");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(text.toUtf8());
    f.close();
    auto loaded = netloom::loadProject(path.toStdString());
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
    const std::string base = dir.path().toStdString(), out = dir.filePath("py").toStdString();
    QDir(dir.filePath("py")).removeRecursively();
    netloom::Status st = netloom::exportPytorch(*loaded, base, out);
    QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
    const QString flakes = netloom::testing::pyflakesProblems(QString::fromStdString(out));
    QVERIFY2(flakes.isEmpty(), qPrintable(flakes));

    netloom::proto::DataDef def = loaded->data();
    netloom::resolveImageShape(def, loaded->model());
    auto splits = netloom::loadData(def, base, loaded->train().seed());
    QVERIFY2(splits.ok(), splits.ok() ? "" : splits.error().message.c_str());
    netloom::BatchLoader::Options o;
    o.batchSize = loaded->train().batch_size();
    o.shuffle = true;
    o.seed = loaded->train().seed();
    o.epoch = 1;
    o.augment = splits->augment;
    netloom::BatchLoader loader(splits->train, splits->norm, o);
    netloom::Batch b;
    QVERIFY(loader.next(b));

    const QString dump = dir.filePath("batch.f32");
    Outcome r = runPython({dir.filePath("py/train.py"), "--dump-first-batch", dump});
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
    QFile meta(dump + ".json");
    QVERIFY(meta.open(QIODevice::ReadOnly));
    const QJsonObject m = QJsonDocument::fromJson(meta.readAll()).object();
    QCOMPARE(m["train"].toInt(), int(splits->train.size()));
    QCOMPARE(m["test"].toInt(), int(splits->test.size()));
    QCOMPARE(m["validation"].toInt(), int(splits->val.size()));

    // The normalisation: one mean and std, or one per channel.
    const netloom::Normalizer& n = splits->norm;
    auto values = [](const QJsonValue& v) {
      std::vector<double> out;
      if (v.isArray())
        for (const QJsonValue& e : v.toArray()) out.push_back(e.toDouble());
      else
        out.push_back(v.toDouble());
      return out;
    };
    const std::vector<double> means = values(m["mean"]), stds = values(m["std"]);
    const std::vector<float> wantMeans =
        n.channelMean.empty() ? std::vector{n.mean} : n.channelMean;
    const std::vector<float> wantStds = n.channelStd.empty() ? std::vector{n.std} : n.channelStd;
    QCOMPARE(means.size(), wantMeans.size());
    for (size_t c = 0; c < means.size(); ++c) {
      QCOMPARE(float(means[c]), wantMeans[c]);
      QCOMPARE(float(stds[c]), wantStds[c]);
    }

    QFile x(dump);
    QVERIFY(x.open(QIODevice::ReadOnly));
    const QByteArray raw = x.readAll();
    QCOMPARE(qint64(raw.size()), qint64(b.x.size() * sizeof(float)));
    const auto* got = reinterpret_cast<const float*>(raw.constData());
    double diff = 0;
    for (size_t i = 0; i < b.x.size(); ++i)
      diff = std::max(diff, double(std::abs(got[i] - b.x[i])));
    const QJsonArray labels = m["labels"].toArray();
    QCOMPARE(labels.size(), qsizetype(b.size));
    for (int64_t i = 0; i < b.size; ++i) QCOMPARE(labels[int(i)].toInt(), b.labels[size_t(i)]);
    qInfo().noquote() << "first batch of" << b.size << "images: max abs diff" << diff << "| mean"
                      << means.front() << "std" << stds.front();
    QVERIFY2(diff <= 1e-6, qPrintable(QString::number(diff)));

    Outcome e = runPython({dir.filePath("py/train.py"), "--epochs", "1"});
    QVERIFY2(e.code == 0, qPrintable(e.out + e.err));
    QVERIFY2(e.out.contains("epoch 1: train loss"), qPrintable(e.out));
  }

 private slots:
  void initTestCase() {
    if (!havePython("torch, numpy, PIL"))
      QSKIP(
          "/usr/bin/python3 with torch, numpy and PIL is missing: the PyTorch side is not "
          "checked");
  }

  // Centre crops to RGB, per-channel statistics computed, test split by fraction,
  // validation split, random crops and flips.
  void folderCentreCropStandardized() {
    QTemporaryDir dir;
    QVERIFY(writeFolder(dir.filePath("pics")).size() == 27);
    compare(dir, project(R"(data {
  image_folder { train: "pics" fit: CENTER_CROP test_fraction: 0.25 }
  normalization { kind: STANDARDIZE scale: 0.00392156862745098 }
  validation_fraction: 0.2
  augmentation { crop_padding: 2 horizontal_flip: true }
})"));
  }

  // A list with a header, class names as labels, resized to grey (luminance from
  // RGB), per-channel values given, a test list of its own and translations.
  void listResizedGrey() {
    QTemporaryDir dir;
    const auto files = writeFolder(dir.filePath("pics"));
    QFile train(dir.filePath("pics/train.csv")), test(dir.filePath("pics/test.csv"));
    QVERIFY(train.open(QIODevice::WriteOnly) && test.open(QIODevice::WriteOnly));
    train.write("path,label\n");
    test.write("path,label\n");
    for (int i = 0; i < files.size(); ++i) {
      const QString line = QString("\"%1\",%2\n").arg(files[i].first, files[i].second);
      (i % 4 == 1 ? test : train).write(line.toUtf8());
    }
    train.close();
    test.close();
    QString text = project(R"(data {
  image_list { train: "pics/train.csv" test: "pics/test.csv" has_header: true channels: 1 height: 9 width: 13 }
  normalization { kind: FIXED scale: 0.00392156862745098 channel_mean: [0.4] channel_std: [0.25] }
  augmentation { max_translation: 2 }
})");
    text.replace("values: [3, 12, 10]", "values: [1, 9, 13]");
    compare(dir, text);
  }
};

QTEST_GUILESS_MAIN(TestPytorchImages)
#include "tst_pytorch_images.moc"
