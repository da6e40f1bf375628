// Mixed precision (train.precision): the rounding to bfloat16 and IEEE half against
// exact references, autocast's place around the matrix ops and its numbers forward
// and backward, fp16's loss scaling keeping gradients that fp16 alone loses, skipping
// overflowed steps and growing back, and whole runs in each precision.
#include <QtTest>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>

#include "engine/io/project_file.h"
#include "engine/train/checkpoint.h"
#include "engine/train/trainer.h"
#include "kernels/core/functors.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

// x rounded to a float format with `mantissa` stored bits, smallest normal exponent
// `minExp` and largest finite value `max`, ties to even, worked in double.
double reference(double x, int mantissa, int minExp, double max) {
  if (std::isnan(x) || x == 0) return x;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = f·2^e, f in [0.5, 1)
  int exp = std::max(e - 1, minExp);
  double quantum = std::ldexp(1.0, exp - mantissa);
  double q = std::fabs(x) / quantum;
  double r = std::floor(q);
  if (q - r > 0.5 || (q - r == 0.5 && std::fmod(r, 2.0) == 1.0)) r += 1;
  double y = r * quantum;
  if (y > max) y = INFINITY;
  return std::copysign(y, x);
}
double bf16(double x) {
  return reference(x, 7, -126, 3.3895313892515355e38);
}
double fp16(double x) {
  return reference(x, 10, -14, 65504.0);
}

// x[4] -> Linear(3) "fc" -> MSELoss against t[3].
std::string linearMse() {
  return input("x", "4") + input("t", "3", "t") +
         node("fc", "Linear", "x", intAttr("out_features", 3)) + node("loss", "MSELoss", "fc,t");
}

constexpr int kBatch = 8;

struct Case {
  std::vector<float> x, t, w, b;
};

Case randomCase(uint64_t seed) {
  Rng rng(seed);
  Case c;
  auto fill = [&](std::vector<float>& v, size_t n, double lo, double hi) {
    v.resize(n);
    for (float& f : v) f = float(rng.uniform(lo, hi));
  };
  fill(c.x, kBatch * 4, -2, 2);
  fill(c.t, kBatch * 3, -1, 1);
  fill(c.w, 12, -1, 1);
  fill(c.b, 3, -1, 1);
  return c;
}

// The batch, fed before each step (the arena reuses its memory within the step).
void feed(const Program& p, const Case& c) {
  std::memcpy(p.input("x")->data, c.x.data(), c.x.size() * sizeof(float));
  std::memcpy(p.input("t")->data, c.t.data(), c.t.size() * sizeof(float));
}

void setUp(ParamStore& store, const Program& p, const Case& c) {
  ParamStore::write(*store.find("fc.weight"), c.w.data());
  ParamStore::write(*store.find("fc.bias"), c.b.data());
  feed(p, c);
}

// Forward and backward of linearMse() in double, with `round` applied where autocast
// rounds: the inputs, weights and output of fc, and the gradients flowing back
// through them. Returns the loss; dw gets the weight's gradient.
template <class Round>
double referenceStep(const Case& c, Round round, std::vector<double>& dw) {
  const int n = kBatch * 3;
  std::vector<double> y(n);
  double loss = 0;
  for (int s = 0; s < kBatch; ++s)
    for (int j = 0; j < 3; ++j) {
      double acc = round(c.b[j]);
      for (int i = 0; i < 4; ++i) acc += round(c.x[s * 4 + i]) * round(c.w[j * 4 + i]);
      y[s * 3 + j] = round(float(acc));  // the product accumulates in float
      double d = y[s * 3 + j] - c.t[s * 3 + j];
      loss += d * d;
    }
  dw.assign(12, 0);
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 4; ++i) {
      double acc = 0;
      for (int s = 0; s < kBatch; ++s)
        acc += round(float(2 * (y[s * 3 + j] - c.t[s * 3 + j]) / n)) * round(c.x[s * 4 + i]);
      dw[j * 4 + i] = round(float(acc));
    }
  return loss / n;
}

struct Outcome {
  Result<TrainSummary> result = makeError("not run");
  std::vector<double> losses;
};

Outcome train(proto::Project p, const std::string& precision) {
  Outcome o;
  TrainOptions opts;
  opts.precision = precision;
  o.result = runTraining(p, opts, [&](const proto::TrainEvent& e) {
    if (e.has_step()) o.losses.push_back(e.step().loss());
  });
  return o;
}

// An MLP on the spirals, in float: the whole runs' project.
Result<proto::Project> spiralsMlp() {
  return parseProject(R"(
      model {
        nodes { name: "point" op: "Input" attrs { key: "shape" value { ints { values: [2] } } } }
        nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } }
                attrs { key: "dtype" value { s: "int32" } } }
        nodes { name: "fc1" op: "Linear" inputs: "point"
                attrs { key: "out_features" value { i: 64 } } }
        nodes { name: "act1" op: "ReLU" inputs: "fc1" }
        nodes { name: "fc2" op: "Linear" inputs: "act1"
                attrs { key: "out_features" value { i: 3 } } }
        nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["fc2", "label"] }
        nodes { name: "accuracy" op: "Accuracy" inputs: ["fc2", "label"] }
      }
      data { synthetic { kind: SPIRALS classes: 3 train_samples: 768 test_samples: 192 } }
      train { loss: "loss" optimizer { kind: ADAM lr: 0.01 } batch_size: 32 epochs: 4 seed: 3 }
    )",
                      "spirals");
}

}  // namespace

class TestPrecision : public QObject {
  Q_OBJECT

 private slots:
  void roundingMatchesTheFormats() {
    const fn::RoundBf16 toBf16;
    const fn::RoundFp16 toFp16;
    // Ties go to even; past the range is infinity; half's subnormals step by 2^-24.
    QCOMPARE(toBf16(1.f + 0x1p-8f), 1.f);
    QCOMPARE(toBf16(1.f + 3 * 0x1p-8f), 1.f + 0x1p-6f);
    QCOMPARE(toBf16(FLT_MAX), INFINITY);
    QCOMPARE(toBf16(-FLT_MAX), -INFINITY);
    QCOMPARE(toFp16(1.f + 0x1p-11f), 1.f);
    QCOMPARE(toFp16(1.f + 3 * 0x1p-11f), 1.f + 0x1p-9f);
    QCOMPARE(toFp16(65519.f), 65504.f);
    QCOMPARE(toFp16(65520.f), INFINITY);
    QCOMPARE(toFp16(-1e6f), -INFINITY);
    QCOMPARE(toFp16(0x1p-24f), 0x1p-24f);
    QCOMPARE(toFp16(0x1p-25f), 0.f);  // a tie with zero, which is even
    QCOMPARE(toFp16(0x1.8p-25f), 0x1p-24f);
    QCOMPARE(toFp16(3 * 0x1p-25f), 2 * 0x1p-24f);  // 1.5 quanta: to the even 2
    QVERIFY(std::signbit(toFp16(-1e-9f)));
    QVERIFY(std::isnan(toBf16(NAN)) && std::isnan(toFp16(NAN)));
    // A NaN whose payload is all in the low half stays a NaN in bf16 storage.
    const uint32_t lowNaN = 0x7f800001u;
    float nanLow;
    std::memcpy(&nanLow, &lowNaN, sizeof nanLow);
    QVERIFY(std::isnan(fn::FromBf16{}(fn::ToBf16{}(nanLow))));
    // Against the double-precision reference over floats of every magnitude.
    Rng rng(11);
    for (int k = 0; k < 200000; ++k) {
      uint32_t bits = uint32_t(rng.next());
      float x;
      std::memcpy(&x, &bits, sizeof x);
      // bf16 storage holds exactly what the rounding gives; a NaN stays a NaN.
      const float stored = fn::FromBf16{}(fn::ToBf16{}(x));
      if (std::isnan(x) != std::isnan(stored) || (!std::isnan(x) && stored != toBf16(x)))
        QFAIL(qPrintable(QString("bf16 storage of %1 reads %2")
                             .arg(double(x), 0, 'g', 9)
                             .arg(double(stored), 0, 'g', 9)));
      if (std::isnan(x)) continue;
      if (float(bf16(x)) != toBf16(x) || float(fp16(x)) != toFp16(x))
        QFAIL(qPrintable(QString("%1: bf16 %2 (expected %3), fp16 %4 (expected %5)")
                             .arg(double(x), 0, 'g', 9)
                             .arg(double(toBf16(x)), 0, 'g', 9)
                             .arg(bf16(x), 0, 'g', 9)
                             .arg(double(toFp16(x)), 0, 'g', 9)
                             .arg(fp16(x), 0, 'g', 9)));
    }
#ifdef __FLT16_MAX__
    // And against the compiler's own conversion to _Float16.
    for (int k = 0; k < 200000; ++k) {
      uint32_t bits = uint32_t(rng.next());
      float x;
      std::memcpy(&x, &bits, sizeof x);
      if (!std::isnan(x) && float(_Float16(x)) != toFp16(x))
        QFAIL(qPrintable(QString("fp16 of %1").arg(double(x), 0, 'g', 9)));
    }
#endif
  }

  void autocastRoundsAroundTheMatrixOps() {
    auto body =
        input("x", "1,8,8") + labels() +
        node("conv", "Conv2d", "x",
             intAttr("out_channels", 4) + intAttr("kernel_size", 3) + intAttr("padding", 1)) +
        node("act", "ReLU", "conv") + node("flat", "Flatten", "act") +
        node("fc1", "Linear", "flat", intAttr("out_features", 16)) +
        node("fc2", "Linear", "fc1", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc2,label");
    for (Precision p : {Precision::F32, Precision::BF16, Precision::F16}) {
      ParamStore store;
      CompileOptions o;
      o.precision = p;
      o.disabledPasses = {"chains"};  // each rounding a node of its own, to count
      auto prog = compile(model(body), o, store);
      QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
      const Graph& g = (*prog)->graph;
      int rounds = 0;
      for (const Node& n : g.nodes) {
        if (n.op->name == "RoundHalf") {
          rounds += 1;
          QCOMPARE(QString::fromStdString(n.attrs.s("format")),
                   QString(p == Precision::F16 ? "fp16" : "bf16"));
        }
        // A rounding to bf16 made a cast into bf16 storage (a cast beside a value,
        // "…/bf16", adds none).
        const std::string& name = n.name;
        rounds += n.op->name == "CastBf16" && name.substr(name.size() - 5) != "/bf16";
        // Every float a matrix op reads holds 16-bit values: a rounding's, or a tensor
        // stored in bf16 ("bf16 storage" moves a rounding into its input's producer).
        bool matrix = n.op->name == "Linear" || n.op->name == "Conv2d";
        for (ValueId v : n.inputs) {
          const DType t = g.values[v].desc.dtype;
          if (!matrix || p == Precision::F32 || t != DType::F32) continue;
          NodeId from = g.values[v].producer;
          QVERIFY2(from >= 0 && g.nodes[from].op->name == "RoundHalf", g.values[v].name.c_str());
        }
      }
      if (p == Precision::F32) {
        QCOMPARE(rounds, 0);
        QCOMPARE((*prog)->lossScale, kNoValue);
        continue;
      }
      // Forward: the three ops' weights and biases, their outputs, the image, and the
      // outputs of the ReLU and the Flatten, which compute in their input's precision
      // (so fc1's input comes rounded, as fc2's does); backward: the same but the
      // image's, which has no gradient. Under bf16 the storage pass turns roundings
      // into 16-bit tensors, as many as the device's kernels take.
      QCOMPARE((*prog)->autocast.size(), size_t(3));
      if (p == Precision::F16) QCOMPARE(rounds, (6 + 3 + 3) + (6 + 3 + 2));
      QVERIFY(rounds > 0);
      QCOMPARE((*prog)->lossScale != kNoValue, p == Precision::F16);
      std::string text = (*prog)->explain();
      QVERIFY2(text.find(std::string("precision: ") + precisionName(p) +
                         " autocast on 3 matrix ops") != std::string::npos,
               text.c_str());
      QCOMPARE(text.find("loss scaling") != std::string::npos, p == Precision::F16);
    }
  }

  // A value three matrix ops read (a Transformer's q, k and v of one LayerNorm) is
  // rounded once for all three: one rounding kept for their weights' gradients, not
  // three (the GPT's fp16 plan went from 1.13x float's arena to 1.02x); each gradient
  // is still rounded apart, and --explain says how many roundings were shared.
  void aValueIsRoundedOnceForAllItsProducts() {
    auto body = input("x", "16") + labels() + node("ln", "LayerNorm", "x") +
                node("q", "Linear", "ln", intAttr("out_features", 16)) +
                node("k", "Linear", "ln", intAttr("out_features", 16)) +
                node("v", "Linear", "ln", intAttr("out_features", 16)) + node("qk", "Add", "q,k") +
                node("qkv", "Add", "qk,v") +
                node("fc", "Linear", "qkv", intAttr("out_features", 3)) +
                node("loss", "SoftmaxCrossEntropy", "fc,label");
    std::map<Precision, int64_t> arena;
    for (Precision p : {Precision::F32, Precision::BF16, Precision::F16}) {
      ParamStore store;
      CompileOptions o;
      o.batch = 64;
      o.precision = p;
      o.disabledPasses = {"chains"};  // each rounding a node of its own, to count
      auto prog = compile(model(body), o, store);
      QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
      const Graph& g = (*prog)->graph;
      arena[p] = (*prog)->arenaBytes;
      const ValueId ln = g.findValue("ln");
      QVERIFY(ln != kNoValue);
      int roundings = 0, gradients = 0;
      for (const Node& n : g.nodes) {
        const bool rounds = n.op->name == "RoundHalf" || n.op->name == "CastBf16";
        if (rounds && n.inputs[0] == ln) roundings += 1;
        // The gradients reaching ln through the three products, each rounded.
        if (n.op->name == "RoundHalf" && n.name.find("/autocast/in0/grad/") != std::string::npos)
          gradients += n.name.rfind("q/", 0) == 0 || n.name.rfind("k/", 0) == 0 ||
                       n.name.rfind("v/", 0) == 0;
      }
      for (const Node& n : g.nodes)
        if (n.op->name == "RoundHalf") qInfo("%s", n.name.c_str());
      // Under bf16 the rounding may have become the LayerNorm's own bf16 output, and the
      // gradients' roundings casts into bf16 storage: counted under fp16, which keeps them.
      if (p == Precision::BF16) {
        QVERIFY2(roundings <= 1, qPrintable(QString::number(roundings)));
      } else {
        QCOMPARE(roundings, p == Precision::F32 ? 0 : 1);
        QCOMPARE(gradients, p == Precision::F32 ? 0 : 3);
      }
      if (p != Precision::F32)
        QVERIFY2((*prog)->explain().find("roundings shared") != std::string::npos ||
                     (*prog)->explain().find("rounding shared") != std::string::npos,
                 precisionName(p));
    }
    qInfo("arena: fp32 %lld, bf16 %lld, fp16 %lld bytes", (long long)arena[Precision::F32],
          (long long)arena[Precision::BF16], (long long)arena[Precision::F16]);
  }

  // The loss and the weight's gradient are those of the same computation with every
  // value autocast reads rounded, accumulating in float.
  void autocastComputesOnRoundedValues_data() {
    QTest::addColumn<int>("precision");
    QTest::newRow("bf16") << int(Precision::BF16);
    QTest::newRow("fp16") << int(Precision::F16);
  }
  void autocastComputesOnRoundedValues() {
    QFETCH(int, precision);
    const Precision p = Precision(precision);
    for (uint64_t seed : {1, 2, 3}) {
      Case c = randomCase(seed);
      ParamStore store;
      CompileOptions o;
      o.batch = kBatch;
      o.updateParams = false;  // keeps the gradients readable, unscaled
      o.precision = p;
      auto prog = compile(model(linearMse()), o, store);
      QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
      setUp(store, **prog, c);
      StepContext ctx;
      ctx.step = 1;
      (*prog)->run(ctx);
      std::vector<double> dw, dw32;
      double loss = p == Precision::BF16 ? referenceStep(c, bf16, dw) : referenceStep(c, fp16, dw);
      double loss32 = referenceStep(
          c, [](double v) { return v; }, dw32);
      double got = (*prog)->scalar((*prog)->loss);
      QVERIFY2(
          std::fabs(got - loss) <= 1e-6 * std::fabs(loss),
          qPrintable(QString("loss %1, expected %2").arg(got, 0, 'g', 9).arg(loss, 0, 'g', 9)));
      QVERIFY2(std::fabs(loss - loss32) > 1e-5 * std::fabs(loss32), "rounding changed nothing");
      std::vector<float> g = (*prog)->read((*prog)->gradients.at("fc.weight"));
      for (size_t k = 0; k < dw.size(); ++k)
        QVERIFY2(std::fabs(g[k] - dw[k]) <= 1e-6 * std::fabs(dw[k]) + 1e-12,
                 qPrintable(QString("dw[%1] = %2, expected %3").arg(k).arg(g[k]).arg(dw[k])));
    }
  }

  // Gradients far below half's smallest subnormal vanish in fp16 unless the loss is
  // scaled; scaled, the update is fp32's.
  void lossScalingKeepsGradientsFp16WouldLose() {
    Case c = randomCase(5);
    std::fill(c.w.begin(), c.w.end(), 0.f);
    std::fill(c.b.begin(), c.b.end(), 0.f);
    std::fill(c.t.begin(), c.t.end(), 2e-7f);      // dL/dy = -2·2e-7/24, under 2^-25
    for (float& x : c.x) x = std::fabs(x) + 0.5f;  // sums over the batch that do not cancel
    std::vector<double> dw32;
    referenceStep(
        c, [](double v) { return v; }, dw32);
    for (double scale : {1.0, 65536.0}) {
      ParamStore store;
      CompileOptions o;
      o.batch = kBatch;
      o.precision = Precision::F16;
      o.initLossScale = scale;
      o.optimizer.set_kind(proto::Optimizer::SGD);
      o.optimizer.set_lr(1.0);
      auto prog = compile(model(linearMse()), o, store);
      QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
      setUp(store, **prog, c);
      StepContext ctx{1, 1.0, 0, true};
      (*prog)->run(ctx);
      std::vector<float> w = ParamStore::read(*store.find("fc.weight"));
      for (size_t k = 0; k < w.size(); ++k) {
        if (scale == 1.0) {
          QCOMPARE(w[k], 0.f);  // the gradient underflowed
        } else {
          double expected = -dw32[k];  // w = 0 - lr·grad
          QVERIFY2(std::fabs(w[k] - expected) <= 2e-3 * std::fabs(expected),
                   qPrintable(QString("w[%1] = %2, fp32 gives %3").arg(k).arg(w[k]).arg(expected)));
        }
      }
      std::vector<float> state = (*prog)->read((*prog)->lossScale);
      QCOMPARE(state[fn::LossScale::kSkipped], 0.f);
      QCOMPARE(state[fn::LossScale::kUsed], float(scale));
    }
  }

  // Too large a scale overflows: that step changes nothing and halves the scale,
  // until a step is finite; finite steps in a row double it again.
  void overflowSkipsTheStepAndHalvesTheScale() {
    Case c = randomCase(6);
    ParamStore store;
    CompileOptions o;
    o.batch = kBatch;
    o.precision = Precision::F16;
    o.initLossScale = 0x1p30;
    o.lossScaleInterval = 3;
    o.optimizer.set_kind(proto::Optimizer::SGD);
    o.optimizer.set_lr(0.01);
    auto prog = compile(model(linearMse()), o, store);
    QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
    setUp(store, **prog, c);
    float scale = 0x1p30f, good = 0, skipped = 0;
    int skips = 0, finiteSteps = 0;
    for (int64_t step = 1; step <= 40; ++step) {
      std::vector<float> before = ParamStore::read(*store.find("fc.weight"));
      StepContext ctx{step, 0.01, 0, true};
      feed(**prog, c);
      (*prog)->run(ctx);
      std::vector<float> after = ParamStore::read(*store.find("fc.weight"));
      std::vector<float> s = (*prog)->read((*prog)->lossScale);
      QCOMPARE(s[fn::LossScale::kUsed], scale);
      bool skip = s[fn::LossScale::kSkipNow] != 0.f;
      QCOMPARE(after == before, skip);  // a skipped step changes no weight
      if (skip) {
        scale /= 2, good = 0, skipped += 1, skips += 1;
      } else if (++good == 3) {
        scale *= 2, good = 0;
      }
      finiteSteps += skip ? 0 : 1;
      QCOMPARE(s[fn::LossScale::kScale], scale);
      QCOMPARE(s[fn::LossScale::kGood], good);
      QCOMPARE(s[fn::LossScale::kSkipped], skipped);
    }
    QVERIFY2(skips >= 10, qPrintable(QString::number(skips)));  // 2^30 overflows for a while
    QVERIFY2(finiteSteps >= 10, qPrintable(QString::number(finiteSteps)));
  }

  // A whole fp16 run whose scaled gradients overflow at first (its inputs scaled up):
  // each step reports the scale it used and the steps skipped so far, the two follow
  // the scaler's rule, and the last count is the summary's. Other precisions report 0.
  void stepsReportTheLossScaleAndSkips() {
    auto p = spiralsMlp();
    QVERIFY(p.ok());
    proto::Normalization* scaled = p->mutable_data()->mutable_normalization();
    scaled->set_kind(proto::Normalization::FIXED);
    scaled->set_scale(4000);
    p->mutable_train()->mutable_optimizer()->set_kind(proto::Optimizer::SGD);
    p->mutable_train()->mutable_optimizer()->set_lr(0.0001);
    p->mutable_train()->set_epochs(2);
    for (const char* precision : {"fp16", "bf16"}) {
      std::vector<proto::Step> steps;
      TrainOptions opts;
      opts.precision = precision;
      auto r = runTraining(*p, opts, [&](const proto::TrainEvent& e) {
        if (e.has_step()) steps.push_back(e.step());
      });
      QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
      QCOMPARE(int64_t(steps.size()), r->steps);
      if (QString(precision) == "bf16") {
        for (const proto::Step& s : steps) QVERIFY(s.loss_scale() == 0 && s.skipped_steps() == 0);
        continue;
      }
      QVERIFY2(r->skippedSteps > 0, "the inputs were to overflow the first scaled steps");
      QCOMPARE(steps.front().loss_scale(), 65536.0);
      int64_t before = 0;
      for (size_t k = 0; k < steps.size(); ++k) {
        const bool skipped = steps[k].skipped_steps() == before + 1;
        QVERIFY2(skipped || steps[k].skipped_steps() == before,
                 qPrintable(QString("step %1").arg(k + 1)));
        before = steps[k].skipped_steps();
        if (k + 1 == steps.size()) break;
        const double next = steps[k + 1].loss_scale(), now = steps[k].loss_scale();
        if (skipped)
          QCOMPARE(next, now / 2);
        else
          QVERIFY2(next == now || next == 2 * now, qPrintable(QString("step %1").arg(k + 2)));
      }
      QCOMPARE(steps.back().skipped_steps(), r->skippedSteps);
      // The summary's scale is the one the next step would use.
      const double last = steps.back().loss_scale();
      QVERIFY2(r->lossScale == last || r->lossScale == 2 * last || r->lossScale == last / 2,
               qPrintable(QString("%1 after %2").arg(r->lossScale).arg(last)));
    }
  }

  // Whole runs: each precision trains, fp16 reports its loss scale, and the losses
  // stay near fp32's.
  void runsTrainInEachPrecision() {
    auto p = spiralsMlp();
    QVERIFY(p.ok());
    Outcome f32 = train(*p, "fp32");
    QVERIFY2(f32.result.ok(), f32.result.ok() ? "" : f32.result.error().message.c_str());
    QCOMPARE(QString::fromStdString(f32.result->precision), QString("fp32"));
    for (const char* precision : {"bf16", "fp16"}) {
      Outcome o = train(*p, precision);
      QVERIFY2(o.result.ok(), o.result.ok() ? "" : o.result.error().message.c_str());
      QCOMPARE(QString::fromStdString(o.result->precision), QString(precision));
      QCOMPARE(o.losses.size(), f32.losses.size());
      QVERIFY(o.losses != f32.losses);
      double last = o.result->trainLoss, last32 = f32.result->trainLoss;
      QVERIFY2(last < 0.8 * o.losses.front(), qPrintable(QString::number(last)));
      QVERIFY2(std::fabs(last - last32) < 0.1 * last32 + 0.02,
               qPrintable(QString("%1 against fp32's %2").arg(last).arg(last32)));
      if (QString(precision) == "fp16") {
        QCOMPARE(o.result->skippedSteps, int64_t(0));  // these gradients fit fp16 at 2^16
        QCOMPARE(o.result->lossScale, 65536.0);        // 96 steps, under the 2000 to grow
      }
    }
    // A checkpoint keeps fp16's loss scale, and a run resumes from it in any precision.
    QTemporaryDir dir;
    p->mutable_train()->mutable_checkpoint()->set_every_epochs(1);
    TrainOptions write;
    write.precision = "fp16";
    write.checkpointDir = dir.path().toStdString();
    write.epochs = 2;
    auto written = runTraining(*p, write, [](const proto::TrainEvent&) {});
    QVERIFY2(written.ok(), written.ok() ? "" : written.error().message.c_str());
    auto ckpt = readCheckpoint(write.checkpointDir);
    QVERIFY2(ckpt.ok(), ckpt.ok() ? "" : ckpt.error().message.c_str());
    bool kept = false;
    for (const NamedTensor& t : ckpt->tensors) kept = kept || t.name == "loss_scale";
    QVERIFY(kept);
    for (const char* precision : {"fp16", "fp32", "bf16"}) {
      TrainOptions resume;
      resume.precision = precision;
      resume.resume = write.checkpointDir;
      resume.checkpointDir = dir.path().toStdString() + "/" + precision;
      auto r = runTraining(*p, resume, [](const proto::TrainEvent&) {});
      QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
      QVERIFY2(r->steps > written->steps, precision);
    }
    p->mutable_train()->clear_checkpoint();

    TrainOptions bad;
    bad.precision = "fp8";
    auto r = runTraining(*p, bad, [](const proto::TrainEvent&) {});
    QVERIFY(!r.ok());
    QVERIFY2(r.error().message.find("'fp8' is not a precision") != std::string::npos,
             r.error().message.c_str());
    p->mutable_train()->set_precision("half");
    r = runTraining(*p, TrainOptions{}, [](const proto::TrainEvent&) {});
    QVERIFY(!r.ok());
    QVERIFY2(r.error().message.find("train.precision: 'half'") != std::string::npos,
             r.error().message.c_str());
  }
};

QTEST_APPLESS_MAIN(TestPrecision)
#include "tst_precision.moc"
