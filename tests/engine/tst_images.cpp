// Image datasets: folders of class folders and CSV lists, decoded with stb_image on
// the loader's threads. Labels follow the folder names, images are converted and
// fitted to the model's input, bad files are named, the two forms give the same
// batches, and a generated folder trains.
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <set>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

#include "engine/data/dataset.h"
#include "engine/io/project_file.h"
#include "engine/train/trainer.h"
#include "kernels/core/rng.h"

using namespace netloom;
namespace fs = std::filesystem;

namespace {

// Writes a W × H image of `channels` interleaved bytes as PNG (or JPEG by extension).
void writeImage(const fs::path& path, int w, int h, int channels, const std::vector<uint8_t>& px) {
  fs::create_directories(path.parent_path());
  const std::string p = path.string();
  const bool jpeg = path.extension() == ".jpg";
  const int ok = jpeg ? stbi_write_jpg(p.c_str(), w, h, channels, px.data(), 100)
                      : stbi_write_png(p.c_str(), w, h, channels, px.data(), w * channels);
  QVERIFY2(ok, p.c_str());
}

void writeText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A two-class set the model can tell apart: bright squares and dark squares, each
// pixel with some noise, `n` images per class, `size` pixels per side.
void writeBrightDark(const fs::path& dir, int n, int size, uint64_t seed) {
  Rng rng(seed);
  for (int cls = 0; cls < 2; ++cls)
    for (int i = 0; i < n; ++i) {
      std::vector<uint8_t> px(size_t(size * size));
      for (uint8_t& v : px) v = uint8_t((cls ? 160 : 40) + rng.below(60));
      char name[32];
      std::snprintf(name, sizeof name, "%04d.png", i);
      writeImage(dir / (cls ? "bright" : "dark") / name, size, size, 1, px);
    }
}

proto::DataDef folderData(const fs::path& train, const fs::path& test = {}) {
  proto::DataDef d;
  auto* f = d.mutable_image_folder();
  f->set_train(train.string());
  if (!test.empty()) f->set_test(test.string());
  f->set_channels(1);
  f->set_height(8);
  f->set_width(8);
  return d;
}

std::vector<Batch> allBatches(const Dataset& data, const Normalizer& norm) {
  std::vector<Batch> out;
  BatchLoader loader(data, norm, {.batchSize = 7, .shuffle = true, .seed = 3});
  for (Batch b; loader.next(b);) out.push_back(b);
  return out;
}

}  // namespace

class TestImages : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  fs::path root() const { return fs::path(m_dir.path().toStdString()); }

 private slots:
  void labelsFollowTheSortedFolderNames() {
    const fs::path dir = root() / "labels";
    std::vector<uint8_t> px(4, 0);
    writeImage(dir / "zebra" / "a.png", 2, 2, 1, px);
    writeImage(dir / "ant" / "b.png", 2, 2, 1, px);
    writeImage(dir / "ant" / "a.PNG", 2, 2, 1, px);
    writeImage(dir / "mole" / "deep" / "c.png", 2, 2, 1, px);
    writeText(dir / "mole" / "notes.txt", "not an image");
    fs::create_directories(dir / "empty");
    writeText(dir / "README", "loose");
    auto index = listImageFolder(dir.string());
    QVERIFY2(index.ok(), index.ok() ? "" : index.error().message.c_str());
    QCOMPARE(index->classNames, (std::vector<std::string>{"ant", "empty", "mole", "zebra"}));
    QCOMPARE(index->perClass, (std::vector<int64_t>{2, 0, 1, 1}));
    QCOMPARE(index->labels, (std::vector<int32_t>{0, 0, 2, 3}));
    QVERIFY(index->paths[0].ends_with("ant/a.PNG"));
    QVERIFY(index->paths[2].ends_with("mole/deep/c.png"));
    // Each oddity is reported, naming what it is about.
    auto said = [&](const std::string& what) {
      for (const std::string& w : index->warnings)
        if (w.find(what) != std::string::npos) return true;
      return false;
    };
    QVERIFY(said("empty' holds no images"));
    QVERIFY(said("notes.txt"));
    QVERIFY(said("'README'"));
    // A test folder with a class the training folder lacks is refused by name.
    writeImage(root() / "labels-test" / "yak" / "a.png", 2, 2, 1, px);
    auto test = listImageFolder((root() / "labels-test").string(), &index->classNames);
    QVERIFY(!test.ok());
    QVERIFY(test.error().message.find("yak") != std::string::npos);
    QVERIFY(!listImageFolder((root() / "nowhere").string()).ok());
  }

  void imagesAreConvertedAndFitted() {
    // A 4 × 2 RGB image: pure red, green, blue and white columns.
    std::vector<uint8_t> px;
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 4; ++x) {
        const uint8_t rgb[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
        px.insert(px.end(), rgb[x], rgb[x] + 3);
      }
    const fs::path file = root() / "fit" / "a.png";
    writeImage(file, 4, 2, 3, px);
    std::string error;
    // Same size, RGB: channel-major planes.
    std::vector<uint8_t> rgb(3 * 2 * 4);
    QVERIFY(decodeImage(file.string(), {3, 2, 4}, rgb.data(), error));
    QCOMPARE(int(rgb[0]), 255);       // red plane, red column
    QCOMPARE(int(rgb[8 + 1]), 255);   // green plane, green column
    QCOMPARE(int(rgb[16 + 2]), 255);  // blue plane, blue column
    QCOMPARE(int(rgb[16 + 0]), 0);
    // Resized to 2 × 1: each output pixel is the mean of two columns (pixel centres).
    std::vector<uint8_t> half(3 * 1 * 2);
    QVERIFY(decodeImage(file.string(), {3, 1, 2}, half.data(), error));
    QCOMPARE(int(half[0]), 128);  // red of (red + green) / 2
    QCOMPARE(int(half[1]), 128);  // red of (blue + white) / 2
    QCOMPARE(int(half[2 + 0]), 128);
    QCOMPARE(int(half[4 + 1]), 255);  // blue of (blue + white) / 2
    // Centre crop to 2 × 2: the middle two columns (green, blue), unscaled.
    std::vector<uint8_t> crop(3 * 2 * 2);
    QVERIFY(
        decodeImage(file.string(), {3, 2, 2, proto::ImageSource::CENTER_CROP}, crop.data(), error));
    QCOMPARE(int(crop[4 + 0]), 255);  // green plane, first column is green
    QCOMPARE(int(crop[8 + 1]), 255);  // blue plane, second column is blue
    QCOMPARE(int(crop[0]), 0);        // no red left
    // Grayscale: luminance, white stays white.
    std::vector<uint8_t> grey(2 * 4);
    QVERIFY(decodeImage(file.string(), {1, 2, 4}, grey.data(), error));
    QCOMPARE(int(grey[3]), 255);
    QVERIFY(grey[1] > grey[0] && grey[0] > grey[2]);  // green brightest, blue darkest
    // JPEG decodes too, close to what was written.
    std::vector<uint8_t> flat(16 * 16 * 3, 200);
    writeImage(root() / "fit" / "b.jpg", 16, 16, 3, flat);
    std::vector<uint8_t> j(3 * 16 * 16);
    QVERIFY(decodeImage((root() / "fit" / "b.jpg").string(), {3, 16, 16}, j.data(), error));
    QVERIFY(std::abs(int(j[100]) - 200) <= 2);
  }

  void aCorruptImageIsNamed() {
    const fs::path dir = root() / "corrupt";
    writeBrightDark(dir, 10, 8, 1);
    writeText(dir / "dark" / "0003.png", "this is not a PNG");
    proto::DataDef def = folderData(dir);
    def.mutable_image_folder()->set_test_fraction(0.25);
    auto failed = loadData(def, "", 1);
    QVERIFY(!failed.ok());
    QVERIFY2(failed.error().message.find("dark/0003.png") != std::string::npos,
             failed.error().message.c_str());
    def.mutable_image_folder()->set_skip_unreadable(true);
    auto skipped = loadData(def, "", 1);
    QVERIFY2(skipped.ok(), skipped.ok() ? "" : skipped.error().message.c_str());
    QCOMPARE(skipped->train.size() + skipped->test.size(), int64_t(19));
    QVERIFY(!skipped->warnings.empty());
    QVERIFY(skipped->warnings[0].find("skipped 1 unreadable") != std::string::npos);

    // A PNG whose header is whole but whose data is cut off passes the check at the
    // start and fails when its batch is assembled: the loader names it.
    std::ifstream in(dir / "bright" / "0004.png", std::ios::binary);
    std::string png((std::istreambuf_iterator<char>(in)), {});
    writeText(dir / "bright" / "0004.png", png.substr(0, 40));
    def.mutable_image_folder()->set_skip_unreadable(false);
    writeBrightDark(dir, 10, 8, 1);  // the first bad file mended
    writeText(dir / "bright" / "0004.png", png.substr(0, 40));
    auto late = loadData(def, "", 1);
    if (late.ok()) {
      // Whichever split holds it, a pass over it fails, naming the file.
      for (const Dataset* d : {&late->train, &late->test}) {
        BatchLoader loader(*d, late->norm, {.batchSize = 4});
        int batches = 0;
        for (Batch b; loader.next(b);) ++batches;
        if (loader.status().ok()) continue;
        QVERIFY(loader.status().message().find("bright/0004.png") != std::string::npos);
        QVERIFY(batches < (d->size() + 3) / 4);
      }
    } else {
      QVERIFY(late.error().message.find("bright/0004.png") != std::string::npos);
    }
    // Skipping replaces it with the next readable image and counts it.
    def.mutable_image_folder()->set_skip_unreadable(true);
    def.mutable_image_folder()->set_test_fraction(0.05);
    auto lenient = loadData(def, "", 1);
    QVERIFY(lenient.ok());
    int64_t skippedInPasses = 0, samples = 0;
    for (const Dataset* d : {&lenient->train, &lenient->test}) {
      BatchLoader loader(*d, lenient->norm, {.batchSize = 4});
      for (Batch b; loader.next(b);) samples += b.size;
      QVERIFY(loader.status().ok());
      skippedInPasses += loader.skipped();
      if (loader.skipped())
        QVERIFY(loader.firstSkipped().find("bright/0004.png") != std::string::npos);
    }
    QCOMPARE(samples, lenient->train.size() + lenient->test.size());
    QVERIFY(skippedInPasses + (20 - samples) == 1);  // skipped in a pass or at the check
  }

  void theListGivesTheFoldersBatches() {
    const fs::path dir = root() / "same";
    writeBrightDark(dir / "train", 12, 8, 2);
    writeBrightDark(dir / "test", 4, 8, 3);
    auto index = listImageFolder((dir / "train").string());
    QVERIFY(index.ok());
    // The same files listed by class name, in a CSV beside them with relative paths.
    std::string csv = "path,label\n";
    for (size_t i = 0; i < index->paths.size(); ++i)
      csv += fs::relative(index->paths[i], dir).string() + "," +
             index->classNames[size_t(index->labels[i])] + "\n";
    writeText(dir / "train.csv", csv);
    std::string testCsv = "path,label\n";  // has_header holds for every list
    auto testIndex = listImageFolder((dir / "test").string());
    for (size_t i = 0; i < testIndex->paths.size(); ++i)
      testCsv += fs::relative(testIndex->paths[i], dir).string() + "," +
                 std::to_string(testIndex->labels[i]) + "\n";
    writeText(dir / "test.csv", testCsv);

    proto::DataDef folder = folderData(dir / "train", dir / "test");
    folder.mutable_normalization()->set_kind(proto::Normalization::STANDARDIZE);
    folder.set_validation_fraction(0.25);
    proto::DataDef list = folder;
    auto* l = list.mutable_image_list();
    *l = folder.image_folder();
    l->set_train((dir / "train.csv").string());
    l->set_test((dir / "test.csv").string());
    l->set_has_header(true);
    for (bool cache : {false, true}) {
      folder.mutable_image_folder()->set_cache(cache);
      auto a = loadData(folder, "", 5);
      auto b = loadData(list, "", 5);
      QVERIFY2(a.ok(), a.ok() ? "" : a.error().message.c_str());
      QVERIFY2(b.ok(), b.ok() ? "" : b.error().message.c_str());
      QCOMPARE(a->classNames, (std::vector<std::string>{"bright", "dark"}));
      QCOMPARE(a->train.size(), int64_t(18));
      QCOMPARE(a->val.size(), int64_t(6));
      QCOMPARE(a->norm.mean, b->norm.mean);
      QCOMPARE(a->norm.std, b->norm.std);
      for (auto [x, y] :
           {std::pair{&a->train, &b->train}, {&a->val, &b->val}, {&a->test, &b->test}}) {
        std::vector<Batch> p = allBatches(*x, a->norm), q = allBatches(*y, b->norm);
        QCOMPARE(p.size(), q.size());
        for (size_t i = 0; i < p.size(); ++i) {
          QCOMPARE(p[i].labels, q[i].labels);
          QCOMPARE(p[i].x, q[i].x);
        }
      }
    }
    // A limit draws its samples across the classes (the folder lists them class by
    // class), the same for both forms and for the same seed.
    folder.set_train_limit(6);
    list.set_train_limit(6);
    auto limited = loadData(folder, "", 5), again = loadData(list, "", 5);
    QVERIFY(limited.ok() && again.ok());
    QCOMPARE(limited->train.size() + limited->val.size(), int64_t(6));
    std::set<int32_t> seen(limited->train.labels.begin(), limited->train.labels.end());
    seen.insert(limited->val.labels.begin(), limited->val.labels.end());
    QCOMPARE(seen.size(), size_t(2));
    QCOMPARE(limited->train.labels, again->train.labels);
    folder.set_train_limit(0);
    list.set_train_limit(0);
    // A list line that is not path,label is named by file and line.
    writeText(dir / "bad.csv", "train/dark/0000.png,dark\njust-a-path.png\n");
    l->set_train((dir / "bad.csv").string());
    l->set_has_header(false);
    auto bad = loadData(list, "", 5);
    QVERIFY(!bad.ok());
    QVERIFY2(bad.error().message.find("bad.csv' line 2") != std::string::npos,
             bad.error().message.c_str());
  }

  void rgbImagesNormalisePerChannel() {
    const fs::path dir = root() / "rgb";
    for (int i = 0; i < 4; ++i) {
      // Red is always 200, green 0 or 100, blue random: three different statistics.
      std::vector<uint8_t> px;
      for (int p = 0; p < 16; ++p)
        px.insert(px.end(), {200, uint8_t(i % 2 ? 100 : 0), uint8_t(p * 16)});
      writeImage(dir / "only" / (std::to_string(i) + ".png"), 4, 4, 3, px);
    }
    proto::DataDef def;
    auto* f = def.mutable_image_folder();
    f->set_train(dir.string());
    f->set_test(dir.string());
    def.mutable_normalization()->set_kind(proto::Normalization::STANDARDIZE);
    // The shape comes from the model's Input.
    auto project = parseProject(
        "model { nodes { name: 'x' op: 'Input' attrs { key: 'shape' value { ints { values: [3, 4, "
        "4] } } } } }",
        "test");
    QVERIFY(project.ok());
    resolveImageShape(def, project->model());
    QCOMPARE(def.image_folder().channels(), 3);
    auto s = loadData(def, "", 1);
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
    QCOMPARE(s->norm.channelMean.size(), size_t(3));
    QCOMPARE(s->norm.channelMean[0], 200.0f);
    QCOMPARE(s->norm.channelMean[1], 50.0f);
    QCOMPARE(s->norm.channelStd[1], 50.0f);
    QCOMPARE(s->norm.channelStd[0], 1.0f);  // constant: nothing to rescale
    Batch b;
    BatchLoader loader(s->test, s->norm, {.batchSize = 4, .shuffle = false});
    QVERIFY(loader.next(b));
    QCOMPARE(b.x[0], 0.0f);        // red: (200 - 200) / 1
    QCOMPARE(b.x[16], -1.0f);      // green of image 0: (0 - 50) / 50
    QCOMPARE(b.x[48 + 16], 1.0f);  // green of image 1: (100 - 50) / 50
    // Fixed per-channel values must give one per channel.
    def.mutable_normalization()->set_kind(proto::Normalization::FIXED);
    def.mutable_normalization()->add_channel_mean(0.5);
    auto wrong = loadData(def, "", 1);
    QVERIFY(!wrong.ok());
    QVERIFY(wrong.error().message.find(
                "channel_mean has 1 values but the samples have 3 channels") != std::string::npos);
  }

  void aGeneratedFolderTrains() {
    const fs::path dir = root() / "trains";
    writeBrightDark(dir, 60, 8, 4);
    auto p = parseProject(R"(
      model {
        nodes { name: "image" op: "Input" attrs { key: "shape" value { ints { values: [1, 8, 8] } } } }
        nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } } attrs { key: "dtype" value { s: "int32" } } }
        nodes { name: "flat" op: "Flatten" inputs: "image" }
        nodes { name: "fc" op: "Linear" inputs: "flat" attrs { key: "out_features" value { i: 2 } } }
        nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["fc", "label"] }
        nodes { name: "accuracy" op: "Accuracy" inputs: ["fc", "label"] }
      }
      data { image_folder { train: "trains" test_fraction: 0.25 } normalization { kind: STANDARDIZE } }
      train { loss: "loss" optimizer { kind: ADAM lr: 0.01 } batch_size: 8 epochs: 3 seed: 1 }
    )",
                          "test");
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    TrainOptions o;
    o.projectDir = root().string();
    auto r = runTraining(*p, o, [](const proto::TrainEvent&) {});
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    QVERIFY2(r->testAccuracy > 0.95, qPrintable(QString::number(r->testAccuracy)));
  }

  void aLargeFolderIsListed() {
    // 20,000 empty files in 10 classes: listing opens none of them.
    const fs::path dir = root() / "large";
    for (int c = 0; c < 10; ++c) {
      fs::create_directories(dir / std::to_string(c));
      for (int i = 0; i < 2000; ++i)
        std::ofstream(dir / std::to_string(c) / (std::to_string(i) + ".jpg"));
    }
    auto index = listImageFolder(dir.string());
    QVERIFY(index.ok());
    QCOMPARE(index->paths.size(), size_t(20000));
    QCOMPARE(index->perClass[9], int64_t(2000));
  }
};

QTEST_GUILESS_MAIN(TestImages)
#include "tst_images.moc"
