// Attention maps from saved weights: for a prompt, each causal layer's heads weigh
// only the tokens up to each query, every row sums to one, a longer prompt leaves the
// rows of its prefix as they were, and the tokens are spelled as the vocabulary
// spells them; for an image, every patch attends to every patch (the ViT project).
// Bad queries are named.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "../common/fashion.h"
#include "../common/tiny_gpt.h"
#include "engine/io/project_file.h"
#include "engine/train/attention_maps.h"

using namespace netloom;

namespace {

bool rowsSumToOne(const AttentionMap& m, bool causal) {
  for (int64_t h = 0; h < m.heads; ++h)
    for (int64_t i = 0; i < m.queries; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < m.keys; ++j) {
        const float w = m.at(h, i, j);
        if (w < 0 || (causal && j > i && w != 0)) return false;
        sum += w;
      }
      if (std::fabs(sum - 1) > 1e-4) return false;
    }
  return true;
}

}  // namespace

class TestAttentionMaps : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

 private slots:
  void promptMaps() {
    auto gpt = testutil::writeTinyGpt(m_dir.path());
    QVERIFY(!gpt.project.empty());
    auto project = loadProject(gpt.project);
    QVERIFY(project.ok());
    TrainOptions o;
    o.maxSteps = 3;
    o.threads = 1;
    o.saveWeights = m_dir.filePath("gpt.safetensors").toStdString();
    auto trained = runTraining(*project, o, [](const proto::TrainEvent&) {});
    QVERIFY2(trained.ok(), trained.ok() ? "" : trained.error().message.c_str());

    TrainOptions use;
    use.threads = 1;
    auto maps = attentionMaps(*project, use, o.saveWeights, {"a cat", 0});
    QVERIFY2(maps.ok(), maps.ok() ? "" : maps.error().message.c_str());
    QCOMPARE(maps->tokens, (std::vector<std::string>{"a", " ", "c", "a", "t"}));
    QCOMPARE(int(maps->layers.size()), 1);
    const AttentionMap& m = maps->layers[0];
    QCOMPARE(m.node, std::string("att"));
    QCOMPARE(m.heads, int64_t(2));
    QCOMPARE(m.queries, int64_t(5));
    QCOMPARE(m.keys, int64_t(5));
    QVERIFY(rowsSumToOne(m, true));
    QCOMPARE(m.at(1, 0, 0), 1.f);  // the first token sees only itself

    // Causal: the prefix's rows do not depend on what follows it.
    auto longer = attentionMaps(*project, use, o.saveWeights, {"a cat sat", 0});
    QVERIFY(longer.ok());
    const AttentionMap& l = longer->layers[0];
    QCOMPARE(l.queries, int64_t(8));  // the context's 8 positions: the last 8 tokens
    QCOMPARE(longer->tokens.front(), std::string(" "));
    auto prefix = attentionMaps(*project, use, o.saveWeights, {" cat sat", 0});
    QVERIFY(prefix.ok());
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 8; ++i)
        for (int64_t j = 0; j <= i; ++j)
          QVERIFY(std::fabs(l.at(h, i, j) - prefix->layers[0].at(h, i, j)) < 1e-6);

    auto empty = attentionMaps(*project, use, o.saveWeights, {"", 0});
    QVERIFY(!empty.ok());
    QVERIFY(empty.error().message.find("prompt is empty") != std::string::npos);
  }

  void imageMaps() {
    if (!testing::haveFashion()) QSKIP("Fashion-MNIST is not installed (dataset-fashion-mnist)");
    const std::string weights = m_dir.filePath("vit.safetensors").toStdString();
    auto vit = testing::briefVit(weights, 64, 16);
    QVERIFY2(vit.ok(), vit.ok() ? "" : vit.error().message.c_str());
    const proto::Project& p = *vit;
    TrainOptions use;
    use.threads = 1;
    auto maps = attentionMaps(p, use, weights, {"", 3});
    QVERIFY2(maps.ok(), maps.ok() ? "" : maps.error().message.c_str());
    QVERIFY(maps->tokens.empty());
    QCOMPARE(maps->sample.size(), int64_t(1));
    QCOMPARE(int(maps->layers.size()), 4);
    for (const AttentionMap& m : maps->layers) {
      QCOMPARE(m.queries, int64_t(16));  // 28×28 in 7×7 patches
      QCOMPARE(m.keys, int64_t(16));
      QVERIFY(rowsSumToOne(m, false));
    }
    auto past = attentionMaps(p, use, weights, {"", 16});
    QVERIFY(!past.ok());
    QVERIFY2(past.error().message.find("16 samples of the test split") != std::string::npos,
             past.error().message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestAttentionMaps)
#include "tst_attention_maps.moc"
