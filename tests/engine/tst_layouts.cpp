// The layout pass: convolution regions run in oneDNN's blocked nChw16c layout, with
// one Reorder wherever a region meets a plain consumer or producer, and the results
// are those of the all-plain plan: the same losses step by step, the same weights
// after training, the same evaluation. Convolution weights between blocked
// activations are stored packed, with their gradients and optimizer state.
#include <QtTest>
#include <cmath>
#include <vector>

#include "engine/compiler/compile.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

constexpr int64_t kBatch = 8;

std::string attrs(const std::string& kernel, int64_t out, int64_t stride, int64_t pad,
                  bool bias = false) {
  return "attrs { key: 'out_channels' value { i: " + std::to_string(out) +
         " } } attrs { key: 'kernel_size' value { ints { values: [" + kernel +
         "] } } } attrs { key: 'stride' value { ints { values: [" + std::to_string(stride) +
         "] } } } attrs { key: 'padding' value { ints { values: [" + std::to_string(pad) +
         "] } } } attrs { key: 'bias' value { b: " + (bias ? "true" : "false") + " } }";
}

std::string pool(const std::string& name, const std::string& op, const std::string& in) {
  return node(name, op, in, "attrs { key: 'kernel_size' value { ints { values: [2] } } }");
}

// Residual stage with BatchNorm, Add, both poolings, Dropout, a biased transposed
// convolution (ReduceChannels on a blocked gradient) and global average pooling: a
// region that never needs to leave nChw16c.
std::string residualModel() {
  return input("x", "3, 12, 12") + labels() + node("c1", "Conv2d", "x", attrs("3", 16, 1, 1)) +
         node("b1", "BatchNorm", "c1") + node("r1", "ReLU", "b1") +
         node("c2", "Conv2d", "r1", attrs("3", 32, 2, 1)) + node("b2", "BatchNorm", "c2") +
         node("down", "Conv2d", "r1", attrs("1", 32, 2, 0)) + node("sum", "Add", "b2,down") +
         node("r2", "ReLU", "sum") + pool("mp", "MaxPool2d", "r2") +
         node("drop", "Dropout", "mp", "attrs { key: 'p' value { f: 0.3 } }") +
         node("up", "ConvTranspose2d", "drop", attrs("2", 16, 2, 0, true)) +
         node("r3", "ReLU", "up") + pool("ap", "AvgPool2d", "r3") +
         node("gap", "GlobalAvgPool2d", "ap") +
         node("fc", "Linear", "gap", "attrs { key: 'out_features' value { i: 10 } }") +
         node("loss", "SoftmaxCrossEntropy", "fc,label");
}

// A LeNet-like stack that must leave the blocked layout for Flatten, and come back
// for Flatten's gradient.
std::string flattenModel() {
  return input("x", "1, 8, 8") + labels() + node("c1", "Conv2d", "x", attrs("3", 16, 1, 1)) +
         node("b1", "BatchNorm", "c1") + node("r1", "ReLU", "b1") + pool("mp", "MaxPool2d", "r1") +
         node("flat", "Flatten", "mp") +
         node("fc", "Linear", "flat", "attrs { key: 'out_features' value { i: 10 } }") +
         node("loss", "SoftmaxCrossEntropy", "fc,label");
}

// Channel counts that do not divide by 16, blocked with a padded last block where
// every kernel keeps the padding zero: a convolution with a bias, ReLU, Dropout,
// both poolings and a sum over 6 channels padded to 16. Sigmoid (0.5 at zero) and
// BatchNorm decline padding, so their tensors are plain; 3 channels would pad more
// than 4x and stay plain too.
std::string paddedModel() {
  return input("x", "1, 12, 12") + labels() + node("c1", "Conv2d", "x", attrs("3", 6, 1, 1, true)) +
         node("r1", "ReLU", "c1") +
         node("d1", "Dropout", "r1", "attrs { key: 'p' value { f: 0.3 } }") +
         pool("mp", "MaxPool2d", "d1") + node("c2", "Conv2d", "mp", attrs("3", 6, 1, 1, true)) +
         node("sum", "Add", "c2,mp") + node("r2", "ReLU", "sum") +
         node("c3", "Conv2d", "r2", attrs("3", 12, 1, 1)) + node("sg", "Sigmoid", "c3") +
         node("c4", "Conv2d", "sg", attrs("1", 6, 1, 0)) + node("b4", "BatchNorm", "c4") +
         node("c5", "Conv2d", "b4", attrs("1", 3, 1, 0)) + pool("ap", "AvgPool2d", "c5") +
         node("flat", "Flatten", "ap") +
         node("fc", "Linear", "flat", "attrs { key: 'out_features' value { i: 10 } }") +
         node("loss", "SoftmaxCrossEntropy", "fc,label");
}

struct Run {
  ParamStore store;
  std::unique_ptr<Program> train;
};

void compileInto(Run& r, const std::string& body, bool blocked, bool training = true) {
  CompileOptions o;
  o.batch = kBatch;
  o.seed = 5;
  o.blockedLayouts = blocked;
  o.training = training;
  auto p = compile(model(body), o, r.store);
  QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
  r.train = std::move(*p);
}

void feed(const Program& p, uint64_t seed) {
  Rng rng(seed);
  const TensorRef* x = p.input("x");
  const TensorRef* y = p.input("label");
  for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = float(rng.uniform(-1, 1));
  for (int64_t i = 0; i < y->numel(); ++i) y->i32()[i] = int32_t(rng.next() % 10);
}

int countOp(const Program& p, const std::string& op) {
  int n = 0;
  for (const PlanStep& s : p.steps) n += p.graph.nodes[s.node].op->name == op;
  return n;
}

double relDiff(double a, double b) {
  return std::fabs(a - b) / std::max(1e-6, std::max(std::fabs(a), std::fabs(b)));
}

}  // namespace

class TestLayouts : public QObject {
  Q_OBJECT

 private slots:
  void blockedPlanMatchesPlain_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<int>("reorders");
    QTest::addColumn<bool>("packs");  // some weight lies between blocked activations
    QTest::addRow("residual, transposed conv, global pooling")
        << QString::fromStdString(residualModel()) << 0 << true;
    QTest::addRow("flatten") << QString::fromStdString(flattenModel()) << 2 << true;
    QTest::addRow("padded channels") << QString::fromStdString(paddedModel()) << 6 << false;
  }
  void blockedPlanMatchesPlain() {
    QFETCH(QString, body);
    QFETCH(int, reorders);
    QFETCH(bool, packs);
    Run plain, blocked;
    compileInto(plain, body.toStdString(), false);
    compileInto(blocked, body.toStdString(), true);
    if (QTest::currentTestFailed()) return;
    QCOMPARE(plain.train->blockedTensors, 0);
    QCOMPARE(countOp(*plain.train, "Reorder"), 0);
    if (blocked.train->blockedTensors == 0)
      QSKIP("oneDNN has no blocked-layout convolution for this CPU; every plan stays plain");
    qInfo("%d activations blocked, %d reorders", blocked.train->blockedTensors,
          blocked.train->reorders);
    QCOMPARE(countOp(*blocked.train, "Reorder"), reorders);
    QCOMPARE(blocked.train->reorders, reorders);
    // Every blocked tensor is read and written by kernels that read layouts.
    for (const PlanStep& s : blocked.train->steps) {
      const Node& n = blocked.train->graph.nodes[s.node];
      bool touches = false;
      for (const auto* vs : {&n.inputs, &n.outputs})
        for (ValueId v : *vs)
          touches = touches || blocked.train->graph.values[v].desc.layout != Layout::Plain;
      if (touches)
        QVERIFY2(s.kernel.rfind("reference.", 0) != 0,
                 qPrintable(QString::fromStdString(n.name + " got " + s.kernel)));
    }

    // Weights between blocked activations are stored packed, with their gradient and
    // optimizer state, and the forward convolution reads them with no conversion.
    QCOMPARE(blocked.train->packedWeights > 0, packs);
    QCOMPARE(plain.train->packedWeights, 0);
    int packedSeen = 0;
    for (const PlanStep& s : blocked.train->steps) {
      const Node& n = blocked.train->graph.nodes[s.node];
      const Graph& g = blocked.train->graph;
      if (n.op->name == "AdamUpdate" && g.values[n.inputs[0]].desc.layout == Layout::Packed) {
        ++packedSeen;
        for (ValueId v : n.inputs)
          QVERIFY2(g.values[v].desc.sameLayout(g.values[n.inputs[0]].desc),
                   qPrintable(QString::fromStdString(g.values[v].name)));
        QVERIFY(blocked.store.find(g.values[n.inputs[0]].name)->desc.layout == Layout::Packed);
        QVERIFY(blocked.store.find(g.values[n.inputs[2]].name)->desc.layout == Layout::Packed);
      }
      if (n.op->name == "Conv2d" && g.values[n.inputs[1]].desc.layout == Layout::Packed) {
        QVERIFY(s.detail);
        QVERIFY2(s.detail().find("per launch") == std::string::npos, s.detail().c_str());
      }
    }
    QCOMPARE(packedSeen, blocked.train->packedWeights);

    StepContext ctx;
    ctx.lr = 1e-3;
    ctx.seed = 11;
    for (int step = 1; step <= 4; ++step) {
      ctx.step = step;
      feed(*plain.train, step);
      feed(*blocked.train, step);
      plain.train->run(ctx);
      blocked.train->run(ctx);
      double a = plain.train->scalar(plain.train->loss);
      double b = blocked.train->scalar(blocked.train->loss);
      QVERIFY2(std::isfinite(a) && relDiff(a, b) < 1e-4,
               qPrintable(QString("step %1: plain loss %2, blocked %3").arg(step).arg(a).arg(b)));
    }
    // The weights, optimizer state and running statistics, read in PyTorch's layout
    // from both stores.
    for (const auto& e : plain.store.entries()) {
      const ParamStore::Entry* other = blocked.store.find(e->name);
      QVERIFY(other);
      std::vector<float> want = ParamStore::read(*e), got = ParamStore::read(*other);
      double worst = 0, scale = 1e-3;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, double(std::fabs(want[i] - got[i])));
        scale = std::max(scale, double(std::fabs(want[i])));
      }
      QVERIFY2(worst / scale < 1e-3,
               qPrintable(QString::fromStdString(e->name) + QString(": differs by %1").arg(worst)));
    }

    // Evaluation plans (BatchNorm on running statistics, no Dropout) agree too. The
    // blocked one shares the training plan's store, packed weights and all.
    Run plainEval;
    compileInto(plainEval, body.toStdString(), false, false);
    for (const auto& e : plain.store.entries())
      if (ParamStore::Entry* t = plainEval.store.find(e->name))
        ParamStore::setStored(*t, ParamStore::stored(*e));
    CompileOptions eo;
    eo.batch = kBatch;
    eo.training = false;
    auto evalPlan = compile(model(body.toStdString()), eo, blocked.store);
    QVERIFY2(evalPlan.ok(), evalPlan.ok() ? "" : evalPlan.error().message.c_str());
    Run blockedEval;
    blockedEval.train = std::move(*evalPlan);
    QVERIFY(blockedEval.train->blockedTensors > 0);
    QCOMPARE(blockedEval.train->packedWeights, blocked.train->packedWeights);
    ctx.training = false;
    feed(*plainEval.train, 99);
    feed(*blockedEval.train, 99);
    plainEval.train->run(ctx);
    blockedEval.train->run(ctx);
    double a = plainEval.train->scalar(plainEval.train->loss);
    double b = blockedEval.train->scalar(blockedEval.train->loss);
    QVERIFY2(relDiff(a, b) < 1e-4, qPrintable(QString("eval loss %1 vs %2").arg(a).arg(b)));
  }

  // A Conv-BN-ReLU-Pool CNN with momentum SGD, batch 32: the blocked plan's losses
  // stay within float rounding of the plain plan's for 20 steps. (While the blocked
  // BatchNorm summed its statistics in float, they drifted apart from step 12 on.)
  void convBnCnnTracksThePlainPlan() {
    std::string body =
        input("x", "3, 16, 16") + labels() + node("c1", "Conv2d", "x", attrs("3", 32, 1, 1)) +
        node("b1", "BatchNorm", "c1") + node("r1", "ReLU", "b1") + pool("p1", "MaxPool2d", "r1") +
        node("c2", "Conv2d", "p1", attrs("3", 32, 1, 1)) + node("b2", "BatchNorm", "c2") +
        node("r2", "ReLU", "b2") + pool("p2", "MaxPool2d", "r2") + node("flat", "Flatten", "p2") +
        node("fc", "Linear", "flat", "attrs { key: 'out_features' value { i: 10 } }") +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    Run plain, blocked;
    for (Run* r : {&plain, &blocked}) {
      CompileOptions o;
      o.batch = 32;
      o.seed = 5;
      o.blockedLayouts = r == &blocked;
      o.optimizer.set_kind(proto::Optimizer::SGD);
      o.optimizer.set_lr(0.01);
      o.optimizer.set_momentum(0.9);
      auto p = compile(model(body), o, r->store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      r->train = std::move(*p);
    }
    if (blocked.train->blockedTensors == 0) QSKIP("no blocked-layout convolution for this CPU");
    StepContext ctx;
    ctx.lr = 0.01;
    double worst = 0;
    for (int step = 1; step <= 20; ++step) {
      ctx.step = step;
      for (Run* r : {&plain, &blocked}) {
        feed(*r->train, 100 + step);
        r->train->run(ctx);
      }
      double a = plain.train->scalar(plain.train->loss);
      double b = blocked.train->scalar(blocked.train->loss);
      worst = std::max(worst, relDiff(a, b));
      QVERIFY2(std::isfinite(a) && relDiff(a, b) < 1e-5,
               qPrintable(QString("step %1: plain loss %2, blocked %3").arg(step).arg(a).arg(b)));
    }
    qInfo("largest relative difference of the losses over 20 steps: %.2g", worst);
  }

  // A packed store reads and writes PyTorch's layout at its edges: what a file gets
  // from one plan's store, another plan's store takes back exactly.
  void packedStoreRoundTrips() {
    Run a, b;
    compileInto(a, residualModel(), true);
    if (a.train->packedWeights == 0) QSKIP("no packed convolution weights for this CPU");
    compileInto(b, residualModel(), true);
    Rng rng(3);
    for (const auto& e : a.store.entries()) {
      std::vector<float> v(size_t(e->numel()));
      for (float& x : v) x = float(rng.uniform(-1, 1));
      ParamStore::write(*e, v.data());
      QCOMPARE(ParamStore::read(*e), v);
    }
    for (const auto& e : a.store.entries()) {
      NamedTensor t = ParamStore::toNamed(*e);
      ParamStore::Entry* other = b.store.find(e->name);
      QVERIFY(other && other->desc.sameLayout(e->desc));
      ParamStore::write(*other, reinterpret_cast<const float*>(t.data.data()));
      QCOMPARE(ParamStore::stored(*other), ParamStore::stored(*e));  // the same bytes, packed alike
    }
    // A plain plan cannot bind to a packed store, and says which tensor.
    CompileOptions o;
    o.batch = kBatch;
    o.blockedLayouts = false;
    auto p = compile(model(residualModel()), o, a.store);
    QVERIFY(!p.ok());
    QVERIFY2(p.error().message.find(".weight' is held as") != std::string::npos,
             p.error().message.c_str());
  }

  // Gradient norms read packed gradients as they lie: the plan still packs, and
  // each Σ grad² is the plain plan's.
  void gradientNormsKeepWeightsPacked() {
    Run plain, blocked;
    for (Run* r : {&plain, &blocked}) {
      CompileOptions o;
      o.batch = kBatch;
      o.seed = 5;
      o.blockedLayouts = r == &blocked;
      o.gradientNorms = true;
      auto p = compile(model(residualModel()), o, r->store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      r->train = std::move(*p);
    }
    if (blocked.train->blockedTensors == 0) QSKIP("no blocked-layout convolution for this CPU");
    Run reference;
    compileInto(reference, residualModel(), true);
    QCOMPARE(blocked.train->packedWeights, reference.train->packedWeights);
    QVERIFY(blocked.train->packedWeights > 0);
    StepContext ctx;
    ctx.lr = 1e-3;
    ctx.seed = 11;
    ctx.step = 1;
    for (Run* r : {&plain, &blocked}) {
      feed(*r->train, 1);
      r->train->run(ctx);
    }
    QCOMPARE(blocked.train->gradientSquares.size(), plain.train->gradientSquares.size());
    for (const auto& [name, v] : plain.train->gradientSquares) {
      double a = plain.train->scalar(v),
             b = blocked.train->scalar(blocked.train->gradientSquares.at(name));
      QVERIFY2(a > 0 && relDiff(a, b) < 1e-3,
               qPrintable(QString::fromStdString(name) + QString(": %1 vs %2").arg(a).arg(b)));
    }
  }

  // Tensors read after a step, and channel counts that padding to 16 would more
  // than quadruple, stay plain.
  void keptAndTinyTensorsStayPlain() {
    ParamStore store;
    CompileOptions o;
    o.batch = kBatch;
    o.keep = {"r1"};
    std::string body =
        input("x", "1, 8, 8") + labels() + node("c1", "Conv2d", "x", attrs("3", 16, 1, 1)) +
        node("r1", "ReLU", "c1") + node("c2", "Conv2d", "r1", attrs("3", 3, 1, 1)) +
        node("r2", "ReLU", "c2") + node("c3", "Conv2d", "r2", attrs("3", 32, 1, 1)) +
        node("gap", "GlobalAvgPool2d", "c3") +
        node("fc", "Linear", "gap", "attrs { key: 'out_features' value { i: 10 } }") +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    auto p = compile(model(body), o, store);
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    const Graph& g = (*p)->graph;
    if ((*p)->blockedTensors == 0) QSKIP("no blocked-layout convolution for this CPU");
    QCOMPARE(g.values[g.findValue("r1")].desc.layout, Layout::Plain);
    QCOMPARE(g.values[g.findValue("r2")].desc.layout, Layout::Plain);
    QCOMPARE(g.values[g.findValue("c2")].desc.layout, Layout::Plain);
    QCOMPARE(g.values[g.findValue("c3")].desc.layout, Layout::Blocked16);
    QVERIFY((*p)->explain().find("c3[8×32×8×8 nChw16c]") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestLayouts)
#include "tst_layouts.moc"
