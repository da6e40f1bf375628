// The data sources: IDX and CSV readers and their error messages, synthetic sets,
// seeded splits and normalisation. The batches made of them: tst_loader.
#include <zlib.h>

#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "data_fixture.h"

using namespace netloom;
using namespace datafixture;

class TestData : public QObject {
  Q_OBJECT

 private slots:
  void idxRoundTrip_data();
  void idxRoundTrip();
  void idxErrorsNameTheFile();
  void fashionMnist();
  void csvHeaderAndLabelByName();
  void csvErrors();
  void csvQuotedDelimiter();
  void csvEscapedQuoteInHeader();
  void csvCrlfLineEnds();
  void csvLineBreakInQuotedHeader();
  void csvUnterminatedQuote();
  void csvTestSplit();
  void syntheticDeterministicAndBalanced();
  void validationSplitAndLimits();
  void normalizationKinds();
  void missingSource();

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

  // One epoch through the loader (its time is printed; tests/bench holds the speed
  // goals): every sample exactly once, so each class 6000 times and the features'
  // total the dataset's own, pixel by pixel scaled by 1/255.
  timer.restart();
  BatchLoader loader(splits->train, splits->norm, {.batchSize = 128, .seed = 3});
  Batch b;
  int64_t seen = 0;
  double total = 0;
  std::map<int32_t, int> perClass;
  while (loader.next(b)) {
    seen += b.size;
    for (float v : b.x) total += v;
    for (int32_t l : b.labels) ++perClass[l];
  }
  qInfo("one epoch of 128-batches in %lld ms", static_cast<long long>(timer.elapsed()));
  QCOMPARE(seen, int64_t(60000));
  QCOMPARE(int(perClass.size()), 10);
  for (const auto& [label, count] : perClass) QCOMPARE(count, 6000);
  double expected = 0;
  for (uint8_t v : splits->train.bytes) expected += v / 255.0;
  QVERIFY2(std::abs(total - expected) <= 1e-6 * expected,
           qPrintable(QString("features total %1, the dataset's %2").arg(total).arg(expected)));
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

void TestData::csvQuotedDelimiter() {
  // The delimiter inside quotes belongs to the field, in the header and in the rows.
  const QString path = m_dir.filePath("quoted.csv");
  writeFile(path, "\"x,1\", \"label\" ,y\n\"1.5\",\"0\",2\n -3 , \"2\" ,\"4e1\"\n", false);
  auto ds = readCsv(str(path), "label", true, ',');
  QVERIFY2(ds.ok(), ds.ok() ? "" : ds.error().message.c_str());
  QCOMPARE(ds->size(), int64_t(2));
  QCOMPARE(ds->sampleShape, (Shape{2}));
  QCOMPARE(ds->floats, (std::vector<float>{1.5f, 2, -3, 40}));
  QCOMPARE(ds->targets, (std::vector<float>{0, 2}));
  QCOMPARE(ds->labels, (std::vector<int32_t>{0, 2}));
  QCOMPARE(ds->origins, (std::vector<int64_t>{2, 3}));

  // A quoted "1,5" is one field (no ragged row), and not a number.
  const QString comma = m_dir.filePath("quoted-comma.csv");
  writeFile(comma, "\"x,1\",label\n2,0\n\"1,5\",1\n", false);
  auto c = readCsv(str(comma), "", true, ',');
  QVERIFY(!c.ok());
  const std::string& cm = c.error().message;
  QVERIFY2(cm.find("quoted-comma.csv' line 3, column 1 ('x,1')") != std::string::npos, cm.c_str());
  QVERIFY2(cm.find("'1,5' is not a number") != std::string::npos, cm.c_str());

  // Semicolons too, and quoted fields need no quotes anywhere else.
  const QString semi = m_dir.filePath("quoted.ssv");
  writeFile(semi, "\"a;b\";c\n1;\"3\"\n\"2\";4\n", false);
  auto s = readCsv(str(semi), "a;b", true, ';');
  QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
  QCOMPARE(s->floats, (std::vector<float>{3, 4}));
  QCOMPARE(s->labels, (std::vector<int32_t>{1, 2}));
}

void TestData::csvEscapedQuoteInHeader() {
  // "" inside a quoted field is one quote; the label column is asked for by that name.
  const QString path = m_dir.filePath("escaped.csv");
  writeFile(path, "a,\"say \"\"hi\"\"\",\"\"\"b\"\"\"\n1,1,2\n3,0,4\n", false);
  auto ds = readCsv(str(path), "say \"hi\"", true, ',');
  QVERIFY2(ds.ok(), ds.ok() ? "" : ds.error().message.c_str());
  QCOMPARE(ds->size(), int64_t(2));
  QCOMPARE(ds->floats, (std::vector<float>{1, 2, 3, 4}));
  QCOMPARE(ds->labels, (std::vector<int32_t>{1, 0}));
  QCOMPARE(ds->classes, 2);

  // The names come back unquoted in messages.
  auto unknown = readCsv(str(path), "hi", true, ',');
  QVERIFY(!unknown.ok());
  const std::string& um = unknown.error().message;
  QVERIFY2(um.find("(a, say \"hi\", \"b\")") != std::string::npos, um.c_str());
}

void TestData::csvCrlfLineEnds() {
  // CRLF ends records, also right after a closing quote; blank CRLF lines are skipped.
  const QString path = m_dir.filePath("crlf.csv");
  writeFile(path, "a,\"b\",label\r\n1,2,0\r\n\r\n\"3\",4,1\r\n5,6,\"2\"\r\n", false);
  auto ds = readCsv(str(path), "label", true, ',');
  QVERIFY2(ds.ok(), ds.ok() ? "" : ds.error().message.c_str());
  QCOMPARE(ds->size(), int64_t(3));
  QCOMPARE(ds->floats, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  QCOMPARE(ds->labels, (std::vector<int32_t>{0, 1, 2}));
  QCOMPARE(ds->origins, (std::vector<int64_t>{2, 4, 5}));

  // Tab-delimited without a header: the CR is not part of the last field.
  const QString tsv = m_dir.filePath("crlf.tsv");
  writeFile(tsv, "1\t\"2\"\r\n3\t4\r\n", false);
  auto t = readCsv(str(tsv), "", false, '\t');
  QVERIFY2(t.ok(), t.ok() ? "" : t.error().message.c_str());
  QCOMPARE(t->floats, (std::vector<float>{1, 3}));
  QCOMPARE(t->labels, (std::vector<int32_t>{2, 4}));
}

void TestData::csvLineBreakInQuotedHeader() {
  // Header names spanning LF and CRLF breaks: the header takes lines 1-3.
  const QString path = m_dir.filePath("multiline.csv");
  writeFile(path, "\"first\nfeature\",\"second\r\nfeature\",label\n1,2,0\n3,4,1\n", false);
  auto ds = readCsv(str(path), "first\nfeature", true, ',');
  QVERIFY2(ds.ok(), ds.ok() ? "" : ds.error().message.c_str());
  QCOMPARE(ds->size(), int64_t(2));
  QCOMPARE(ds->floats, (std::vector<float>{2, 0, 4, 1}));
  QCOMPARE(ds->labels, (std::vector<int32_t>{1, 3}));
  QCOMPARE(ds->origins, (std::vector<int64_t>{4, 5}));

  // Messages name the physical line a record starts on: line 5, the 4th record.
  const QString ragged = m_dir.filePath("multiline-ragged.csv");
  writeFile(ragged, "\"a\nb\",c,label\n1,2,0\n\"3\",\"4\",1\n\"5\n\",6\n", false);
  auto r = readCsv(str(ragged), "", true, ',');
  QVERIFY(!r.ok());
  const std::string& rm = r.error().message;
  QVERIFY2(rm.find("multiline-ragged.csv' line 5: expected 3 columns, got 2") != std::string::npos,
           rm.c_str());
}

void TestData::csvUnterminatedQuote() {
  // The file ends inside quotes: the error names the line where the quote opened.
  const QString path = m_dir.filePath("unterminated.csv");
  writeFile(path, "a,label\n1,0\n2,\"1\n3,1\n", false);
  auto u = readCsv(str(path), "", true, ',');
  QVERIFY(!u.ok());
  const std::string& um = u.error().message;
  QVERIFY2(um.find("unterminated.csv' line 3") != std::string::npos, um.c_str());
  QVERIFY2(um.find("never closed") != std::string::npos, um.c_str());

  // A quote opened on a record's second line is named by that line.
  const QString later = m_dir.filePath("unterminated-later.csv");
  writeFile(later, "a,b,label\n1,2,0\n\"x\ny\",\"3\n", false);
  auto l = readCsv(str(later), "", true, ',');
  QVERIFY(!l.ok());
  QVERIFY2(l.error().message.find("unterminated-later.csv' line 4") != std::string::npos,
           l.error().message.c_str());

  // In the header too.
  const QString header = m_dir.filePath("unterminated-header.csv");
  writeFile(header, "\"a,label\n1,0\n", false);
  auto h = readCsv(str(header), "", true, ',');
  QVERIFY(!h.ok());
  QVERIFY2(h.error().message.find("unterminated-header.csv' line 1") != std::string::npos,
           h.error().message.c_str());

  // A quote closed by the file's last byte, with no line break after it, is fine.
  const QString closed = m_dir.filePath("closed-at-end.csv");
  writeFile(closed, "a,label\n1,0\n2,\"1\"", false);
  auto c = readCsv(str(closed), "", true, ',');
  QVERIFY2(c.ok(), c.ok() ? "" : c.error().message.c_str());
  QCOMPARE(c->size(), int64_t(2));
  QCOMPARE(c->floats, (std::vector<float>{1, 2}));
  QCOMPARE(c->labels, (std::vector<int32_t>{0, 1}));
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

QTEST_APPLESS_MAIN(TestData)
#include "tst_data.moc"
