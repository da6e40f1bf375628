// Data augmentation on the prefetch threads: flips, padded crops and translations,
// seeded per sample so results do not depend on threads or on resuming.
#include <QtTest>
#include <algorithm>

#include "data_fixture.h"

using namespace netloom;
using namespace datafixture;

class TestAugment : public QObject {
  Q_OBJECT

 private slots:
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

void TestAugment::augmentFlipMirrors() {
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

void TestAugment::augmentCropShiftsWindow() {
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

void TestAugment::augmentTranslationBounds() {
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

void TestAugment::augmentCombinedStaysAWindow() {
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
    // The input has no zero pixel, so what is kept is a rectangle with zeros around it
    // (the two shifts' windows intersected): all of it non-zero, and each shift loses
    // at most its own extent, so never less than (h - p - t) × (w - p - t).
    int64_t top = h, bottom = -1, left = w, right = -1;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        if (out[y * w + x] != 0) {
          top = std::min(top, y), bottom = std::max(bottom, y);
          left = std::min(left, x), right = std::max(right, x);
        }
    QVERIFY2(bottom - top + 1 >= h - p - t && right - left + 1 >= w - p - t,
             qPrintable(QString("key %1 kept rows %2..%3, columns %4..%5")
                            .arg(key)
                            .arg(top)
                            .arg(bottom)
                            .arg(left)
                            .arg(right)));
    for (int64_t y = top; y <= bottom; ++y)
      for (int64_t x = left; x <= right; ++x) QVERIFY(out[y * w + x] != 0);
  }
}

void TestAugment::augmentDeterministicPerEpoch() {
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

void TestAugment::augmentSkipBatchesMatchesTail() {
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

void TestAugment::augmentOffLeavesSamples() {
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
  def.mutable_augmentation()->set_crop_padding(2);
  def.mutable_augmentation()->set_horizontal_flip(true);
  def.mutable_augmentation()->set_max_translation(1);
  auto on = loadData(def, "", 0);
  QVERIFY2(on.ok(), on.ok() ? "" : on.error().message.c_str());
  QCOMPARE(on->augment.cropPadding, 2);
  QVERIFY(on->augment.horizontalFlip);
  QCOMPARE(on->augment.maxTranslation, 1);
}

void TestAugment::augmentNonImageIsError() {
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

QTEST_APPLESS_MAIN(TestAugment)
#include "tst_augment.moc"
