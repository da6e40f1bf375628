// Fusion and folding: each rewrite against the plan without it, on the same inputs.
#include <QtTest>
#include <cmath>
#include <cstring>

#include "cpu_isa.h"
#include "engine/compiler/compile.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

class TestFusion : public QObject {
  Q_OBJECT

 private slots:
  // BatchNorm takes the ReLU after it into its kernel (training and evaluation, both
  // activation layouts): the loss, every gradient and the evaluated logits are bit for
  // bit those of the unfused plan. A project cannot set the attribute itself.
  void fusesBatchNormWithItsRelu_data() {
    QTest::addColumn<bool>("blocked");
    QTest::newRow("nchw") << false;
    QTest::newRow("nChw16c") << true;
  }
  void fusesBatchNormWithItsRelu() {
    QFETCH(bool, blocked);
    if (blocked && !oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);
    const std::string body =
        input("x", "2,3,3") + labels() +
        node("conv", "Conv2d", "x", intAttr("out_channels", 16) + intAttr("kernel_size", 1)) +
        node("bn", "BatchNorm", "conv") + node("act", "ReLU", "bn") +
        node("flat", "Flatten", "act") + node("fc", "Linear", "flat", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    Rng rng(11);
    std::vector<float> x(6 * 2 * 3 * 3);
    for (float& v : x) v = float(rng.uniform(-2, 2));
    std::vector<int32_t> l{0, 2, 1, 1, 0, 2};
    std::vector<std::vector<float>> results;
    for (bool fuse : {true, false}) {
      std::vector<float> all;
      for (bool training : {true, false}) {
        ParamStore store;
        CompileOptions o;
        o.batch = 6;
        o.fuse = fuse;
        o.training = training;
        o.updateParams = false;
        o.blockedLayouts = blocked;
        o.keep = {"fc"};
        auto p = compile(model(body), o, store);
        QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
        bool relu = false;
        for (const Node& n : (*p)->graph.nodes) relu = relu || n.op->name == "ReLU";
        QCOMPARE(relu, !fuse);
        if (fuse) {
          QCOMPARE(int((*p)->fusions.size()), 1);
          QVERIFY2((*p)->fusions[0].find("BatchNorm with ReLU") != std::string::npos,
                   (*p)->fusions[0].c_str());
          std::string kernel;
          for (const PlanStep& s : (*p)->steps)
            if ((*p)->graph.nodes[size_t(s.node)].name == "bn") kernel = s.kernel;
          QVERIFY2(kernel == (blocked ? "cpu.batch_norm_blocked" : "reference.batch_norm"),
                   kernel.c_str());
        }
        std::memcpy((*p)->input("x")->data, x.data(), x.size() * sizeof(float));
        if (training) std::memcpy((*p)->input("label")->data, l.data(), l.size() * 4);
        StepContext ctx;
        ctx.step = 1;
        ctx.training = training;
        (*p)->run(ctx);
        if (training) all = lossAndGradients(**p);
        const TensorRef& fc = (*p)->refs[(*p)->graph.findValue("fc")];
        all.insert(all.end(), fc.f32(), fc.f32() + fc.numel());
      }
      results.push_back(all);
    }
    QCOMPARE(results[0], results[1]);
    expectCompileError(
        input("x", "2,3,3") +
            node("bn", "BatchNorm", "x", "attrs { key: 'activation' value { s: 'relu' } }"),
        {"'bn'", "attribute 'activation' is set by the compiler"});
  }

  // An evaluation plan folds each BatchNorm into the convolution or Linear before it:
  // no BatchNorm runs, and the logits and loss are those of the unfolded plan on the
  // same trained store to float rounding, the weights packed or not, with and without
  // the layer's bias and BatchNorm's affine parameters.
  void foldsBatchNormIntoTheLayerForEvaluation_data() {
    QTest::addColumn<bool>("blocked");
    QTest::addColumn<bool>("bias");
    QTest::addColumn<bool>("affine");
    QTest::newRow("nchw") << false << true << true;
    QTest::newRow("nChw16c, packed weights") << true << true << true;
    QTest::newRow("no bias, not affine") << true << false << false;
  }
  void foldsBatchNormIntoTheLayerForEvaluation() {
    QFETCH(bool, blocked);
    if (blocked && !oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);
    QFETCH(bool, bias);
    QFETCH(bool, affine);
    const std::string flags =
        std::string("attrs { key: 'bias' value { b: ") + (bias ? "true" : "false") + " } }";
    const std::string norm = std::string("attrs { key: 'affine' value { b: ") +
                             (affine ? "true" : "false") +
                             " } } attrs { key: 'momentum' value { f: 0.5 } }";
    const std::string body = input("x", "2,6,6") + labels() +
                             node("conv", "Conv2d", "x",
                                  intAttr("out_channels", 16) + intAttr("kernel_size", 3) + flags) +
                             node("bn", "BatchNorm", "conv", norm) + node("act", "ReLU", "bn") +
                             node("pool", "MaxPool2d", "act", intAttr("kernel_size", 2)) +
                             node("flat", "Flatten", "pool") +
                             node("fc1", "Linear", "flat", intAttr("out_features", 8) + flags) +
                             node("bn2", "BatchNorm", "fc1", norm) + node("act2", "ReLU", "bn2") +
                             node("fc", "Linear", "act2", intAttr("out_features", 3)) +
                             node("loss", "SoftmaxCrossEntropy", "fc,label");
    ParamStore store;
    CompileOptions o;
    o.batch = 6;
    o.blockedLayouts = blocked;
    auto train = compile(model(body), o, store);
    QVERIFY2(train.ok(), train.ok() ? "" : train.error().message.c_str());
    Rng rng(3);
    auto feedRandom = [&](Program& p) {
      const TensorRef* x = p.input("x");
      for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = float(rng.uniform(-1, 3));
      const TensorRef* l = p.input("label");
      for (int64_t i = 0; i < l->numel(); ++i) l->i32()[i] = int32_t(rng.next() % 3);
    };
    StepContext ctx;
    ctx.lr = 1e-2;
    for (ctx.step = 1; ctx.step <= 5; ++ctx.step) {  // statistics and weights away from their start
      feedRandom(**train);
      (*train)->run(ctx);
    }
    std::vector<std::vector<float>> results;
    for (bool fold : {true, false}) {
      o.training = false;
      o.evaluation = fold;
      o.keep = {"fc"};
      auto p = compile(model(body), o, store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      int norms = 0, folds = 0;
      for (const Node& n : (*p)->graph.nodes) {
        norms += n.op->name == "BatchNorm";
        folds += n.op->name == "FoldBatchNorm";
      }
      QCOMPARE(norms, fold ? 0 : 2);
      QCOMPARE(folds, fold ? 2 : 0);
      if (blocked) QVERIFY((*p)->packedWeights > 0);
      Rng same(9);
      const TensorRef* x = (*p)->input("x");
      for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = float(same.uniform(-1, 3));
      const TensorRef* l = (*p)->input("label");
      for (int64_t i = 0; i < l->numel(); ++i) l->i32()[i] = int32_t(i % 3);
      StepContext eval;
      eval.training = false;
      (*p)->run(eval);
      const TensorRef& fc = (*p)->refs[(*p)->graph.findValue("fc")];
      std::vector<float> out(fc.f32(), fc.f32() + fc.numel());
      out.push_back(float((*p)->scalar((*p)->loss)));
      results.push_back(out);
    }
    for (size_t i = 0; i < results[0].size(); ++i)
      QVERIFY2(
          std::fabs(results[0][i] - results[1][i]) <= 1e-5f * (1.f + std::fabs(results[1][i])),
          qPrintable(
              QString("%1: folded %2, unfolded %3").arg(i).arg(results[0][i]).arg(results[1][i])));
  }

  // A residual sum takes the ReLU after it into its loop, in both activation layouts:
  // no ReLU runs, and the loss and every gradient are bit for bit the unfused plan's.
  void fusesAddWithItsRelu_data() {
    QTest::addColumn<bool>("blocked");
    QTest::newRow("nchw") << false;
    QTest::newRow("nChw16c") << true;
  }
  void fusesAddWithItsRelu() {
    QFETCH(bool, blocked);
    if (blocked && !oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);
    const std::string conv = intAttr("out_channels", 16) + intAttr("kernel_size", 1);
    const std::string body = input("x", "2,3,3") + labels() + node("c1", "Conv2d", "x", conv) +
                             node("c2", "Conv2d", "x", conv) + node("sum", "Add", "c1,c2") +
                             node("act", "ReLU", "sum") + node("c3", "Conv2d", "act", conv) +
                             node("flat", "Flatten", "c3") +
                             node("fc", "Linear", "flat", intAttr("out_features", 3)) +
                             node("loss", "SoftmaxCrossEntropy", "fc,label");
    std::vector<std::vector<float>> results;
    for (bool fuse : {true, false}) {
      ParamStore store;
      CompileOptions o;
      o.batch = 6;
      o.fuse = fuse;
      o.updateParams = false;
      o.blockedLayouts = blocked;
      auto p = compile(model(body), o, store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      int relus = 0;
      for (const Node& n : (*p)->graph.nodes) relus += n.op->name == "ReLU";
      QCOMPARE(relus, fuse ? 0 : 1);
      if (fuse) {
        QCOMPARE(int((*p)->fusions.size()), 1);
        QVERIFY2((*p)->fusions[0] == "sum + act -> Add with ReLU", (*p)->fusions[0].c_str());
        if (blocked) QVERIFY((*p)->blockedTensors > 0);
      }
      Rng rng(12);
      const TensorRef* x = (*p)->input("x");
      for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = float(rng.uniform(-2, 2));
      for (int64_t i = 0; i < 6; ++i) (*p)->input("label")->i32()[i] = int32_t(i % 3);
      StepContext ctx;
      ctx.step = 1;
      (*p)->run(ctx);
      results.push_back(lossAndGradients(**p));
    }
    QCOMPARE(results[0], results[1]);
  }
};

QTEST_GUILESS_MAIN(TestFusion)
#include "tst_fusion.moc"
