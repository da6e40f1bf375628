// BatchNorm's two modes through compiled programs: training updates the running
// statistics as PyTorch does (momentum, unbiased variance), evaluation normalises
// with them and leaves them alone; both kernel lists (oneDNN first, and the
// reference) must agree. Bad inputs are refused naming the node and the port or
// attribute.
#include <QtTest>
#include <cmath>
#include <vector>

#include "engine/compiler/compile.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

constexpr int64_t kBatch = 4;
constexpr double kMomentum = 0.3, kEps = 1e-5;

// A BatchNorm over samples of `shape` (C × … or C), trained against a target.
std::string bnModel(const std::string& shape) {
  return input("x", shape) + input("t", shape, "t") +
         node("bn", "BatchNorm", "x", "attrs { key: 'momentum' value { f: 0.3 } }") +
         node("loss", "MSELoss", "bn,t");
}

// Fills x with fresh values (and the target with zeros), returns x.
std::vector<float> feed(const Program& p, Rng& rng) {
  const TensorRef* x = p.input("x");
  const TensorRef* t = p.input("t");
  std::vector<float> v(x->numel());
  for (int64_t i = 0; i < x->numel(); ++i) v[i] = x->f32()[i] = float(rng.uniform(-2, 3));
  for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = 0.f;
  return v;
}

const std::vector<float>& tensor(ParamStore& store, const std::string& name) {
  return store.find(name)->data;
}

}  // namespace

class TestNormModes : public QObject {
  Q_OBJECT

 private slots:
  // N × C × H × W and N × C: oneDNN, where it takes BatchNorm, does so for the latter.
  void runningStatisticsFollowPyTorch_data() {
    QTest::addColumn<bool>("referenceKernels");
    QTest::addColumn<QString>("shape");
    QTest::addColumn<int>("channels");
    for (bool ref : {false, true}) {
      const char* kernels = ref ? "reference kernels" : "preferred kernels";
      QTest::addRow("N×C×H×W, %s", kernels) << ref << QString("3, 2, 2") << 3;
      QTest::addRow("N×C, %s", kernels) << ref << QString("16") << 16;
    }
  }
  void runningStatisticsFollowPyTorch() {
    QFETCH(bool, referenceKernels);
    QFETCH(QString, shape);
    QFETCH(int, channels);
    const int64_t ch = channels;
    ParamStore store;
    CompileOptions o;
    o.batch = kBatch;
    o.referenceKernels = referenceKernels;
    o.keep = {"bn", "bn:1", "bn:2"};
    auto train = compile(model(bnModel(shape.toStdString())), o, store);
    QVERIFY2(train.ok(), train.ok() ? "" : train.error().message.c_str());
    const int64_t area = (*train)->input("x")->numel() / (kBatch * ch);
    auto at = [&](int64_t n, int64_t c, int64_t k) { return (n * ch + c) * area + k; };
    // Which kernels this row covers (oneDNN declines some shapes, see norm.cpp).
    for (const PlanStep& st : (*train)->steps) {
      const Node& n = (*train)->graph.nodes[st.node];
      if (n.name == "bn" || n.origin == "bn")
        qInfo("%s: %s", n.op->name.c_str(), st.kernel.c_str());
    }

    // PyTorch's update by hand, from the fresh buffers (mean 0, variance 1).
    std::vector<double> rm(ch, 0.0), rv(ch, 1.0);
    Rng rng(7);
    StepContext ctx;
    ctx.lr = 0.05;
    for (int step = 1; step <= 3; ++step) {
      ctx.step = step;
      std::vector<float> x = feed(**train, rng);
      (*train)->run(ctx);
      const double n = double(kBatch * area);
      for (int64_t c = 0; c < ch; ++c) {
        double mean = 0, var = 0;
        for (int64_t b = 0; b < kBatch; ++b)
          for (int64_t k = 0; k < area; ++k) mean += x[at(b, c, k)] / n;
        for (int64_t b = 0; b < kBatch; ++b)
          for (int64_t k = 0; k < area; ++k) var += std::pow(x[at(b, c, k)] - mean, 2) / n;
        rm[c] = (1 - kMomentum) * rm[c] + kMomentum * mean;
        rv[c] = (1 - kMomentum) * rv[c] + kMomentum * var * n / (n - 1);
        // The hidden outputs carry the batch's own (biased) statistics.
        const Program& p = **train;
        QVERIFY(std::fabs(p.refs[p.graph.findValue("bn:1")].f32()[c] - mean) < 1e-5);
        QVERIFY(std::fabs(p.refs[p.graph.findValue("bn:2")].f32()[c] - var) < 1e-5);
      }
      for (int64_t c = 0; c < ch; ++c) {
        QVERIFY2(std::fabs(tensor(store, "bn.running_mean")[c] - rm[c]) < 1e-5,
                 qPrintable(QString("step %1 running_mean[%2]: %3, want %4")
                                .arg(step)
                                .arg(c)
                                .arg(tensor(store, "bn.running_mean")[c])
                                .arg(rm[c])));
        QVERIFY2(std::fabs(tensor(store, "bn.running_var")[c] - rv[c]) < 1e-5,
                 qPrintable(QString("step %1 running_var[%2]: %3, want %4")
                                .arg(step)
                                .arg(c)
                                .arg(tensor(store, "bn.running_var")[c])
                                .arg(rv[c])));
      }
    }

    // Evaluation, bound to the same store: normalises with the running statistics
    // (and the learned scale and shift), reports them as its statistics and leaves
    // them unchanged.
    CompileOptions eo = o;
    eo.training = false;
    auto eval = compile(model(bnModel(shape.toStdString())), eo, store);
    QVERIFY2(eval.ok(), eval.ok() ? "" : eval.error().message.c_str());
    std::vector<float>& w = store.find("bn.weight")->data;
    std::vector<float>& b = store.find("bn.bias")->data;
    for (int64_t c = 0; c < ch; ++c) w[c] = 0.5f + 0.25f * float(c), b[c] = 0.1f * float(c) - 0.2f;
    std::vector<float> meanBefore = tensor(store, "bn.running_mean");
    std::vector<float> varBefore = tensor(store, "bn.running_var");
    ctx.training = false;
    for (int run = 0; run < 2; ++run) {
      std::vector<float> x = feed(**eval, rng);
      (*eval)->run(ctx);
      const Program& p = **eval;
      const float* y = p.refs[p.graph.findValue("bn")].f32();
      for (int64_t i = 0; i < int64_t(x.size()); ++i) {
        int64_t c = (i / area) % ch;
        double want = (x[i] - meanBefore[c]) / std::sqrt(varBefore[c] + kEps) * w[c] + b[c];
        QVERIFY2(std::fabs(y[i] - want) < 1e-5,
                 qPrintable(QString("eval y[%1]: %2, want %3").arg(i).arg(y[i]).arg(want)));
      }
      for (int64_t c = 0; c < ch; ++c) {
        QCOMPARE(p.refs[p.graph.findValue("bn:1")].f32()[c], meanBefore[c]);
        QCOMPARE(p.refs[p.graph.findValue("bn:2")].f32()[c], varBefore[c]);
      }
      QVERIFY(tensor(store, "bn.running_mean") == meanBefore);
      QVERIFY(tensor(store, "bn.running_var") == varBefore);
    }
  }

  void badInputsNameNodeAndPort_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("rank 1") << QString::fromStdString(input("x", "") + node("bn", "BatchNorm", "x"))
                            << QStringList{"node 'bn'", "input 'x'", "rank 1"};
    QTest::newRow("num_features") << QString::fromStdString(
                                         input("x", "3, 2, 2") +
                                         node("bn", "BatchNorm", "x", intAttr("num_features", 4)))
                                  << QStringList{"node 'bn'", "'num_features'", "4", "3 channels"};
  }
  void badInputsNameNodeAndPort() {
    QFETCH(QString, body);
    QFETCH(QStringList, mentions);
    expectCompileError(body.toStdString(), mentions);
  }
};

QTEST_APPLESS_MAIN(TestNormModes)
#include "tst_norm_modes.moc"
