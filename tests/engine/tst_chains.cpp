// Element-wise chains: the Pointwise kernel against its steps' own kernels run one by
// one, and the compiler's chains against the plan without them.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <set>

#include "cpu_isa.h"
#include "engine/compiler/compile.h"
#include "engine/compiler/passes.h"
#include "kernels/core/device.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

TensorDesc desc(const Shape& s, Layout layout = Layout::Plain) {
  TensorDesc d;
  d.shape = s;
  d.layout = layout;
  return d;
}

// The first CPU kernel of `op` that takes plain tensors of `shape`, run on `in`.
std::vector<float> runOp(const std::string& op, const Attrs& a,
                         const std::vector<const std::vector<float>*>& in, const Shape& shape,
                         const StepContext& ctx) {
  KernelSig sig{&a, std::vector<TensorDesc>(in.size(), desc(shape)), {desc(shape)}, &cpuDevice()};
  std::vector<float> y(size_t(numel(shape)));
  for (const KernelImpl& k : *KernelRegistry::instance().list(op, DeviceKind::Cpu)) {
    if (!k.decline(sig).empty()) continue;
    std::vector<TensorRef> refs;
    for (const auto* v : in) refs.push_back({const_cast<float*>(v->data()), shape, DType::F32, {}});
    TensorRef out{y.data(), shape, DType::F32, {}};
    k.prepare(sig)(KernelIO{refs.data(), &out, refs.size(), 1, &ctx});
    return y;
  }
  qWarning("no CPU kernel of %s takes the signature", op.c_str());
  return {};
}

// A plan's nodes of op `op`.
int count(const Program& p, const std::string& op) {
  int n = 0;
  for (const Node& node : p.graph.nodes) n += node.op->name == op;
  return n;
}

}  // namespace

class TestChains : public QObject {
  Q_OBJECT

 private slots:
  // A chain of four steps on two inputs (Tanh, Dropout, LeakyReLUGrad, Add with ReLU),
  // writing its first and last values, gives what the four kernels give one after the
  // other, bit for bit: in plain and blocked layouts (a padded last block's padding
  // written zero), with each output over an input's memory as the in-place pass plans
  // it, in training (Dropout's mask by logical index) and evaluation. The tensor spans
  // several threads' ranges, tiles and blocks.
  void kernelMatchesItsStepsOneByOne_data() {
    QTest::addColumn<int>("channels");
    QTest::addColumn<bool>("blocked");
    QTest::addColumn<bool>("inPlace");
    QTest::newRow("nchw") << 16 << false << false;
    QTest::newRow("nchw, in place") << 6 << false << true;
    QTest::newRow("nChw16c") << 16 << true << false;
    QTest::newRow("padded nChw16c, in place") << 6 << true << true;
  }
  void kernelMatchesItsStepsOneByOne() {
    QFETCH(int, channels);
    QFETCH(bool, blocked);
    QFETCH(bool, inPlace);
    const Shape shape{3, channels, 40, 36};
    const Layout layout = blocked ? Layout::Blocked16 : Layout::Plain;
    Rng rng(5);
    std::vector<float> x0(size_t(numel(shape))), x1(x0.size());
    for (auto* v : {&x0, &x1})
      for (float& e : *v) e = float(rng.uniform(-3, 3));
    x0[17] = std::nanf("");

    Attrs chain, drop, leaky, add;
    chain.set("steps", std::string("Tanh,Dropout,LeakyReLUGrad,Add"));
    chain.set("0.args", std::vector<int64_t>{0});
    chain.set("1.args", std::vector<int64_t>{-1});
    chain.set("2.args", std::vector<int64_t>{1, -2});
    chain.set("3.args", std::vector<int64_t>{-3, -1});
    drop.set("p", 0.4);
    drop.set("__salt", int64_t(77));
    leaky.set("negative_slope", 0.1);
    add.set("activation", std::string("relu"));
    using Named = std::pair<const char*, Attrs*>;
    for (const auto& [step, attrs] : {Named{"1.", &drop}, Named{"2.", &leaky}, Named{"3.", &add}})
      for (const auto& [key, value] : attrs->values()) chain.set(step + key, value);
    chain.set("outputs", std::vector<int64_t>{0, 3});

    for (bool training : {true, false}) {
      StepContext ctx;
      ctx.seed = 3;
      ctx.step = 2;
      ctx.training = training;
      const auto t = runOp("Tanh", {}, {&x0}, shape, ctx);
      const auto d = runOp("Dropout", drop, {&t}, shape, ctx);
      const auto l = runOp("LeakyReLUGrad", leaky, {&x1, &d}, shape, ctx);
      const auto y = runOp("Add", add, {&l, &t}, shape, ctx);
      QVERIFY(!y.empty());

      const TensorDesc plain = desc(shape), laid = desc(shape, layout);
      KernelSig sig{&chain, {laid, laid}, {laid, laid}, &cpuDevice()};
      const std::vector<KernelImpl>* list =
          KernelRegistry::instance().list("Pointwise", DeviceKind::Cpu);
      QVERIFY(list);
      const KernelImpl& k = list->front();
      QVERIFY2(k.decline(sig).empty(), k.decline(sig).c_str());
      const size_t stored = size_t(storedElements(laid));
      std::vector<std::vector<float>> in(2, std::vector<float>(stored));
      for (size_t i = 0; i < 2; ++i)
        QVERIFY(convertLayout(plain, (i ? x1 : x0).data(), laid, in[i].data()));
      std::vector<std::vector<float>> own(2, std::vector<float>(stored, std::nanf("")));
      // In place: the first output over input 1, the last over input 0.
      float* out0 = inPlace ? in[1].data() : own[0].data();
      float* out1 = inPlace ? in[0].data() : own[1].data();
      std::vector<TensorRef> ins{{in[0].data(), shape, DType::F32, {}},
                                 {in[1].data(), shape, DType::F32, {}}};
      std::vector<TensorRef> outs{{out0, shape, DType::F32, {}}, {out1, shape, DType::F32, {}}};
      k.prepare(sig)(KernelIO{ins.data(), outs.data(), 2, 2, &ctx});

      using Written = std::pair<float*, const std::vector<float>*>;
      for (const auto& [got, want] : {Written{out0, &t}, Written{out1, &y}}) {
        std::vector<float> back(want->size());
        QVERIFY(convertLayout(laid, got, plain, back.data()));
        for (size_t i = 0; i < back.size(); ++i)
          QVERIFY2(std::memcmp(&back[i], &(*want)[i], 4) == 0 ||
                       (std::isnan(back[i]) && std::isnan((*want)[i])),
                   qPrintable(QString("training %1, element %2: %3, want %4")
                                  .arg(training)
                                  .arg(i)
                                  .arg(back[i])
                                  .arg((*want)[i])));
        if (!paddedBlocked(laid)) continue;
        const int64_t area = shape[2] * shape[3], blocks = paddedChannels(channels) / 16;
        for (size_t i = 0; i < stored; ++i)
          if (int64_t(i) / (16 * area) % blocks * 16 + int64_t(i) % 16 >= channels)
            QVERIFY2(got[i] == 0.f,
                     qPrintable(QString("padding at %1 holds %2").arg(i).arg(got[i])));
      }
    }
  }

  // The pass alone, on a forward graph: Tanh, Sigmoid and ReLU become one Pointwise
  // node where ReLU was, with its steps, operands and one output (the ReLU's value);
  // the values only the chain read have no producer; a pinned Sigmoid value is one
  // more output.
  void passJoinsAChainAlone() {
    const std::string body = input("x", "6") + node("a", "Tanh", "x") + node("b", "Sigmoid", "a") +
                             node("c", "Add", "b,x") +
                             node("fc", "Linear", "c", intAttr("out_features", 2));
    for (bool pin : {false, true}) {
      auto g = buildGraph(model(body), 3);
      QVERIFY2(g.ok(), g.ok() ? "" : g.error().message.c_str());
      const size_t before = g->nodes.size();
      const ValueId a = g->findValue("a"), b = g->findValue("b"), c = g->findValue("c");
      std::set<ValueId> pinned;
      if (pin) pinned.insert(b);
      KernelSig context;
      context.device = &cpuDevice();
      auto fused = fuseElementwiseChains(*g, pinned, KernelRegistry::instance(), context);
      QCOMPARE(int(fused.size()), 1);
      QCOMPARE(g->nodes.size(), before - 2);
      const Node* chain = g->findNode("a + b + c");
      QVERIFY(chain);
      QCOMPARE(chain->op->name, std::string("Pointwise"));
      QCOMPARE(chain->attrs.s("steps"), std::string("Tanh,Sigmoid,Add"));
      QCOMPARE(chain->attrs.ints("2.args"), (std::vector<int64_t>{-2, 0}));  // b, then x
      QCOMPARE(chain->inputs, std::vector<ValueId>{g->inputsByField.at("x")});
      QCOMPARE(chain->outputs, pin ? (std::vector<ValueId>{b, c}) : std::vector<ValueId>{c});
      QCOMPARE(chain->attrs.ints("outputs"),
               pin ? (std::vector<int64_t>{1, 2}) : std::vector<int64_t>{2});
      const NodeId at = NodeId(chain - g->nodes.data());
      QCOMPARE(g->values[size_t(c)].producer, at);
      QCOMPARE(g->values[size_t(a)].producer, NodeId(-1));
      QCOMPARE(g->values[size_t(b)].producer, pin ? at : NodeId(-1));
      QCOMPARE(g->findNode("fc")->inputs[0], c);
    }
  }

  // A chain that does not parse is declined with the reason, not run.
  void kernelDeclinesWhatDoesNotParse() {
    Attrs bad;
    bad.set("steps", std::string("Tanh,Softmax"));
    bad.set("0.args", std::vector<int64_t>{0});
    bad.set("1.args", std::vector<int64_t>{-1});
    bad.set("outputs", std::vector<int64_t>{1});
    const Shape s{4, 8};
    KernelSig sig{&bad, {desc(s)}, {desc(s)}, &cpuDevice()};
    const std::string why =
        KernelRegistry::instance().list("Pointwise", DeviceKind::Cpu)->front().decline(sig);
    QVERIFY2(why.find("'Softmax' is not element-wise") != std::string::npos, why.c_str());
    bad.set("steps", std::string("Tanh,Sigmoid"));
    bad.set("1.args", std::vector<int64_t>{-2});
    const std::string later =
        KernelRegistry::instance().list("Pointwise", DeviceKind::Cpu)->front().decline(sig);
    QVERIFY2(later.find("comes after it") != std::string::npos, later.c_str());
  }

  // Tanh, Dropout and LeakyReLU between two convolutions (6 channels: a padded block
  // when blocked): the training plan runs each pass's three as one Pointwise node
  // (the forward one writing the values the backward pass reads, the backward one
  // only its last), the evaluation plan as one writing one value. The loss, every
  // gradient and the evaluated logits are bit for bit the unfused plan's.
  void chainsMatchTheUnfusedPlan_data() {
    QTest::addColumn<bool>("blocked");
    QTest::newRow("nchw") << false;
    QTest::newRow("padded nChw16c") << true;
  }
  void chainsMatchTheUnfusedPlan() {
    QFETCH(bool, blocked);
    if (blocked && !oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);
    const std::string body =
        input("x", "2,5,5") + labels() +
        node("c1", "Conv2d", "x", intAttr("out_channels", 6) + intAttr("kernel_size", 1)) +
        node("t", "Tanh", "c1") + node("d", "Dropout", "t", "attrs { key: 'p' value { f: 0.3 } }") +
        node("l", "LeakyReLU", "d") +
        node("c2", "Conv2d", "l", intAttr("out_channels", 16) + intAttr("kernel_size", 1)) +
        node("flat", "Flatten", "c2") + node("fc", "Linear", "flat", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    Rng rng(13);
    std::vector<float> x(6 * 2 * 5 * 5);
    for (float& v : x) v = float(rng.uniform(-2, 2));
    std::vector<int32_t> labels{0, 2, 1, 1, 0, 2};
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
        Program& prog = **p;
        if (fuse) {
          QCOMPARE(count(prog, "Pointwise"), training ? 2 : 1);
          for (const char* op : {"Tanh", "TanhGrad", "LeakyReLU", "LeakyReLUGrad", "Dropout"})
            QCOMPARE(count(prog, op), 0);
          QCOMPARE(int(prog.chains.size()), training ? 2 : 1);
          QVERIFY2(prog.chains[0].find("t + d + l -> Pointwise (Tanh + Dropout + LeakyReLU, " +
                                       std::string(training ? "3" : "1") + " written)") == 0,
                   prog.chains[0].c_str());
          bool listed = false;
          for (const auto& pass : prog.passes) listed = listed || pass.name == "chains";
          QVERIFY(listed);
          for (const Node& n : prog.graph.nodes)
            if (n.op->name == "Pointwise")
              QCOMPARE(prog.graph.values[n.outputs[0]].desc.layout,
                       blocked ? Layout::Blocked16 : Layout::Plain);
        } else {
          QCOMPARE(count(prog, "Pointwise"), 0);
        }
        std::memcpy(prog.input("x")->data, x.data(), x.size() * sizeof(float));
        if (training) std::memcpy(prog.input("label")->data, labels.data(), labels.size() * 4);
        StepContext ctx;
        ctx.step = 1;
        ctx.training = training;
        prog.run(ctx);
        if (training) all = lossAndGradients(prog);
        const TensorRef& fc = prog.refs[prog.graph.findValue("fc")];
        all.insert(all.end(), fc.f32(), fc.f32() + fc.numel());
      }
      results.push_back(all);
    }
    QCOMPARE(results[0], results[1]);
  }

  // A value read outside the chain before the chain's next op stops the chain there
  // (Tanh's, read by a Linear that the Sigmoid comes after); a kept value is one more
  // output. The evaluated output is the unfused plan's.
  void chainsKeepWhatOthersRead() {
    const std::string body = input("x", "4") + node("a", "Tanh", "x") +
                             node("r", "Linear", "a", intAttr("out_features", 4)) +
                             node("b", "Sigmoid", "a") + node("c", "Add", "b,r") +
                             node("e", "GELU", "c") + input("target", "4", "y") +
                             node("loss", "MSELoss", "e,target");
    for (bool keep : {false, true}) {
      std::vector<std::vector<float>> results;
      for (bool fuse : {true, false}) {
        ParamStore store;
        CompileOptions o;
        o.batch = 3;
        o.fuse = fuse;
        o.training = false;
        o.keep = {"e"};
        if (keep) o.keep.push_back("b");
        auto p = compile(model(body), o, store);
        QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
        Program& prog = **p;
        if (fuse) {
          QCOMPARE(int(prog.chains.size()), 1);
          QVERIFY2(prog.chains[0] == "b + c + e -> Pointwise (Sigmoid + Add + GELU, " +
                                         std::string(keep ? "2" : "1") + " written)",
                   prog.chains[0].c_str());
          QCOMPARE(count(prog, "Tanh"), 1);
        }
        Rng rng(2);
        const TensorRef* x = prog.input("x");
        for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = float(rng.uniform(-2, 2));
        const TensorRef* target = prog.input("y");
        for (int64_t i = 0; i < target->numel(); ++i) target->f32()[i] = 0.5f;
        StepContext ctx;
        ctx.training = false;
        prog.run(ctx);
        std::vector<float> out;
        for (const char* name : {"e", "b"}) {
          if (std::string(name) == "b" && !keep) continue;
          const TensorRef& v = prog.refs[prog.graph.findValue(name)];
          out.insert(out.end(), v.f32(), v.f32() + v.numel());
        }
        results.push_back(out);
      }
      QCOMPARE(results[0], results[1]);
    }
  }
};

QTEST_GUILESS_MAIN(TestChains)
#include "tst_chains.moc"
