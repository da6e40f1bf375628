// The data pipeline: IDX and CSV readers and their error messages, synthetic
// sets, seeded splits, normalisation, augmentation and the prefetching BatchLoader.
#include <zlib.h>

#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "engine/data/dataset.h"

using namespace netloom;

namespace {

void putBe32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}

std::string idxBytes(uint32_t magic, const std::vector<uint32_t>& dims,
                     const std::vector<uint8_t>& payload) {
  std::string out;
  putBe32(out, magic);
  for (uint32_t d : dims) putBe32(out, d);
  out.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return out;
}

void writeFile(const QString& path, const std::string& content, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.toLocal8Bit().constData(), "wb");
    QVERIFY(f);
    QCOMPARE(gzwrite(f, content.data(), static_cast<unsigned>(content.size())),
             static_cast<int>(content.size()));
    QCOMPARE(gzclose(f), Z_OK);
  } else {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(content.data(), content.size()), qint64(content.size()));
  }
}

std::string str(const QString& s) {
  return s.toStdString();
}

// A float dataset whose single feature is the sample's index: easy to trace through a loader.
Dataset indexDataset(int64_t n, int classes) {
  Dataset ds;
  ds.sampleShape = {1};
  ds.classes = classes;
  for (int64_t i = 0; i < n; ++i) {
    ds.floats.push_back(static_cast<float>(i));
    ds.labels.push_back(static_cast<int32_t>(i % classes));
  }
  return ds;
}

std::map<int32_t, int> labelCounts(const Dataset& ds) {
  std::map<int32_t, int> counts;
  for (int32_t l : ds.labels) ++counts[l];
  return counts;
}

// A byte image dataset of C×H×W samples whose pixels are all nonzero and distinct within
// a sample, so a shift can be read back from an augmented copy.
Dataset imageDataset(int64_t n, int64_t c, int64_t h, int64_t w) {
  Dataset ds;
  ds.sampleShape = {c, h, w};
  ds.classes = 3;
  const int64_t f = c * h * w;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) ds.bytes.push_back(static_cast<uint8_t>(1 + (j + i) % 250));
    ds.labels.push_back(static_cast<int32_t>(i % 3));
  }
  return ds;
}

// The shift (dy, dx) with out[y][x] = in[y + dy][x + dx] inside and 0 outside, or nullopt.
std::optional<std::pair<int64_t, int64_t>> shiftOf(const std::vector<float>& in,
                                                   const std::vector<float>& out, int64_t c,
                                                   int64_t h, int64_t w, int64_t maxShift) {
  for (int64_t dy = -maxShift; dy <= maxShift; ++dy) {
    for (int64_t dx = -maxShift; dx <= maxShift; ++dx) {
      bool match = true;
      for (int64_t ch = 0; ch < c && match; ++ch) {
        for (int64_t y = 0; y < h && match; ++y) {
          for (int64_t x = 0; x < w && match; ++x) {
            const int64_t sy = y + dy, sx = x + dx;
            const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
            const float expected = inside ? in[(ch * h + sy) * w + sx] : 0.0f;
            match = out[(ch * h + y) * w + x] == expected;
          }
        }
      }
      if (match) return std::pair{dy, dx};
    }
  }
  return std::nullopt;
}

// Every batch of one epoch, concatenated.
std::vector<float> epochFeatures(const Dataset& ds, const BatchLoader::Options& opts) {
  BatchLoader loader(ds, Normalizer{}, opts);
  std::vector<float> all;
  Batch b;
  while (loader.next(b)) all.insert(all.end(), b.x.begin(), b.x.end());
  return all;
}

}  // namespace

class TestData : public QObject {
  Q_OBJECT

 private slots:
  void idxRoundTrip_data();
  void idxRoundTrip();
  void idxErrorsNameTheFile();
  void fashionMnist();
  void csvHeaderAndLabelByName();
  void csvErrors();
  void csvTestSplit();
  void syntheticDeterministicAndBalanced();
  void epochOrderIsDeterministicPermutation();
  void loaderCoversEpochOnce();
  void loaderNormalisesBytes();
  void loaderSkipBatches();
  void loaderStopsMidEpoch();
  void validationSplitAndLimits();
  void normalizationKinds();
  void missingSource();
  void augmentFlipMirrors();
  void augmentCropShiftsWindow();
  void augmentTranslationBounds();
  void augmentCombinedStaysAWindow();
  void augmentDeterministicPerEpoch();
  void augmentSkipBatchesMatchesTail();
  void augmentOffLeavesSamples();
  void augmentNonImageIsError();

 private:
  QTemporaryDir m_dir;
};

void TestData::idxRoundTrip_data() {
  QTest::addColumn<bool>("gzip");
  QTest::newRow("plain") << false;
  QTest::newRow("gzip") << true;
}

void TestData::idxRoundTrip() {
  QFETCH(bool, gzip);
  QVERIFY(m_dir.isValid());
  const int n = 5, rows = 3, cols = 4;
  std::vector<uint8_t> pixels(n * rows * cols), labels(n);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  for (int i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>((i * 3) % 7);
  const QString tag = gzip ? "gz" : "plain";
  const QString img = m_dir.filePath("rt-images-" + tag), lab = m_dir.filePath("rt-labels-" + tag);
  writeFile(img, idxBytes(0x803, {n, rows, cols}, pixels), gzip);
  writeFile(lab, idxBytes(0x801, {n}, labels), gzip);

  auto ds = readIdx(str(img), str(lab));
  QVERIFY2(ds.ok(), ds.ok() ? "" : ds.error().message.c_str());
  QCOMPARE(ds->size(), int64_t(n));
  QCOMPARE(ds->sampleShape, (Shape{1, rows, cols}));
  QVERIFY(ds->bytes == pixels);
  QVERIFY(ds->floats.empty());
  for (int i = 0; i < n; ++i) QCOMPARE(ds->labels[i], int32_t(labels[i]));
  QCOMPARE(ds->classes, 7);  // max label 6
}

void TestData::idxErrorsNameTheFile() {
  std::vector<uint8_t> pixels(4 * 2 * 2, 1), labels(4, 0);
  const QString img = m_dir.filePath("err-images"), lab = m_dir.filePath("err-labels");
  writeFile(img, idxBytes(0x803, {4, 2, 2}, pixels), false);
  writeFile(lab, idxBytes(0x801, {4}, labels), false);

  auto missing = readIdx(str(m_dir.filePath("nope-images")), str(lab));
  QVERIFY(!missing.ok());
  QVERIFY(missing.error().message.find("nope-images") != std::string::npos);

  // Labels passed as images: the magic is wrong and printed in hex.
  auto badMagic = readIdx(str(lab), str(lab));
  QVERIFY(!badMagic.ok());
  const std::string& bm = badMagic.error().message;
  QVERIFY2(bm.find("err-labels") != std::string::npos, bm.c_str());
  QVERIFY2(bm.find("0x00000801") != std::string::npos, bm.c_str());

  const QString shortImg = m_dir.filePath("short-images");
  std::vector<uint8_t> fewer(10, 1);
  writeFile(shortImg, idxBytes(0x803, {4, 2, 2}, fewer), false);
  auto truncated = readIdx(str(shortImg), str(lab));
  QVERIFY(!truncated.ok());
  const std::string& tm = truncated.error().message;
  QVERIFY2(tm.find("short-images") != std::string::npos, tm.c_str());
  QVERIFY2(tm.find("expected 16 bytes, got 10") != std::string::npos, tm.c_str());

  // A gzip stream cut in half is truncated too.
  const QString cutGz = m_dir.filePath("cut-images.gz");
  std::vector<uint8_t> big(64 * 28 * 28);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  writeFile(cutGz, idxBytes(0x803, {64, 28, 28}, big), true);
  {
    QFile f(cutGz);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.resize(f.size() / 2));
  }
  auto cut = readIdx(str(cutGz), str(lab));
  QVERIFY(!cut.ok());
  QVERIFY2(cut.error().message.find("cut-images.gz") != std::string::npos,
           cut.error().message.c_str());
  QVERIFY2(cut.error().message.find("truncated") != std::string::npos, cut.error().message.c_str());

  const QString moreLabels = m_dir.filePath("more-labels");
  writeFile(moreLabels, idxBytes(0x801, {5}, std::vector<uint8_t>(5, 0)), false);
  auto mismatch = readIdx(str(img), str(moreLabels));
  QVERIFY(!mismatch.ok());
  const std::string& mm = mismatch.error().message;
  QVERIFY2(mm.find("err-images") != std::string::npos, mm.c_str());
  QVERIFY2(mm.find("more-labels") != std::string::npos, mm.c_str());
  QVERIFY2(mm.find('4') != std::string::npos && mm.find('5') != std::string::npos, mm.c_str());
}

void TestData::fashionMnist() {
  const QString dir = QStringLiteral(NETLOOM_FASHION_DIR);
  if (!QFile::exists(dir + "/train-images-idx3-ubyte.gz")) {
    QSKIP(qPrintable("Fashion-MNIST not found in " + dir));
  }
  proto::DataDef def;
  auto* idx = def.mutable_idx();
  idx->set_train_images("train-images-idx3-ubyte.gz");
  idx->set_train_labels("train-labels-idx1-ubyte.gz");
  idx->set_test_images("t10k-images-idx3-ubyte.gz");
  idx->set_test_labels("t10k-labels-idx1-ubyte.gz");
  def.mutable_normalization()->set_scale(1.0 / 255);
  QElapsedTimer timer;
  timer.start();
  auto splits = loadData(def, str(dir), 1);
  QVERIFY2(splits.ok(), splits.ok() ? "" : splits.error().message.c_str());
  qInfo("Fashion-MNIST loaded in %lld ms", static_cast<long long>(timer.elapsed()));
  QCOMPARE(splits->train.size(), int64_t(60000));
  QCOMPARE(splits->test.size(), int64_t(10000));
  QCOMPARE(splits->val.size(), int64_t(0));
  QCOMPARE(splits->train.sampleShape, (Shape{1, 28, 28}));
  QCOMPARE(splits->train.classes, 10);
  for (const auto& [label, count] : labelCounts(splits->train)) QCOMPARE(count, 6000);

  // One epoch through the loader, timed: assembly must keep far ahead of training.
  timer.restart();
  BatchLoader loader(splits->train, splits->norm, {.batchSize = 128, .seed = 3});
  Batch b;
  int64_t seen = 0;
  float maxX = 0;
  while (loader.next(b)) {
    seen += b.size;
    for (float v : b.x) maxX = std::max(maxX, v);
  }
  qInfo("one epoch of 128-batches in %lld ms", static_cast<long long>(timer.elapsed()));
  QCOMPARE(seen, int64_t(60000));
  QVERIFY(maxX <= 1.0f && maxX > 0.9f);
}

void TestData::csvHeaderAndLabelByName() {
  const QString path = m_dir.filePath("header.csv");
  writeFile(path,
            "\xEF\xBB\xBF"
            "a, label ,b\r\n1.5,0,2\n-3,2,4e1\n\n5,1.2,6\n",
            false);
  auto ds = readCsv(str(path), "label", true, ',');
  QVERIFY2(ds.ok(), ds.ok() ? "" : ds.error().message.c_str());
  QCOMPARE(ds->size(), int64_t(3));
  QCOMPARE(ds->sampleShape, (Shape{2}));
  QCOMPARE(ds->floats, (std::vector<float>{1.5f, 2, -3, 40, 5, 6}));
  QCOMPARE(ds->labels, (std::vector<int32_t>{0, 2, 1}));
  QCOMPARE(ds->targets, (std::vector<float>{0, 2, 1.2f}));
  QCOMPARE(ds->classes, 3);

  // No header, tab-delimited, label defaults to the last column.
  const QString tsv = m_dir.filePath("plain.tsv");
  writeFile(tsv, "1\t2\t3\n4\t5\t0\n", false);
  auto plain = readCsv(str(tsv), "", false, '\t');
  QVERIFY(plain.ok());
  QCOMPARE(plain->floats, (std::vector<float>{1, 2, 4, 5}));
  QCOMPARE(plain->labels, (std::vector<int32_t>{3, 0}));

  // Subsets carry the raw targets along.
  Dataset sub = ds->subset({2, 0});
  QCOMPARE(sub.targets, (std::vector<float>{1.2f, 0}));
  QCOMPARE(sub.floats, (std::vector<float>{5, 6, 1.5f, 2}));
}

void TestData::csvErrors() {
  const QString ragged = m_dir.filePath("ragged.csv");
  writeFile(ragged, "x,y,label\n1,2,0\n3,4\n", false);
  auto r = readCsv(str(ragged), "", true, ',');
  QVERIFY(!r.ok());
  QVERIFY2(r.error().message.find("ragged.csv") != std::string::npos, r.error().message.c_str());
  QVERIFY2(r.error().message.find("line 3") != std::string::npos, r.error().message.c_str());

  const QString word = m_dir.filePath("word.csv");
  writeFile(word, "x,y,label\n1,2,0\n3,abc,1\n", false);
  auto w = readCsv(str(word), "", true, ',');
  QVERIFY(!w.ok());
  const std::string& wm = w.error().message;
  QVERIFY2(wm.find("word.csv") != std::string::npos, wm.c_str());
  QVERIFY2(wm.find("line 3") != std::string::npos, wm.c_str());
  QVERIFY2(wm.find("column 2") != std::string::npos, wm.c_str());
  QVERIFY2(wm.find("abc") != std::string::npos, wm.c_str());

  auto unknown = readCsv(str(word), "target", true, ',');
  QVERIFY(!unknown.ok());
  QVERIFY2(unknown.error().message.find("target") != std::string::npos,
           unknown.error().message.c_str());

  auto missing = readCsv(str(m_dir.filePath("absent.csv")), "", true, ',');
  QVERIFY(!missing.ok());
  QVERIFY(missing.error().message.find("absent.csv") != std::string::npos);
}

void TestData::csvTestSplit() {
  std::string rows = "f,label\n";
  for (int i = 0; i < 50; ++i) rows += std::to_string(i) + "," + std::to_string(i % 2) + "\n";
  writeFile(m_dir.filePath("split.csv"), rows, false);
  proto::DataDef def;
  def.mutable_csv()->set_train_path("split.csv");  // relative to baseDir
  def.mutable_csv()->set_has_header(true);
  auto a = loadData(def, str(m_dir.path()), 7);
  QVERIFY2(a.ok(), a.ok() ? "" : a.error().message.c_str());
  QCOMPARE(a->train.size(), int64_t(40));
  QCOMPARE(a->test.size(), int64_t(10));
  std::set<float> all(a->train.floats.begin(), a->train.floats.end());
  all.insert(a->test.floats.begin(), a->test.floats.end());
  QCOMPARE(all.size(), size_t(50));

  auto b = loadData(def, str(m_dir.path()), 7);
  QVERIFY(b.ok());
  QCOMPARE(b->test.floats, a->test.floats);
  auto c = loadData(def, str(m_dir.path()), 8);
  QVERIFY(c.ok());
  QVERIFY(c->test.floats != a->test.floats);
}

void TestData::syntheticDeterministicAndBalanced() {
  Dataset s1 = makeSpirals(3, 300, 0.1, 5), s2 = makeSpirals(3, 300, 0.1, 5);
  Dataset s3 = makeSpirals(3, 300, 0.1, 6);
  QCOMPARE(s1.sampleShape, (Shape{2}));
  QCOMPARE(s1.floats, s2.floats);
  QCOMPARE(s1.labels, s2.labels);
  QVERIFY(s1.floats != s3.floats);
  QCOMPARE(s1.classes, 3);
  for (const auto& [label, count] : labelCounts(s1)) QCOMPARE(count, 100);
  // Noise-free arms stay within the unit disc, radius growing along each arm.
  Dataset clean = makeSpirals(2, 200, 0.0, 1);
  for (int64_t i = 0; i < clean.size(); ++i) {
    const float r = std::hypot(clean.floats[2 * i], clean.floats[2 * i + 1]);
    QVERIFY(r <= 1.0001f);
  }

  Dataset b1 = makeBlobs(4, 400, 3, 0.5, 9), b2 = makeBlobs(4, 400, 3, 0.5, 9);
  QCOMPARE(b1.sampleShape, (Shape{3}));
  QCOMPARE(b1.floats, b2.floats);
  QVERIFY(b1.floats != makeBlobs(4, 400, 3, 0.5, 10).floats);
  for (const auto& [label, count] : labelCounts(b1)) QCOMPARE(count, 100);
  // Points cluster around their class centre: the per-class spread is about the std.
  for (int k = 0; k < 4; ++k) {
    double mean = 0, sq = 0;
    int n = 0;
    for (int64_t i = k; i < b1.size(); i += 4, ++n) mean += b1.floats[i * 3];
    mean /= n;
    for (int64_t i = k; i < b1.size(); i += 4) sq += std::pow(b1.floats[i * 3] - mean, 2);
    QVERIFY(std::sqrt(sq / n) < 0.8);
  }
}

void TestData::epochOrderIsDeterministicPermutation() {
  auto a = BatchLoader::epochOrder(1000, true, 42, 3);
  QCOMPARE(a, BatchLoader::epochOrder(1000, true, 42, 3));
  QVERIFY(a != BatchLoader::epochOrder(1000, true, 42, 4));
  QVERIFY(a != BatchLoader::epochOrder(1000, true, 43, 3));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) QCOMPARE(sorted[i], i);
  QVERIFY(sorted != a);
  auto plain = BatchLoader::epochOrder(10, false, 42, 3);
  for (int64_t i = 0; i < 10; ++i) QCOMPARE(plain[i], i);
  QVERIFY(BatchLoader::epochOrder(0, true, 1, 1).empty());
}

void TestData::loaderCoversEpochOnce() {
  Dataset ds = indexDataset(103, 4);
  ds.targets.assign(103, 0.0f);
  for (int i = 0; i < 103; ++i) ds.targets[i] = i * 0.5f;
  Normalizer norm{2.0f, 1.0f, 4.0f};
  BatchLoader loader(ds, norm, {.batchSize = 10, .shuffle = true, .seed = 11, .epoch = 2});
  QCOMPARE(loader.batchesPerEpoch(), int64_t(11));
  const auto order = BatchLoader::epochOrder(103, true, 11, 2);
  std::vector<int> seen(103, 0);
  Batch b;
  int batches = 0;
  int64_t pos = 0;
  while (loader.next(b)) {
    QCOMPARE(b.size, batches < 10 ? int64_t(10) : int64_t(3));
    QCOMPARE(int64_t(b.x.size()), b.size);
    for (int64_t i = 0; i < b.size; ++i, ++pos) {
      const int id = static_cast<int>(std::lround((b.x[i] * 4.0f + 1.0f) / 2.0f));
      QCOMPARE(int64_t(id), order[pos]);
      QVERIFY(std::abs(b.x[i] - (id * 2.0f - 1.0f) / 4.0f) < 1e-5f);
      QCOMPARE(b.labels[i], id % 4);
      QCOMPARE(b.labelFloats[i], id * 0.5f);
      ++seen[id];
    }
    ++batches;
  }
  QCOMPARE(batches, 11);
  for (int c : seen) QCOMPARE(c, 1);
  QVERIFY(!loader.next(b));  // stays at the end
}

void TestData::loaderNormalisesBytes() {
  Dataset ds;
  ds.sampleShape = {1, 2, 2};
  ds.classes = 2;
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 4; ++j) ds.bytes.push_back(static_cast<uint8_t>(i * 4 + j));
    ds.labels.push_back(i % 2);
  }
  Normalizer norm{1.0f / 255, 0.5f, 0.25f};
  BatchLoader loader(ds, norm, {.batchSize = 16, .shuffle = false, .prefetch = 1});
  Batch b;
  int64_t pos = 0;
  while (loader.next(b)) {
    QCOMPARE(int64_t(b.x.size()), b.size * 4);
    for (int64_t i = 0; i < b.size * 4; ++i, ++pos) {
      const float expected = (static_cast<float>(pos) / 255 - 0.5f) / 0.25f;
      QVERIFY(std::abs(b.x[i] - expected) < 1e-5f);
    }
    for (int64_t i = 0; i < b.size; ++i) QCOMPARE(b.labelFloats[i], float(b.labels[i]));
  }
  QCOMPARE(pos, int64_t(256));
}

void TestData::loaderSkipBatches() {
  Dataset ds = indexDataset(50, 2);
  BatchLoader::Options opts{.batchSize = 8, .seed = 4, .epoch = 1, .skipBatches = 3};
  BatchLoader loader(ds, Normalizer{}, opts);
  QCOMPARE(loader.batchesPerEpoch(), int64_t(7));  // skipped batches still count
  const auto order = BatchLoader::epochOrder(50, true, 4, 1);
  Batch b;
  int64_t pos = 24;
  int batches = 0;
  while (loader.next(b)) {
    for (int64_t i = 0; i < b.size; ++i) QCOMPARE(int64_t(b.x[i]), order[pos++]);
    ++batches;
  }
  QCOMPARE(batches, 4);
  QCOMPARE(pos, int64_t(50));
}

void TestData::loaderStopsMidEpoch() {
  Dataset ds;
  ds.sampleShape = {1, 28, 28};
  ds.bytes.assign(20000 * 784, 7);
  ds.labels.assign(20000, 1);
  ds.classes = 2;
  QElapsedTimer timer;
  timer.start();
  for (int prefetch : {1, 2, 4}) {
    { BatchLoader untouched(ds, Normalizer{}, {.batchSize = 64, .prefetch = prefetch}); }
    BatchLoader loader(ds, Normalizer{}, {.batchSize = 64, .prefetch = prefetch});
    Batch b;
    QVERIFY(loader.next(b));
    QVERIFY(loader.next(b));
    QCOMPARE(b.size, int64_t(64));
  }
  QVERIFY(timer.elapsed() < 5000);
}

void TestData::validationSplitAndLimits() {
  proto::DataDef def;
  auto* syn = def.mutable_synthetic();
  syn->set_kind(proto::SyntheticSource::BLOBS);
  syn->set_classes(3);
  syn->set_train_samples(1000);
  syn->set_test_samples(300);
  def.set_validation_fraction(0.25);
  auto s = loadData(def, "", 1);
  QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
  QCOMPARE(s->train.size(), int64_t(750));
  QCOMPARE(s->val.size(), int64_t(250));
  QCOMPARE(s->test.size(), int64_t(300));
  QCOMPARE(s->val.classes, 3);
  QCOMPARE(s->val.sampleShape, (Shape{2}));
  // Train and val partition the generated training set.
  std::set<float> firstFeatures;
  for (int64_t i = 0; i < 750; ++i) firstFeatures.insert(s->train.floats[i * 2]);
  for (int64_t i = 0; i < 250; ++i) firstFeatures.insert(s->val.floats[i * 2]);
  QCOMPARE(firstFeatures.size(), size_t(1000));

  auto again = loadData(def, "", 1);
  QVERIFY(again.ok());
  QCOMPARE(again->val.floats, s->val.floats);

  def.set_train_limit(100);
  def.set_test_limit(40);
  def.set_validation_fraction(0.2);
  auto limited = loadData(def, "", 1);
  QVERIFY(limited.ok());
  QCOMPARE(limited->train.size(), int64_t(80));
  QCOMPARE(limited->val.size(), int64_t(20));
  QCOMPARE(limited->test.size(), int64_t(40));
  for (const auto& [label, count] : labelCounts(limited->test)) QVERIFY(count >= 13);

  def.set_validation_fraction(0);
  auto firstN = loadData(def, "", 1);
  QVERIFY(firstN.ok());
  Dataset full = makeBlobs(3, 1300, 2, 1.0, 1);
  QCOMPARE(firstN->train.size(), int64_t(100));
  QCOMPARE(firstN->train.floats,
           std::vector<float>(full.floats.begin(), full.floats.begin() + 200));

  def.set_validation_fraction(1.5);
  QVERIFY(!loadData(def, "", 1).ok());
}

void TestData::normalizationKinds() {
  proto::DataDef def;
  def.mutable_synthetic()->set_kind(proto::SyntheticSource::SPIRALS);
  auto plain = loadData(def, "", 2);
  QVERIFY(plain.ok());
  QCOMPARE(plain->train.size(), int64_t(1000));
  QCOMPARE(plain->test.size(), int64_t(500));
  QCOMPARE(plain->norm.scale, 1.0f);
  QCOMPARE(plain->norm.mean, 0.0f);
  QCOMPARE(plain->norm.std, 1.0f);

  def.mutable_normalization()->set_kind(proto::Normalization::FIXED);
  def.mutable_normalization()->set_scale(2);
  def.mutable_normalization()->set_mean(0.5);
  def.mutable_normalization()->set_std(3);
  auto fixed = loadData(def, "", 2);
  QVERIFY(fixed.ok());
  QCOMPARE(fixed->norm.scale, 2.0f);
  QCOMPARE(fixed->norm.mean, 0.5f);
  QCOMPARE(fixed->norm.std, 3.0f);

  def.mutable_normalization()->set_kind(proto::Normalization::STANDARDIZE);
  def.mutable_normalization()->set_scale(10);
  auto standard = loadData(def, "", 2);
  QVERIFY(standard.ok());
  BatchLoader loader(standard->train, standard->norm, {.batchSize = 100});
  double sum = 0, sq = 0;
  int64_t n = 0;
  Batch b;
  while (loader.next(b)) {
    for (float v : b.x) {
      sum += v;
      sq += double(v) * v;
      ++n;
    }
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  QVERIFY2(std::abs(mean) < 1e-4, qPrintable(QString::number(mean)));
  QVERIFY2(std::abs(var - 1.0) < 1e-3, qPrintable(QString::number(var)));

  // Byte data takes the histogram path: values {0, 1, 1, 1} after scaling.
  const QString img = m_dir.filePath("std-images"), lab = m_dir.filePath("std-labels");
  writeFile(img, idxBytes(0x803, {2, 1, 2}, {0, 255, 255, 255}), false);
  writeFile(lab, idxBytes(0x801, {2}, {0, 1}), false);
  proto::DataDef idxDef;
  idxDef.mutable_idx()->set_train_images(str(img));
  idxDef.mutable_idx()->set_train_labels(str(lab));
  idxDef.mutable_idx()->set_test_images(str(img));
  idxDef.mutable_idx()->set_test_labels(str(lab));
  idxDef.mutable_normalization()->set_kind(proto::Normalization::STANDARDIZE);
  idxDef.mutable_normalization()->set_scale(1.0 / 255);
  auto bytes = loadData(idxDef, "", 0);
  QVERIFY2(bytes.ok(), bytes.ok() ? "" : bytes.error().message.c_str());
  QVERIFY(std::abs(bytes->norm.mean - 0.75f) < 1e-6f);
  QVERIFY(std::abs(bytes->norm.std - std::sqrt(0.1875f)) < 1e-6f);
}

void TestData::missingSource() {
  proto::DataDef def;
  auto r = loadData(def, "", 0);
  QVERIFY(!r.ok());
  QCOMPARE(QString::fromStdString(r.error().message), QString("project has no data source"));

  def.mutable_idx()->set_train_images("missing-images.gz");
  def.mutable_idx()->set_train_labels("missing-labels.gz");
  auto idx = loadData(def, str(m_dir.path()), 0);
  QVERIFY(!idx.ok());
  QVERIFY2(idx.error().message.find(str(m_dir.filePath("missing-images.gz"))) != std::string::npos,
           idx.error().message.c_str());
}

void TestData::augmentFlipMirrors() {
  // 2 channels of 2×3, asymmetric in every row.
  const std::vector<uint8_t> image = {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60};
  const std::vector<uint8_t> mirrored = {3, 2, 1, 6, 5, 4, 30, 20, 10, 60, 50, 40};
  const Shape shape{2, 2, 3};
  Augmenter flip{.horizontalFlip = true};
  QVERIFY(flip.enabled());
  int flipped = 0;
  const int draws = 2000;
  for (int key = 0; key < draws; ++key) {
    std::vector<uint8_t> out(image.size(), 0xff);
    flip.apply(image.data(), out.data(), shape, Augmenter::sampleKey(1, 0, key));
    QVERIFY(out == image || out == mirrored);
    flipped += out == mirrored;
  }
  QVERIFY2(flipped > draws * 0.45 && flipped < draws * 0.55, qPrintable(QString::number(flipped)));

  // Float samples take the same path.
  const std::vector<float> fimage(image.begin(), image.end());
  const std::vector<float> fmirrored(mirrored.begin(), mirrored.end());
  for (int key = 0; key < 20; ++key) {
    std::vector<float> out(fimage.size(), -1.0f);
    flip.apply(fimage.data(), out.data(), shape, Augmenter::sampleKey(1, 0, key));
    QVERIFY(out == fimage || out == fmirrored);
  }
}

void TestData::augmentCropShiftsWindow() {
  const int64_t c = 2, h = 5, w = 6, pad = 2;
  const Dataset ds = imageDataset(1, c, h, w);
  const std::vector<float> in(ds.bytes.begin(), ds.bytes.end());
  Augmenter crop{.cropPadding = pad};
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int key = 0; key < 1000; ++key) {
    std::vector<uint8_t> out(ds.bytes.size(), 0xff);
    crop.apply(ds.bytes.data(), out.data(), ds.sampleShape, Augmenter::sampleKey(3, 1, key));
    const auto shift = shiftOf(in, std::vector<float>(out.begin(), out.end()), c, h, w, pad);
    QVERIFY2(shift.has_value(), "a crop is a shifted window with zeros entering at the edges");
    seen.insert(*shift);
  }
  // torchvision's RandomCrop(size, padding=2) has 5 × 5 offsets; all of them occur.
  QCOMPARE(seen.size(), size_t(25));

  // Through the loader: the shape is kept and normalisation follows the crop, so a
  // zero that entered from the edge normalises like a raw 0.
  const Dataset many = imageDataset(40, c, h, w);
  BatchLoader loader(many, Normalizer{.scale = 1.0f / 255, .mean = 0.5f, .std = 0.5f},
                     {.batchSize = 8, .augment = crop});
  QVERIFY(loader.status().ok());
  Batch b;
  int64_t samples = 0;
  bool sawPadding = false;
  while (loader.next(b)) {
    QCOMPARE(int64_t(b.x.size()), b.size * c * h * w);
    for (float v : b.x) {
      QVERIFY(v >= -1.0f - 1e-6f && v <= 1.0f + 1e-6f);
      sawPadding |= v == -1.0f;
    }
    samples += b.size;
  }
  QCOMPARE(samples, int64_t(40));
  QVERIFY(sawPadding);
}

void TestData::augmentTranslationBounds() {
  const int64_t c = 1, h = 8, w = 7, t = 3;
  const Dataset ds = imageDataset(1, c, h, w);
  const std::vector<float> in(ds.bytes.begin(), ds.bytes.end());
  Augmenter shift{.maxTranslation = t};
  std::set<int64_t> dys, dxs;
  for (int key = 0; key < 1000; ++key) {
    std::vector<float> out(in.size(), -1.0f);
    shift.apply(in.data(), out.data(), ds.sampleShape, Augmenter::sampleKey(9, 2, key));
    // Search wider than t, so an out-of-bounds shift would be found and rejected.
    const auto s = shiftOf(in, out, c, h, w, t + 2);
    QVERIFY(s.has_value());
    QVERIFY(std::abs(s->first) <= t && std::abs(s->second) <= t);
    dys.insert(s->first);
    dxs.insert(s->second);
  }
  QCOMPARE(dys.size(), size_t(2 * t + 1));
  QCOMPARE(dxs.size(), size_t(2 * t + 1));
}

void TestData::augmentCombinedStaysAWindow() {
  // Crop, translation and flip together: every pixel is zero or the input pixel at one
  // offset per sample, mirrored or not, and never from further than p + t away.
  const int64_t c = 1, h = 6, w = 6, p = 1, t = 2;
  const Dataset ds = imageDataset(1, c, h, w);
  Augmenter all{.cropPadding = p, .horizontalFlip = true, .maxTranslation = t};
  for (int key = 0; key < 300; ++key) {
    std::vector<uint8_t> out(ds.bytes.size(), 0xff);
    all.apply(ds.bytes.data(), out.data(), ds.sampleShape, Augmenter::sampleKey(0, 0, key));
    bool explained = false;
    for (bool mirrored : {false, true}) {
      for (int64_t dy = -(p + t); dy <= p + t && !explained; ++dy) {
        for (int64_t dx = -(p + t); dx <= p + t && !explained; ++dx) {
          bool ok = true;
          for (int64_t y = 0; y < h && ok; ++y) {
            for (int64_t x = 0; x < w && ok; ++x) {
              const int64_t sy = y + dy, sx = (mirrored ? w - 1 - x : x) + dx;
              const uint8_t v = out[y * w + x];
              const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
              ok = v == 0 || (inside && v == ds.bytes[sy * w + sx]);
            }
          }
          explained = ok;
        }
      }
    }
    QVERIFY(explained);
  }
}

void TestData::augmentDeterministicPerEpoch() {
  const Dataset ds = imageDataset(60, 3, 6, 5);
  Augmenter aug{.cropPadding = 2, .horizontalFlip = true, .maxTranslation = 1};
  BatchLoader::Options opts{.batchSize = 7, .seed = 11, .epoch = 3, .prefetch = 1, .augment = aug};
  const std::vector<float> first = epochFeatures(ds, opts);
  QCOMPARE(int64_t(first.size()), ds.size() * ds.featuresPerSample());
  opts.prefetch = 4;  // a different schedule on the prefetch thread changes nothing
  QCOMPARE(epochFeatures(ds, opts), first);

  // Same order, other augmentations: the draws depend on the epoch, not only the order.
  opts.epoch = 4;
  opts.shuffle = false;
  const std::vector<float> epoch4 = epochFeatures(ds, opts);
  opts.epoch = 5;
  const std::vector<float> epoch5 = epochFeatures(ds, opts);
  QVERIFY(epoch4 != epoch5);
  opts.seed = 12;
  QVERIFY(epochFeatures(ds, opts) != epoch5);

  // The same sample in the same epoch is augmented alike whatever its position.
  opts.seed = 11;
  opts.shuffle = true;
  const std::vector<float> shuffled5 = epochFeatures(ds, opts);
  const auto order = BatchLoader::epochOrder(ds.size(), true, 11, 5);
  const int64_t f = ds.featuresPerSample();
  for (int64_t pos = 0; pos < ds.size(); ++pos) {
    QVERIFY(std::equal(shuffled5.begin() + pos * f, shuffled5.begin() + (pos + 1) * f,
                       epoch5.begin() + order[pos] * f));
  }
}

void TestData::augmentSkipBatchesMatchesTail() {
  const Dataset ds = imageDataset(50, 1, 5, 5);
  Augmenter aug{.cropPadding = 1, .horizontalFlip = true, .maxTranslation = 2};
  BatchLoader::Options opts{.batchSize = 8, .seed = 4, .epoch = 2, .augment = aug};
  const std::vector<float> full = epochFeatures(ds, opts);
  opts.skipBatches = 3;
  const std::vector<float> tail = epochFeatures(ds, opts);
  const int64_t f = ds.featuresPerSample();
  QCOMPARE(int64_t(tail.size()), (50 - 24) * f);
  QVERIFY(std::equal(tail.begin(), tail.end(), full.begin() + 24 * f));
}

void TestData::augmentOffLeavesSamples() {
  const Dataset ds = imageDataset(30, 2, 4, 4);
  const Normalizer norm{.scale = 1.0f / 255};
  BatchLoader::Options opts{.batchSize = 8, .shuffle = false};
  QVERIFY(!opts.augment.enabled());  // off unless asked for
  BatchLoader plain(ds, norm, opts);
  Batch b;
  int64_t pos = 0;
  while (plain.next(b)) {
    for (float v : b.x) QCOMPARE(v, float(ds.bytes[pos++]) / 255);
  }
  QCOMPARE(pos, int64_t(ds.bytes.size()));

  // Zero sizes and no flip are off too, even when set explicitly.
  opts.augment = Augmenter{.cropPadding = 0, .horizontalFlip = false, .maxTranslation = 0};
  QVERIFY(!opts.augment.enabled());
  BatchLoader zero(ds, norm, opts);
  pos = 0;
  while (zero.next(b)) {
    for (float v : b.x) QCOMPARE(v, float(ds.bytes[pos++]) / 255);
  }

  // loadData leaves augmentation off unless the DataDef asks, and carries it when it does.
  const QString img = m_dir.filePath("aug-images"), lab = m_dir.filePath("aug-labels");
  writeFile(img, idxBytes(0x803, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), false);
  writeFile(lab, idxBytes(0x801, {2}, {0, 1}), false);
  proto::DataDef def;
  def.mutable_idx()->set_train_images(str(img));
  def.mutable_idx()->set_train_labels(str(lab));
  def.mutable_idx()->set_test_images(str(img));
  def.mutable_idx()->set_test_labels(str(lab));
  auto off = loadData(def, "", 0);
  QVERIFY2(off.ok(), off.ok() ? "" : off.error().message.c_str());
  QVERIFY(!off->augment.enabled());
  def.mutable_augmentation()->set_crop_padding(4);
  def.mutable_augmentation()->set_horizontal_flip(true);
  def.mutable_augmentation()->set_max_translation(1);
  auto on = loadData(def, "", 0);
  QVERIFY2(on.ok(), on.ok() ? "" : on.error().message.c_str());
  QCOMPARE(on->augment.cropPadding, 4);
  QVERIFY(on->augment.horizontalFlip);
  QCOMPARE(on->augment.maxTranslation, 1);
}

void TestData::augmentNonImageIsError() {
  proto::DataDef def;
  def.mutable_synthetic()->set_kind(proto::SyntheticSource::BLOBS);
  def.mutable_synthetic()->set_features(5);
  def.mutable_augmentation()->set_horizontal_flip(true);
  auto r = loadData(def, "", 0);
  QVERIFY(!r.ok());
  QCOMPARE(QString::fromStdString(r.error().message),
           QString::fromStdString("augmentation needs image samples (channels × height × width), "
                                  "the dataset has samples of shape " +
                                  shapeToString({5})));

  def.mutable_augmentation()->set_horizontal_flip(false);
  def.mutable_augmentation()->set_crop_padding(-1);
  auto negative = loadData(def, "", 0);
  QVERIFY(!negative.ok());
  QVERIFY2(negative.error().message.find("crop_padding") != std::string::npos,
           negative.error().message.c_str());

  // A loader handed augmentation for non-image data says so and yields nothing.
  const Dataset flat = indexDataset(10, 2);
  BatchLoader loader(flat, Normalizer{}, {.augment = Augmenter{.maxTranslation = 1}});
  QVERIFY(!loader.status().ok());
  QVERIFY2(loader.status().message().find("augmentation needs image samples") != std::string::npos,
           loader.status().message().c_str());
  Batch b;
  QVERIFY(!loader.next(b));
  // Off, the same data loads as before.
  BatchLoader plain(flat, Normalizer{}, {});
  QVERIFY(plain.status().ok());
  QVERIFY(plain.next(b));
}

QTEST_APPLESS_MAIN(TestData)
#include "tst_data.moc"
