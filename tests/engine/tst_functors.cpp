// The element math both backends run (kernels/core/functors.h) against plain double
// references, NaN and infinity included, and the launch geometry of the CUDA
// backend's own reductions and copies (kernels/cuda/grids.h), which is plain C++:
// what a machine without a GPU can check of the CUDA kernels.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/core/functors.h"
#include "kernels/core/kernel.h"
#include "kernels/core/pool_math.h"
#include "kernels/cuda/grids.h"

using namespace netloom;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Float `got` within float rounding of the double `want` (relative, with an absolute
// floor for values near zero); NaN only matches NaN.
bool near(double got, double want, double tol = 2e-6) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

#define CHECK_NEAR(got, want)                                                \
  QVERIFY2(near((got), (want)), qPrintable(QString("%1 = %2, want %3")       \
                                               .arg(#got)                    \
                                               .arg(double(got), 0, 'g', 10) \
                                               .arg(double(want), 0, 'g', 10)))

// How many floats apart `got` is from the float nearest `want` (a subnormal's spacing
// below the normal range); infinities and NaN must be exactly themselves.
double ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  const float w = float(want);
  if (std::isinf(w)) return got == w ? 0 : 1e9;
  const float a = std::max(std::fabs(w), std::numeric_limits<float>::min());
  return std::fabs(double(got) - want) / double(std::nextafter(a, kInf) - a);
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace

class TestFunctors : public QObject {
  Q_OBJECT

 private slots:
  // fast_math.h's e^x, tanh and erf, on every 97th float of their ranges (both signs)
  // against double precision: within 2 ulp (1.32 measured), NaN passed through, and
  // saturated as libm saturates (e^x to infinity and zero, tanh and erf to ±1).
  void fastMathIsWithinTwoUlp() {
    struct Case {
      const char* name;
      float (*f)(float);
      double (*ref)(double);
      float limit;  // |x| beyond which the result is saturated
    };
    const Case cases[] = {{"exp", fm::exp, [](double x) { return std::exp(x); }, 110.f},
                          {"tanh", fm::tanh, [](double x) { return std::tanh(x); }, 12.f},
                          {"erf", fm::erf, [](double x) { return std::erf(x); }, 6.f}};
    for (const Case& c : cases) {
      double worst = 0;
      float at = 0;
      for (uint32_t bits = 0; bits < 0x7f800000u; bits += 97)
        for (uint32_t sign : {0u, 0x80000000u}) {
          float x;
          const uint32_t b = bits | sign;
          std::memcpy(&x, &b, 4);
          if (std::fabs(x) > c.limit) continue;
          const double e = ulps(c.f(x), c.ref(x));
          if (e > worst) worst = e, at = x;
        }
      QVERIFY2(worst <= 2.0,
               qPrintable(QString("%1: %2 ulp at %3").arg(c.name).arg(worst).arg(at)));
      QVERIFY(std::isnan(c.f(kNan)));
    }
    QCOMPARE(fm::exp(kInf), kInf);
    QCOMPARE(fm::exp(-kInf), 0.f);
    QCOMPARE(fm::exp(89.f), kInf);
    QCOMPARE(fm::exp(0.f), 1.f);
    QVERIFY(fm::exp(-100.f) > 0.f);  // subnormal, as expf gives
    for (auto f : {fm::tanh, fm::erf}) {
      QCOMPARE(f(kInf), 1.f);
      QCOMPARE(f(-kInf), -1.f);
      QCOMPARE(f(0.f), 0.f);
    }
    CHECK_NEAR(fn::Gelu{}(-1.5f), -1.5 * 0.5 * std::erfc(1.5 / std::sqrt(2.0)));
    CHECK_NEAR(fn::Sigmoid{}(-3.f), sigmoid(-3.0));
  }

  // The histogram the CPU kernel and the weights' report use (and whose bin() the
  // GPU kernel calls): equal bins over the finite range, ends included, non-finite
  // values left out, one value in the first bin, nothing finite all zeros.
  void histogramBinsTheFiniteRange() {
    const int k = fn::Histogram::kBins;
    std::vector<float> x;
    for (int i = 0; i <= 3 * k; ++i) x.push_back(-1.f + 2.f * float(i) / float(3 * k));
    x.push_back(NAN);
    x.push_back(INFINITY);
    float h[fn::Histogram::kSize];
    fn::histogramOf(x.data(), int64_t(x.size()), h);
    QCOMPARE(h[0], -1.f);
    QCOMPARE(h[1], 1.f);
    double total = 0;
    for (int b = 0; b < k; ++b) {
      total += h[2 + b];
      // 3 a bin, give or take a value on a boundary that rounds into its neighbour.
      QVERIFY2(h[2 + b] >= 2.f && h[2 + b] <= 5.f, qPrintable(QString::number(h[2 + b])));
    }
    QCOMPARE(total, double(3 * k + 1));  // the maximum sits in the last bin
    QCOMPARE(fn::Histogram::bin(1.f, -1.f, 1.f), k - 1);
    QCOMPARE(fn::Histogram::bin(-1.f, -1.f, 1.f), 0);
    float same[] = {2.f, 2.f, 2.f};
    fn::histogramOf(same, 3, h);
    QCOMPARE(h[0], 2.f);
    QCOMPARE(h[1], 2.f);
    QCOMPARE(h[2], 3.f);
    float none[] = {NAN, -INFINITY};
    fn::histogramOf(none, 2, h);
    for (float v : h) QCOMPARE(v, 0.f);
  }

  // std::max's rule: a NaN first argument is kept, a NaN second one dropped.
  // The GPU's pooling backward gathers, per input element, the gradients of the
  // windows covering it; the CPU's scatters each window's gradient over it. Over
  // ceil_mode windows cut short, overlapping windows, padding and ties, the two give
  // the same bits.
  void poolGatherMatchesTheScatter() {
    struct Config {
      int64_t ih, iw, k, s, pad;
      bool ceil;
    };
    for (Config cfg :
         {Config{5, 5, 2, 2, 0, true}, Config{7, 6, 3, 2, 1, true}, Config{6, 6, 3, 1, 1, false},
          Config{4, 9, 3, 3, 0, true}, Config{8, 8, 2, 2, 0, false}, Config{5, 7, 4, 3, 2, true}}) {
      Window2d w;
      w.n = 1, w.c = 1, w.ih = cfg.ih, w.iw = cfg.iw, w.kh = w.kw = cfg.k, w.sh = w.sw = cfg.s;
      w.padTop = w.padLeft = cfg.pad;
      auto outSize = [&](int64_t in) {
        int64_t span = in + 2 * cfg.pad - cfg.k;
        int64_t o = (cfg.ceil ? (span + cfg.s - 1) / cfg.s : span / cfg.s) + 1;
        if (cfg.ceil && (o - 1) * cfg.s >= in + cfg.pad) --o;  // PyTorch: start inside
        return o;
      };
      w.oh = outSize(cfg.ih), w.ow = outSize(cfg.iw);
      std::vector<float> x(size_t(w.ih * w.iw)), dy(size_t(w.oh * w.ow));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7) % 5);  // ties
      for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.1f * float(i + 1) + 1.f / 3;
      for (bool average : {false, true})
        for (bool includePad : {false, true}) {
          std::vector<float> scatter(x.size(), 0.f);
          for (int64_t oy = 0; oy < w.oh; ++oy)
            for (int64_t ox = 0; ox < w.ow; ++ox) {
              pool::Span r = pool::span(oy, w.sh, w.kh, w.padTop, w.ih);
              pool::Span c = pool::span(ox, w.sw, w.kw, w.padLeft, w.iw);
              float g = dy[size_t(oy * w.ow + ox)];
              if (!average) {
                scatter[size_t(pool::argmax(x.data(), w.iw, r, c))] += g;
                continue;
              }
              float share = g / pool::divisor(r, c, includePad);
              for (int64_t y = r.lo; y < r.hi; ++y)
                for (int64_t xx = c.lo; xx < c.hi; ++xx) scatter[size_t(y * w.iw + xx)] += share;
            }
          for (int64_t iy = 0; iy < w.ih; ++iy)
            for (int64_t ix = 0; ix < w.iw; ++ix) {
              float gathered =
                  pool::gradientAt(dy.data(), x.data(), w, iy, ix, average, includePad);
              QCOMPARE(gathered, scatter[size_t(iy * w.iw + ix)]);
            }
        }
    }
  }

  void maxOfKeepsStdMaxNanRule() {
    QVERIFY(std::isnan(fn::maxOf(kNan, 1.f)));
    QCOMPARE(fn::maxOf(1.f, kNan), 1.f);
    QCOMPARE(fn::maxOf(-100.0, double(-kInf)), -100.0);
    QVERIFY(fn::isNan(kNan));
    QVERIFY(!fn::isNan(kInf));
  }

  void sgdMatchesPyTorchRule() {
    struct Case {
      float p, g, buf, lr, mu, wd;
      bool nesterov;
    };
    const Case cases[] = {{0.5f, 0.25f, 0.f, 0.1f, 0.f, 0.f, false},
                          {-1.25f, 0.75f, 0.3f, 0.05f, 0.9f, 5e-4f, false},
                          {2.f, -0.125f, -0.4f, 0.01f, 0.9f, 1e-2f, true}};
    for (const Case& c : cases) {
      fn::SgdStep step{c.lr, c.mu, c.wd, c.nesterov};
      float p = c.p, buf = c.buf;
      step(p, c.g, buf);
      double d = double(c.g) + double(c.wd) * c.p;
      double b = double(c.mu) * c.buf + d;
      double want = c.p - double(c.lr) * (c.nesterov ? d + double(c.mu) * b : b);
      CHECK_NEAR(buf, b);
      CHECK_NEAR(p, want);
      float plain = c.p;
      step(plain, c.g);
      CHECK_NEAR(plain, c.p - double(c.lr) * d);
    }
    // A non-finite gradient reaches the weight (the step's check then stops the run).
    fn::SgdStep step{0.1f, 0.9f, 0.f, false};
    float p = 1.f, buf = 0.f;
    step(p, kInf, buf);
    QCOMPARE(p, -kInf);
    p = 1.f, buf = 0.f;
    step(p, kNan, buf);
    QVERIFY(std::isnan(p) && std::isnan(buf));
  }

  void adamMatchesPyTorchRule_data() {
    QTest::addColumn<bool>("decoupled");
    QTest::addColumn<float>("weightDecay");
    QTest::newRow("adam") << false << 0.f;
    QTest::newRow("adam+l2") << false << 1e-2f;
    QTest::newRow("adamw") << true << 1e-2f;
  }
  void adamMatchesPyTorchRule() {
    QFETCH(bool, decoupled);
    QFETCH(float, weightDecay);
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const double lr = 1e-3;
    float p = 0.75f, m = 0.f, v = 0.f;
    double pd = p, md = 0, vd = 0;
    const float grads[] = {0.5f, -0.25f, 1e-3f, 3.f};
    for (int t = 1; t <= 4; ++t) {
      float g = grads[t - 1];
      fn::AdamStep step = fn::AdamStep::make(b1, b2, eps, weightDecay, decoupled, lr, t);
      step(p, g, m, v);
      // torch.optim.Adam / AdamW, in double.
      double gd = g + (decoupled ? 0.0 : double(weightDecay) * pd);
      if (decoupled) pd *= 1.0 - lr * weightDecay;
      md = double(b1) * md + (1.0 - double(b1)) * gd;
      vd = double(b2) * vd + (1.0 - double(b2)) * gd * gd;
      double mhat = md / (1.0 - std::pow(double(b1), t));
      double vhat = vd / (1.0 - std::pow(double(b2), t));
      pd -= lr * mhat / (std::sqrt(vhat) + double(eps));
      CHECK_NEAR(m, md);
      CHECK_NEAR(v, vd);
      CHECK_NEAR(p, pd);
    }
  }

  void adamStepConstants() {
    fn::AdamStep s = fn::AdamStep::make(0.9f, 0.999f, 1e-8f, 0.1f, true, 0.01, 2);
    QCOMPARE(s.l2, 0.f);
    QCOMPARE(s.keep, 1.f - 0.01f * 0.1f);
    CHECK_NEAR(s.stepSize, 0.01 / (1.0 - 0.81));
    CHECK_NEAR(s.bc2Sqrt, std::sqrt(1.0 - std::pow(0.999, 2)));
    fn::AdamStep a = fn::AdamStep::make(0.9f, 0.999f, 1e-8f, 0.1f, false, 0.01, 2);
    QCOMPARE(a.l2, 0.1f);
    QCOMPARE(a.keep, 1.f);
    // A NaN gradient poisons both moments and the weight.
    float p = 1.f, m = 0.f, v = 0.f;
    a(p, kNan, m, v);
    QVERIFY(std::isnan(p) && std::isnan(m) && std::isnan(v));
  }

  void mse() {
    const float ps[] = {0.5f, -2.f, 1e-3f, 3.f}, ts[] = {0.25f, 1.f, 0.f, 3.f};
    for (int i = 0; i < 4; ++i) {
      double d = double(ps[i] - ts[i]);
      CHECK_NEAR(fn::SquaredError{}(ps[i], ts[i]), d * d);
      CHECK_NEAR(fn::MseGrad{0.5f}(ps[i], ts[i]), 0.5 * d);
    }
    QVERIFY(std::isnan(fn::SquaredError{}(kNan, 1.f)));
    QCOMPARE(fn::SquaredError{}(kInf, 1.f), std::numeric_limits<double>::infinity());
    QCOMPARE(fn::MseGrad{1.f}(kInf, 0.f), kInf);
  }

  void bceOnLogitsIsStable() {
    const float xs[] = {-100.f, -3.f, -0.5f, 0.f, 0.75f, 4.f, 100.f}, ts[] = {0.f, 1.f, 0.25f};
    for (float x : xs)
      for (float t : ts) {
        // -(t·log σ(x) + (1 - t)·log(1 - σ(x))), by log σ(x) = -log(1 + e^-x).
        double want =
            t * std::log1p(std::exp(-double(x))) + (1 - t) * std::log1p(std::exp(double(x)));
        CHECK_NEAR(fn::BceTerm{true}(x, t), want);
        CHECK_NEAR((fn::BceGrad{2.f, true, false}(x, t)), 2.0 * (sigmoid(x) - t));
        CHECK_NEAR((fn::BceGrad{2.f, true, true}(x, t)), -2.0 * x);
      }
    QVERIFY(std::isnan(fn::BceTerm{true}(kNan, 1.f)));
    QVERIFY(std::isnan(fn::BceGrad{1.f, true, false}(kNan, 1.f)));
  }

  void bceOnProbabilitiesClampsLikePyTorch() {
    const float ps[] = {0.01f, 0.25f, 0.5f, 0.9f}, ts[] = {0.f, 1.f, 0.5f};
    for (float p : ps)
      for (float t : ts) {
        double want = -(t * std::log(double(p)) + (1 - t) * std::log1p(-double(p)));
        CHECK_NEAR(fn::BceTerm{false}(p, t), want);
        CHECK_NEAR((fn::BceGrad{1.f, false, false}(p, t)), (p - t) / (double(p) * (1 - p)));
        CHECK_NEAR((fn::BceGrad{1.f, false, true}(p, t)),
                   std::log1p(-double(p)) - std::log(double(p)));
      }
    // Saturated probabilities: each log is clamped at -100, the denominator at 1e-12.
    QCOMPARE(fn::BceTerm{false}(0.f, 1.f), 100.0);
    QCOMPARE(fn::BceTerm{false}(1.f, 0.f), 100.0);
    QCOMPARE(fn::BceTerm{false}(0.f, 0.f), 0.0);
    CHECK_NEAR((fn::BceGrad{1.f, false, false}(1.f, 0.f)), 1e12);
    QCOMPARE((fn::BceGrad{1.f, false, true}(0.f, 0.f)), 100.f);
    // NaN stays NaN through the clamps (maxOf keeps it, as std::max does).
    QVERIFY(std::isnan(fn::BceTerm{false}(kNan, 1.f)));
    QVERIFY(std::isnan(fn::BceGrad{1.f, false, false}(kNan, 1.f)));
    QVERIFY(std::isnan(fn::BceGrad{1.f, false, true}(kNan, 1.f)));
  }

  // One row through the CPU kernel's steps (float softmax, then the functor) against
  // the double gradient softmax - ((1 - ε)·onehot + ε/C), scaled.
  void crossEntropyGradient() {
    const std::vector<float> x = {0.5f, -1.f, 2.f, 0.f, 1.25f};
    const int64_t c = int64_t(x.size());
    for (float eps : {0.f, 0.1f})
      for (int label : {0, 2, 4, 7}) {  // 7: outside the classes, no target mass
        float scale = 0.25f;
        fn::XentGrad grad = fn::XentGrad::make(eps, c, scale);
        float m = *std::max_element(x.begin(), x.end()), sum = 0.f;
        std::vector<float> e(x.size());
        for (size_t j = 0; j < x.size(); ++j) sum += (e[j] = std::exp(x[j] - m));
        double sd = 0;
        for (float v : x) sd += std::exp(double(v));
        for (int64_t j = 0; j < c; ++j) {
          double target = eps / double(c) + (j == label ? 1.0 - eps : 0.0);
          double want = (std::exp(double(x[size_t(j)])) / sd - target) * scale;
          CHECK_NEAR(grad(e[size_t(j)], 1.f / sum, j == label), want);
        }
      }
    // The label's extra mass is rounded as (1 - ε + ε/C) - ε/C was.
    float eps = 0.3f, off = eps / 7.f, on = 1.f - eps + off;
    QCOMPARE(fn::XentGrad::make(eps, 7, 1.f).hit, on - off);
    QVERIFY(std::isnan(fn::XentGrad::make(0.f, 3, 1.f)(1.f, kNan, true)));
  }

  // argmax's tie rule and PyTorch's NaN ranking, as the top-k count sees them.
  void ranksAbove() {
    fn::RanksAbove label{1.f, 2};
    QVERIFY(label(2.f, 5));    // higher
    QVERIFY(!label(0.5f, 0));  // lower
    QVERIFY(label(1.f, 1));    // tie at a lower index
    QVERIFY(!label(1.f, 3));   // tie at a higher index
    QVERIFY(!label(1.f, 2));   // itself
    QVERIFY(label(kNan, 4));   // NaN above every number
    QVERIFY(!label(-kInf, 0));
    QVERIFY(label(kInf, 4));
    fn::RanksAbove nanLabel{kNan, 2};
    QVERIFY(!nanLabel(kInf, 0));  // a NaN label ranks above every number...
    QVERIFY(nanLabel(kNan, 1));   // ...and below a NaN at a lower index
    QVERIFY(!nanLabel(kNan, 3));
  }

  void layerNorm() {
    const float xs[] = {-2.f, 0.f, 0.5f, 3.f};
    fn::LayerNormApply norm{0.25f, 2.f};
    fn::LayerNormGradApply grad{0.25f, 2.f, 0.1f, -0.3f};
    for (float x : xs) {
      double xhat = (double(x) - 0.25) * 2.0;
      CHECK_NEAR(norm(x), xhat);
      CHECK_NEAR(norm(x, 1.5f, -0.5f), xhat * 1.5 - 0.5);
      CHECK_NEAR(grad(0.7f, x, 1.5f), 2.0 * (0.7 * 1.5 - 0.1 - xhat * -0.3));
    }
    QVERIFY(std::isnan(norm(kNan)));
    QVERIFY(std::isinf(norm(kInf, 1.f, 0.f)));
  }

  // Every row in exactly one chunk, no chunk empty, and scratch only with chunks.
  void columnSumPlans_data() {
    QTest::addColumn<qint64>("rows");
    QTest::addColumn<qint64>("cols");
    QTest::newRow("bias of a small layer") << qint64(128) << qint64(10);
    QTest::newRow("one row") << qint64(1) << qint64(4096);
    QTest::newRow("no rows") << qint64(0) << qint64(8);
    QTest::newRow("tall") << qint64(100003) << qint64(3);
    QTest::newRow("wide") << qint64(4096) << qint64(1 << 20);
    QTest::newRow("very tall") << qint64(1LL << 33) << qint64(1);
  }
  void columnSumPlans() {
    QFETCH(qint64, rows);
    QFETCH(qint64, cols);
    cuda::ColumnSums p = cuda::columnSums(rows, cols);
    QCOMPARE(p.tiles * cuda::kColumnTile >= cols, true);
    QVERIFY((p.tiles - 1) * cuda::kColumnTile < std::max<int64_t>(cols, 1));
    QVERIFY(p.chunks >= 1 && p.chunks <= 65535);
    QVERIFY(p.chunks * p.rowsPerChunk >= rows);
    if (rows > 0) QVERIFY((p.chunks - 1) * p.rowsPerChunk < rows);  // the last chunk has rows
    QCOMPARE(p.partialBytes(), p.chunks > 1 ? p.chunks * cols * 8 : 0);
  }

  void rowTeamsAndChunks() {
    QCOMPARE(cuda::rowThreads(10), 32);
    QCOMPARE(cuda::rowThreads(cuda::kLongRow), cuda::kBlock);
    QCOMPARE(cuda::rowGrid(0, 32), 1u);
    QCOMPARE(cuda::rowGrid(9, 32), 2u);  // 8 warps a block
    QCOMPARE(cuda::rowGrid(9, cuda::kBlock), 9u);
    QCOMPARE(cuda::squaresChunks(0), int64_t(0));
    QCOMPARE(cuda::squaresChunks(4097), int64_t(2));
  }

  void copyUnits() {
    QCOMPARE(cuda::copyUnit({256, 64, 48}), 16);
    QCOMPARE(cuda::copyUnit({256, 64, 40}), 8);
    QCOMPARE(cuda::copyUnit({256, 12}), 4);
    QCOMPARE(cuda::copyUnit({256, 6}), 2);
    QCOMPARE(cuda::copyUnit({257, 64}), 1);
    QCOMPARE(cuda::copyUnit({0}), 16);
  }

  // The CUDA list of each op with a kernel of the backend's own takes a plain float
  // signature, and asks for the scratch its reductions need. Only the registry is
  // read: this needs no GPU.
  void cudaKernelsRegistered() {
#ifndef NETLOOM_WITH_CUDA
    QSKIP("built without CUDA");
#else
    struct Case {
      const char* op;
      std::vector<Shape> in;
      int64_t workspace;  // bytes
    };
    const Shape x = {4, 3, 5, 7}, logits = {128, 10};
    const Case cases[] = {
        // Each row's loss and whether its label counted; the gradient, that count.
        {"SoftmaxCrossEntropy", {logits, {128}}, 2 * 128 * 8},
        {"SoftmaxCrossEntropyGrad", {{}, logits, {128}}, 8},
        {"SoftmaxCrossEntropy", {{4, 32, 10}, {4, 32}}, 2 * 128 * 8},
        {"MSELoss", {x, x}, 4 * 8},
        {"MSELossGrad", {{}, x, x}, 0},
        {"BCELoss", {x, x}, 4 * 8},
        {"BCELossGrad", {{}, x, x}, 0},
        {"Accuracy", {logits, {128}}, 128 * 8},
        {"TopKAccuracy", {logits, {128}}, 128 * 8},
        {"ReduceRows", {{100000, 3}}, cuda::columnSums(100000, 3).partialBytes()},
        {"ReduceChannels", {x}, 4 * 3 * 8},
        {"ReduceChannels", {{4, 3}}, 0},
        {"SumSquares", {{10000}}, 3 * 8},
        {"SumSquares", {{0}}, 8},
        {"Concat", {x, x}, 0},
        {"Slice", {x}, 0},
        {"Upsample", {x}, 0},
        {"UpsampleGrad", {{4, 3, 10, 14}, x}, 0},
        {"GlobalAvgPool2d", {x}, 0},
        {"GlobalAvgPool2dGrad", {{4, 3}, x}, 0},
        {"LayerNorm", {x}, 0},
        // x as 60 rows of 7: each row's invstd (240 bytes, a multiple of 16), and one
        // chunk of column sums, so no partial table.
        {"LayerNormGrad", {x, x, {60}, {60}}, 240},
        {"SgdUpdate", {x, x, x}, 0},
        {"AdamUpdate", {x, x, x, x}, 0},
        {"RMSNorm", {x}, 0},
        {"RMSNormGrad", {x, x, {60}}, cuda::columnSums(60, 7).partialBytes()},
        {"Transpose", {x}, 0},
        {"SumTo", {x}, 0},
        {"PositionEmbedding", {{4, 3, 5}}, 0},
        {"RotaryEmbedding", {x}, 0},
        {"BatchMatMul", {x, {4, 3, 7, 2}}, 0},
        {"ScaledDotProductAttention", {x, x, x}, 0},
        // Each query row's dy·y: 4 × 3 × 5 floats.
        {"ScaledDotProductAttentionGrad", {x, x, x, x, x, {4, 3, 5}}, 4 * 3 * 5 * 4},
    };
    Attrs attrs;
    for (const Case& c : cases) {
      const auto* list = KernelRegistry::instance().list(c.op, DeviceKind::Cuda);
      QVERIFY2(list && !list->empty(), c.op);
      KernelSig sig{&attrs, {}, {}, nullptr};
      for (const Shape& s : c.in) sig.in.push_back(TensorDesc{s, DType::F32, {DeviceKind::Cuda}});
      const KernelImpl* last = nullptr;  // the last of its own (the widened twins follow)
      for (const KernelImpl& k : *list)
        if (!k.widened) last = &k;
      QVERIFY2(last, c.op);
      const KernelImpl& k = *last;
      QVERIFY2(k.decline(sig).empty(), c.op);
      int64_t bytes = k.workspace ? k.workspace(sig) : 0;
      QVERIFY2(bytes == c.workspace,
               qPrintable(
                   QString("%1 asks for %2 bytes, want %3").arg(c.op).arg(bytes).arg(c.workspace)));
    }
#endif
  }
};

QTEST_APPLESS_MAIN(TestFunctors)
#include "tst_functors.moc"
