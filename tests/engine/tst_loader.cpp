// BatchLoader: each epoch's seeded order, batches that cover it once, normalised,
// resumed part-way, stopped part-way, and assembled by a prefetch thread or by the
// caller's threads alike.
#include <omp.h>

#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "data_fixture.h"

using namespace netloom;
using namespace datafixture;

class TestLoader : public QObject {
  Q_OBJECT

 private slots:
  void epochOrderIsDeterministicPermutation();
  void loaderCoversEpochOnce();
  void loaderNormalisesBytes();
  void loaderOnTheCallerGivesTheSameBatches_data();
  void loaderOnTheCallerGivesTheSameBatches();
  void loaderSkipBatches();
  void loaderStopsMidEpoch();
};

void TestLoader::epochOrderIsDeterministicPermutation() {
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

void TestLoader::loaderCoversEpochOnce() {
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

void TestLoader::loaderNormalisesBytes() {
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

void TestLoader::loaderOnTheCallerGivesTheSameBatches_data() {
  QTest::addColumn<int>("threads");
  QTest::addColumn<bool>("augment");
  QTest::addColumn<int64_t>("skipSamples");
  QTest::newRow("1 thread") << 1 << false << int64_t(-1);
  QTest::newRow("2 threads, augmented") << 2 << true << int64_t(-1);
  QTest::newRow("3 threads, resumed mid-epoch") << 3 << true << int64_t(50);
}

// Batches assembled by the step's threads (Options::onCaller) are the prefetch
// thread's, bit for bit: the same samples in the same order, each channel normalised
// with its own mean and deviation, the same crops and flips, the short last batch.
void TestLoader::loaderOnTheCallerGivesTheSameBatches() {
  QFETCH(int, threads);
  QFETCH(bool, augment);
  QFETCH(int64_t, skipSamples);
  Dataset ds;
  ds.sampleShape = {3, 6, 5};
  ds.classes = 7;
  const int64_t n = 101, f = 3 * 6 * 5;
  for (int64_t i = 0; i < n * f; ++i) ds.bytes.push_back(uint8_t((i * 37 + i / f) % 256));
  for (int64_t i = 0; i < n; ++i) ds.labels.push_back(int32_t(i % 7));
  Normalizer norm{1.0f / 255, 0.f, 1.f, {0.2f, 0.5f, 0.7f}, {0.3f, 0.25f, 0.1f}};
  BatchLoader::Options opts{.batchSize = 24, .seed = 9, .epoch = 3, .skipSamples = skipSamples};
  if (augment) opts.augment = Augmenter{.cropPadding = 2, .horizontalFlip = true};
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  BatchLoader prefetched(ds, norm, opts);
  opts.onCaller = true;
  BatchLoader here(ds, norm, opts);
  omp_set_num_threads(before);
  QCOMPARE(here.batchesPerEpoch(), prefetched.batchesPerEpoch());
  Batch a, b;
  int64_t batches = 0, samples = 0;
  while (prefetched.next(a)) {
    QVERIFY(here.next(b));
    QCOMPARE(b.size, a.size);
    QCOMPARE(b.globalSize, a.globalSize);
    QCOMPARE(b.labels, a.labels);
    QCOMPARE(b.labelFloats, a.labelFloats);
    QCOMPARE(b.x.size(), a.x.size());
    QVERIFY(std::memcmp(b.x.data(), a.x.data(), a.x.size() * sizeof(float)) == 0);
    ++batches;
    samples += a.size;
  }
  QVERIFY(!here.next(b));
  QVERIFY(here.status().ok());
  QCOMPARE(samples, n - std::max<int64_t>(skipSamples, 0));
  QCOMPARE(batches, (samples + 23) / 24);
}

void TestLoader::loaderSkipBatches() {
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

void TestLoader::loaderStopsMidEpoch() {
  Dataset ds;
  ds.sampleShape = {1, 28, 28};
  ds.bytes.assign(20000 * 784, 7);
  ds.labels.assign(20000, 1);
  ds.classes = 2;
  // The producer waits for room in its queue of `prefetch` batches, so a loader
  // that did not stop it would never finish destroying: returning is the check
  // (a hang fails by CTest's timeout), whatever the machine's speed.
  for (int prefetch : {1, 2, 4}) {
    { BatchLoader untouched(ds, Normalizer{}, {.batchSize = 64, .prefetch = prefetch}); }
    BatchLoader loader(ds, Normalizer{}, {.batchSize = 64, .prefetch = prefetch});
    Batch b;
    QVERIFY(loader.next(b));
    QVERIFY(loader.next(b));
    QCOMPARE(b.size, int64_t(64));
  }
}

QTEST_APPLESS_MAIN(TestLoader)
#include "tst_loader.moc"
