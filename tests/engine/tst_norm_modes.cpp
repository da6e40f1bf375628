// BatchNorm's two modes through compiled programs: training updates the running
// statistics as PyTorch does (momentum, unbiased variance), evaluation normalises
// with them and leaves them alone; both kernel lists must agree, and the batch
// statistics and gradients in both layouts are within float32 rounding of float64.
// Bad inputs are refused naming the node and the port or attribute.
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

std::vector<float> tensor(ParamStore& store, const std::string& name) {
  return ParamStore::stored(*store.find(name));
}

// Four input channels through a 3×3 convolution whose only taps are centre ones:
// channel o is input channel o % 4 times 2^((o / 4) % 3), exact in float, so the
// host knows exactly what BatchNorm sees, in the layout the convolution writes
// (oneDNN's blocked convolutions take a few plain input channels). BatchNorm has
// momentum 1; the loss is MSE against a target.
constexpr int64_t kInChannels = 4;

std::string spreadConvBn(int64_t channels, int64_t side) {
  std::string s = std::to_string(side), in = std::to_string(kInChannels);
  std::string out = std::to_string(channels) + ", " + s + ", " + s;
  return input("x", in + ", " + s + ", " + s) + input("t", out, "t") +
         node("c", "Conv2d", "x",
              intAttr("out_channels", channels) +
                  " attrs { key: 'kernel_size' value { ints { values: [3] } } } attrs { key: "
                  "'padding' value { ints { values: [1] } } } attrs { key: 'bias' value { b: "
                  "false } }") +
         node("bn", "BatchNorm", "c", "attrs { key: 'momentum' value { f: 1 } }") +
         node("loss", "MSELoss", "bn,t");
}

double spreadScale(int64_t o) {
  return double(1 << ((o / kInChannels) % 3));
}

double relError(double got, double want) {
  return std::fabs(got - want) / std::max(std::fabs(want), 1e-30);
}

}  // namespace

class TestNormModes : public QObject {
  Q_OBJECT

 private slots:
  // N × C × H × W and N × C.
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
    float* w = store.find("bn.weight")->data();  // the CPU's memory
    float* b = store.find("bn.bias")->data();
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

  // Batch statistics, the running statistics (momentum 1: the batch's, variance
  // unbiased) and the input gradient against float64, in both layouts, at PyTorch's
  // float32 level: means far from zero make float sums drift (oneDNN's blocked
  // kernel was off by 8.5e-5 at 32 channels × batch 128).
  void statisticsMatchFloat64InBothLayouts_data() {
    QTest::addColumn<int>("channels");
    QTest::addColumn<int>("batch");
    QTest::addColumn<bool>("blocked");
    for (bool blocked : {false, true}) {
      const char* layout = blocked ? "nChw16c" : "nchw";
      QTest::addRow("32 channels, batch 128, %s", layout) << 32 << 128 << blocked;
      QTest::addRow("16 channels, batch 16, %s", layout) << 16 << 16 << blocked;
    }
  }
  void statisticsMatchFloat64InBothLayouts() {
    QFETCH(int, channels);
    QFETCH(int, batch);
    QFETCH(bool, blocked);
    const int64_t ch = channels, side = 12, area = side * side, n = batch * area;
    ParamStore store;
    CompileOptions o;
    o.batch = batch;
    o.blockedLayouts = blocked;
    o.updateParams = false;
    o.gradientsOf = {"x"};
    o.keep = {"bn:1", "bn:2"};
    auto prog = compile(model(spreadConvBn(ch, side)), o, store);
    QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
    Program& p = **prog;
    const Graph& g = p.graph;
    bool bnBlocked = g.values[g.findValue("c")].desc.layout == Layout::Blocked16;
    if (blocked && !bnBlocked) QSKIP("oneDNN has no blocked-layout convolution for this CPU");
    QCOMPARE(bnBlocked, blocked);
    std::vector<float> taps(ch * kInChannels * 9, 0.f);
    for (int64_t c = 0; c < ch; ++c)
      taps[(c * kInChannels + c % kInChannels) * 9 + 4] = float(spreadScale(c));
    ParamStore::write(*store.find("c.weight"), taps.data());

    // Means of 3 to 12 over spreads of about 1 to 4: what float sums lose precision on.
    Rng rng(17);
    const TensorRef* x = p.input("x");
    const TensorRef* t = p.input("t");
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < kInChannels; ++i)
        for (int64_t k = 0; k < area; ++k)
          x->f32()[(b * kInChannels + i) * area + k] =
              float(3 + 0.5 * double(i) + rng.uniform(-1, 1) * (1 + 0.1 * double(i)));
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = float(rng.uniform(-1, 1));
    std::vector<float> ts(t->f32(), t->f32() + t->numel());
    std::vector<double> cs(ts.size());  // what BatchNorm reads, exactly
    auto at = [&](int64_t b, int64_t c, int64_t k) { return (b * ch + c) * area + k; };
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t c = 0; c < ch; ++c)
        for (int64_t k = 0; k < area; ++k)
          cs[at(b, c, k)] =
              double(x->f32()[(b * kInChannels + c % kInChannels) * area + k]) * spreadScale(c);
    StepContext ctx;
    ctx.step = 1;
    p.run(ctx);

    double worstMean = 0, worstVar = 0, worstRunning = 0, worstGrad = 0, gradScale = 0;
    std::vector<double> dxWant(x->numel(), 0.0);
    for (int64_t c = 0; c < ch; ++c) {
      double mean = 0, var = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t k = 0; k < area; ++k) mean += cs[at(b, c, k)];
      mean /= double(n);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t k = 0; k < area; ++k) var += std::pow(cs[at(b, c, k)] - mean, 2);
      var /= double(n);
      worstMean = std::max(worstMean, relError(p.refs[g.findValue("bn:1")].f32()[c], mean));
      worstVar = std::max(worstVar, relError(p.refs[g.findValue("bn:2")].f32()[c], var));
      worstRunning = std::max({worstRunning, relError(tensor(store, "bn.running_mean")[c], mean),
                               relError(tensor(store, "bn.running_var")[c], var * n / (n - 1))});
      // y = ĉ (weight 1, bias 0), L = mean((y - t)²): dc = (dy - mean(dy) - ĉ·mean(dy·ĉ))/σ,
      // and dx gathers dc through the centre taps.
      double invstd = 1 / std::sqrt(var + kEps), total = double(ts.size()), sdy = 0, sdyx = 0;
      auto dyAt = [&](int64_t i) { return 2 * ((cs[i] - mean) * invstd - ts[i]) / total; };
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t k = 0; k < area; ++k) {
          int64_t i = at(b, c, k);
          sdy += dyAt(i), sdyx += dyAt(i) * (cs[i] - mean) * invstd;
        }
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t k = 0; k < area; ++k) {
          int64_t i = at(b, c, k);
          double dc =
              invstd * (dyAt(i) - sdy / double(n) - (cs[i] - mean) * invstd * sdyx / double(n));
          dxWant[(b * kInChannels + c % kInChannels) * area + k] += dc * spreadScale(c);
        }
    }
    const float* dx = p.refs[p.gradients.at("x")].f32();
    for (size_t i = 0; i < dxWant.size(); ++i)
      gradScale = std::max(gradScale, std::fabs(dxWant[i]));
    for (size_t i = 0; i < dxWant.size(); ++i)
      worstGrad = std::max(worstGrad, std::fabs(dx[i] - dxWant[i]) / gradScale);
    qInfo(
        "relative errors: mean %.2g, variance %.2g, running statistics %.2g, dx %.2g (of max "
        "|dx|)",
        worstMean, worstVar, worstRunning, worstGrad);
    QVERIFY2(worstMean < 1e-6, qPrintable(QString::number(worstMean)));
    QVERIFY2(worstVar < 1e-6, qPrintable(QString::number(worstVar)));
    QVERIFY2(worstRunning < 1e-6, qPrintable(QString::number(worstRunning)));
    QVERIFY2(worstGrad < 1e-5, qPrintable(QString::number(worstGrad)));
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
