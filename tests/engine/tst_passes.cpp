// The pass manager: the two pipelines in order and listed by --explain; each optional
// pass turned off by name computing the same loss and gradients; unknown and needed
// names refused; analyses recomputed after a pass that does not preserve them and a
// stale shape caught; and passes run alone on a graph.
#include <QtTest>
#include <cstring>
#include <map>

#include "engine/compiler/pass.h"
#include "engine/parallel/communicator.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

// A convolution, a Linear with its ReLU (fusion), an element-wise chain (Sigmoid,
// Tanh), a node nothing reads (dead code) and two Linear layers (multi-tensor updates).
std::string body() {
  return input("x", "2, 6, 6") + labels() +
         node("conv", "Conv2d", "x",
              intAttr("out_channels", 4) +
                  " attrs { key: 'kernel_size' value { ints { values: "
                  "[3] } } } attrs { key: 'padding' value { ints { "
                  "values: [1] } } }") +
         node("flat", "Flatten", "conv") +
         node("fc1", "Linear", "flat", intAttr("out_features", 8)) + node("relu", "ReLU", "fc1") +
         node("sg", "Sigmoid", "relu") + node("th", "Tanh", "sg") + node("spare", "Tanh", "flat") +
         node("fc2", "Linear", "th", intAttr("out_features", 3)) +
         node("loss", "SoftmaxCrossEntropy", "fc2,label");
}

CompileOptions gradientsOnly() {
  CompileOptions o;
  o.batch = 4;
  o.updateParams = false;
  return o;
}

// The loss and every gradient of one step on fixed inputs.
std::vector<float> lossAndGradients(const CompileOptions& o, std::string* explain = nullptr) {
  ParamStore store;
  auto p = compile(model(body()), o, store);
  if (!p) qFatal("%s", p.error().message.c_str());
  Rng rng(3);
  TensorRef* x = const_cast<TensorRef*>((*p)->input("x"));
  for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = float(rng.uniform(-1, 1));
  const int32_t labels[] = {0, 2, 1, 1};
  std::memcpy((*p)->input("label")->data, labels, sizeof labels);
  StepContext ctx;
  ctx.step = 1;
  (*p)->run(ctx);
  std::vector<float> out{(*p)->refs[(*p)->loss].f32()[0]};
  for (const auto& [name, v] : (*p)->gradients) {
    const TensorRef& g = (*p)->refs[v];
    out.insert(out.end(), g.f32(), g.f32() + g.numel());
  }
  if (explain) *explain = (*p)->explain();
  return out;
}

// A pass for tests: runs `check` on the context, with the analyses it says it needs.
class Probe : public Pass {
 public:
  Probe(uint8_t needs, std::function<Status(PassContext&)> check)
      : m_needs(needs), m_check(std::move(check)) {}
  const char* name() const override { return "probe"; }
  uint8_t needs() const override { return m_needs; }
  uint8_t preserves() const override { return kAllAnalyses; }
  Result<std::string> run(PassContext& c) override {
    if (Status s = m_check(c); !s) return s.error();
    return std::string("probed");
  }

 private:
  uint8_t m_needs;
  std::function<Status(PassContext&)> m_check;
};

// The graph of body(), to run a hand-made pipeline over.
struct Fixture {
  Program prog;
  ParamStore store;
  CompileOptions opts = gradientsOnly();
  PassContext c{opts, store, prog};
  Fixture() {
    auto g = buildGraph(model(body()), opts.batch);
    if (!g) qFatal("%s", g.error().message.c_str());
    prog.graph = std::move(*g);
    c.context.device = &store.device();
  }
  int count(const std::string& op) const {
    int n = 0;
    for (const Node& node : prog.graph.nodes) n += node.op->name == op;
    return n;
  }
};

}  // namespace

class TestPasses : public QObject {
  Q_OBJECT

 private slots:
  void pipelinesRunInOrder() {
    std::string explain;
    CompileOptions o = gradientsOnly();
    o.updateParams = true;
    ParamStore store;
    auto p = compile(model(body()), o, store);
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    const std::vector<std::string> want = {"kv-cache",
                                           "outputs",
                                           "pipeline",
                                           "sbp",
                                           "folding",
                                           "fusion",
                                           "autocast",
                                           "autodiff",
                                           "pipeline gradients",
                                           "gradient buckets",
                                           "optimizer",
                                           "bf16 storage",
                                           "pipeline schedule",
                                           "dead code",
                                           "chains",
                                           "layouts",
                                           "hoist boxings",
                                           "values",
                                           "in place",
                                           "buffers",
                                           "kernels",
                                           "memory",
                                           "allocate",
                                           "multi-tensor",
                                           "overlap"};
    std::vector<std::string> got;
    for (const auto& e : (*p)->pipeline) got.push_back(e.name);
    QCOMPARE(got, want);
    auto status = [&](const std::string& name) {
      for (const auto& e : (*p)->pipeline)
        if (e.name == name) return e.status;
      return std::string();
    };
    QCOMPARE(status("kv-cache"), std::string("not needed"));  // not generation
    QCOMPARE(status("folding"), std::string("not needed"));   // a training plan
    QCOMPARE(status("autocast"), std::string("not needed"));  // float32
    QCOMPARE(status("bf16 storage"), std::string("not needed"));
    QCOMPARE(status("fusion"), std::string("ran"));
    QCOMPARE((*p)->pipeline.front().pipeline, std::string("rewrite"));
    QCOMPARE((*p)->pipeline.back().pipeline, std::string("lower"));
    const std::string text = (*p)->explain();
    QVERIFY2(text.find("pipeline") != std::string::npos, text.c_str());
    QVERIFY2(text.find("multi-tensor") != std::string::npos, text.c_str());
  }

  void eachOptionalPassCanBeTurnedOff_data() {
    QTest::addColumn<QString>("pass");
    for (const std::string& name : PassManager::standard().optionalNames())
      QTest::newRow(name.c_str()) << QString::fromStdString(name);
  }

  void eachOptionalPassCanBeTurnedOff() {
    QFETCH(QString, pass);
    const std::vector<float> all = lossAndGradients(gradientsOnly());
    CompileOptions o = gradientsOnly();
    o.disabledPasses = {pass.toStdString()};
    std::string explain;
    const std::vector<float> without = lossAndGradients(o, &explain);
    QCOMPARE(without.size(), all.size());
    for (size_t k = 0; k < all.size(); ++k)
      QVERIFY2(std::abs(without[k] - all[k]) <= 1e-5f * (1 + std::abs(all[k])),
               qPrintable(QString("element %1: %2 against %3").arg(k).arg(without[k]).arg(all[k])));
    // Disabled, or (folding in a training plan, overlap with one rank) with nothing
    // to do in this plan.
    const std::string key = passKey(pass.toStdString());
    const std::string mark =
        key == "folding" || key == "overlap" || key == "hoist-boxings" ? "not needed" : "disabled";
    QVERIFY2(explain.find(mark) != std::string::npos, explain.c_str());
  }

  void namesThatCannotBeTurnedOffAreRefused() {
    for (const char* name : {"no-such-pass", "kernels", "autodiff"}) {
      CompileOptions o = gradientsOnly();
      o.disabledPasses = {name};
      ParamStore store;
      auto p = compile(model(body()), o, store);
      QVERIFY(!p.ok());
      const std::string& m = p.error().message;
      QVERIFY2(m.find(name) != std::string::npos, m.c_str());
      QVERIFY2(
          m.find("optional passes: ") != std::string::npos && m.find("fusion") != std::string::npos,
          m.c_str());
    }
    QVERIFY(PassManager::standard().checkDisabled({"in place", "in-place", "dead-code"}).ok());
  }

  // --no-fuse is --disable-pass for folding, fusion and chains.
  void noFuseTurnsOffTheFusingPasses() {
    CompileOptions o = gradientsOnly();
    o.fuse = false;
    ParamStore store;
    auto p = compile(model(body()), o, store);
    QVERIFY(p.ok());
    for (const auto& e : (*p)->pipeline)
      if (e.name == "fusion" || e.name == "chains")
        QCOMPARE(e.status, std::string("disabled"));
      else if (e.name == "folding")  // evaluation plans only
        QCOMPARE(e.status, std::string("not needed"));
    QVERIFY((*p)->fusions.empty() && (*p)->chains.empty());
  }

  // The readers a pass is given are the graph's as it stands: recomputed after fusion
  // (which changes the graph), kept across a pass that preserves them.
  void analysesFollowTheGraph() {
    Fixture f;
    int computed = 0;
    auto check = [&](PassContext& c) -> Status {
      if (c.analyses.readers() != consumers(c.g)) return makeError("stale readers");
      ++computed;
      return {};
    };
    PassManager m;
    m.add(Pipeline::Rewrite, outputsPass());
    m.add(Pipeline::Rewrite, std::make_unique<Probe>(kProducers, check));
    m.add(Pipeline::Rewrite, fusionPass());
    m.add(Pipeline::Rewrite, std::make_unique<Probe>(kProducers, check));
    const size_t before = f.prog.graph.nodes.size();
    Status s = m.run(f.c);
    QVERIFY2(s.ok(), s ? "" : s.message().c_str());
    QCOMPARE(computed, 2);
    QCOMPARE(f.prog.graph.nodes.size(), before - 1);  // the ReLU went into fc1
    QVERIFY(f.c.analyses.valid() & kProducers);
  }

  // A pass that leaves a value's shape other than its producer's inference is caught
  // before the next pass that reads shapes, naming the node and the pass.
  void aStaleShapeIsCaught() {
    Fixture f;
    PassManager m;
    m.add(Pipeline::Rewrite, outputsPass());
    m.add(Pipeline::Rewrite, std::make_unique<Probe>(0, [](PassContext& c) -> Status {
            c.g.values[size_t(c.g.findNode("fc1")->outputs[0])].desc.shape = {4, 9};
            return {};
          }));
    m.add(Pipeline::Lower, kernelsPass());
    Status s = m.run(f.c);
    QVERIFY(!s.ok());
    QVERIFY2(s.message().find("'fc1'") != std::string::npos, s.message().c_str());
    QVERIFY2(s.message().find("after the probe pass") != std::string::npos, s.message().c_str());
  }

  // "kv-cache" alone: attention reads caches of kvCache positions (state, not arena),
  // positions read the "position" input; a mask or training is refused.
  void kvCacheAlone() {
    const std::string perm = "attrs { key: 'perm' value { ints { values: [0, 2, 1, 3] } } }";
    const std::string heads = "attrs { key: 'shape' value { ints { values: [-1, 2, 2] } } }";
    const std::string m = input("x", "1, 4") + node("pos", "PositionEmbedding", "x") +
                          node("h", "Reshape", "pos", heads) + node("t", "Transpose", "h", perm) +
                          node("rot", "RotaryEmbedding", "t") +
                          node("att", "ScaledDotProductAttention", "rot,t,t") +
                          node("loss", "MSELoss", "att,att");
    CompileOptions o;
    o.batch = 1;
    o.training = false;
    o.kvCache = 6;
    ParamStore store;
    auto p = compile(model(m), o, store);
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    std::map<std::string, int> ops;
    for (const Node& n : (*p)->graph.nodes) ++ops[n.op->name];
    QCOMPARE(ops["CachedAttention"], 1);
    QCOMPARE(ops["ScaledDotProductAttention"], 0);
    QCOMPARE(ops["PositionEmbeddingAt"], 1);
    QCOMPARE(ops["RotaryEmbeddingAt"], 1);
    QVERIFY((*p)->input("position"));
    const ParamStore::Entry* cache = store.find("att.k_cache");
    QVERIFY(cache);
    QCOMPARE(cache->desc.shape, (Shape{1, 2, 6, 2}));
    QCOMPARE(cache->kind, ValueKind::State);
    o.training = true;
    ParamStore other;
    auto refused = compile(model(m), o, other);
    QVERIFY(!refused.ok());
    QVERIFY(refused.error().message.find("not training") != std::string::npos);
  }

  void fusionAlone() {
    Fixture f;
    PassManager m;
    m.add(Pipeline::Rewrite, outputsPass());
    m.add(Pipeline::Rewrite, fusionPass());
    QVERIFY(m.run(f.c).ok());
    QCOMPARE(f.count("ReLU"), 0);
    QCOMPARE(f.prog.graph.findNode("fc1")->attrs.s("activation"), std::string("relu"));
  }

  void deadCodeAlone() {
    Fixture f;
    PassManager m;
    m.add(Pipeline::Rewrite, outputsPass());
    m.add(Pipeline::Rewrite, deadCodePass());
    QVERIFY(m.run(f.c).ok());
    QVERIFY(f.prog.graph.findNode("spare") == nullptr);
    QVERIFY(f.prog.graph.findNode("th") != nullptr);
  }

  void chainsAlone() {
    Fixture f;
    PassManager m;
    m.add(Pipeline::Rewrite, outputsPass());
    m.add(Pipeline::Rewrite, chainsPass());
    QVERIFY(m.run(f.c).ok());
    QCOMPARE(f.count("Sigmoid"), 0);
    QVERIFY(f.count("Pointwise") >= 1);
  }

  void autodiffAlone() {
    Fixture f;
    PassManager m;
    m.add(Pipeline::Rewrite, outputsPass());
    m.add(Pipeline::Rewrite, autodiffPass());
    QVERIFY(m.run(f.c).ok());
    QCOMPARE(f.c.grads.size(), size_t(6));  // conv, fc1, fc2: weight and bias each
    QVERIFY(f.c.seed >= 0);
    QCOMPARE(f.prog.graph.nodes[size_t(f.c.seed)].op->name, std::string("Constant"));
  }

  // Tensor parallelism: a dropout over a split value draws each part's masks apart
  // (its stream salted with its part), one over a whole value the same on every rank.
  void splitPartsDrawTheirOwnMasks() {
    using namespace testutil;
    const std::string body = input("x", "8") + labels() +
                             node("whole", "Dropout", "x", "attrs { key: 'p' value { f: 0.5 } }") +
                             node("fc1", "Linear", "whole", intAttr("out_features", 16)) +
                             node("drop", "Dropout", "fc1", "attrs { key: 'p' value { f: 0.5 } }") +
                             node("fc2", "Linear", "drop", intAttr("out_features", 3)) +
                             node("loss", "SoftmaxCrossEntropy", "fc2,label");
    auto comms = threadRanks(2, 30);
    std::vector<int64_t> split, whole;
    for (int r = 0; r < 2; ++r) {
      TensorGroups g = tensorGroups(*comms[size_t(r)], 2);
      CompileOptions o = gradientsOnly();
      o.fuse = false;
      o.comm = comms[size_t(r)].get();
      o.tensorComm = g.tensor.get();
      o.dataComm = g.data.get();
      o.sbpHints = {{"whole", "B -> B"}, {"fc1", "B | S(0), S(0) -> S(1)"}};
      ParamStore store;
      auto p = compile(model(body), o, store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      const Node* d = (*p)->graph.findNode("drop");
      const Node* w = (*p)->graph.findNode("whole");
      QVERIFY(d && w);
      QVERIFY((*p)->graph.values[d->outputs[0]].shard.split());
      split.push_back(d->attrs.i("__salt"));
      whole.push_back(w->attrs.i("__salt"));
    }
    QVERIFY(split[0] != split[1]);
    QCOMPARE(whole[0], whole[1]);
  }

  // Overlap: under tensor parallelism every boxing runs on the collective lane, joined
  // before the first later step that reads what it writes (or writes what it reads,
  // or talks to the ranks); in Megatron's MLP some compute runs while one moves, and
  // none of the steps it runs beside reads its output.
  void boxingsMoveWhileTheStepComputes() {
    using namespace testutil;
    const std::string body =
        input("x", "8") + labels() + node("fc1", "Linear", "x", intAttr("out_features", 16)) +
        node("act", "Tanh", "fc1") + node("fc2", "Linear", "act", intAttr("out_features", 16)) +
        node("out", "Linear", "fc2", intAttr("out_features", 4)) +
        node("loss", "SoftmaxCrossEntropy", "out,label");
    auto comms = threadRanks(2, 30);
    TensorGroups g = tensorGroups(*comms[0], 2);
    CompileOptions o = gradientsOnly();
    o.comm = comms[0].get();
    o.tensorComm = g.tensor.get();
    o.dataComm = g.data.get();
    o.sbpHints = {{"fc1", "B | S(0), S(0) -> S(1)"}, {"fc2", "S(1) | S(1), P -> P"}};
    o.overlap = true;
    ParamStore store;
    auto p = compile(model(body), o, store);
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    const Program& prog = **p;
    size_t boxings = 0, beside = 0;
    for (size_t i = 0; i < prog.steps.size(); ++i) {
      const PlanStep& s = prog.steps[i];
      if (s.kernel != "collective.boxing") {
        QCOMPARE(s.joinAt, size_t(0));
        continue;
      }
      ++boxings;
      QVERIFY(s.joinAt > i && s.joinAt <= prog.steps.size());
      const ValueId moved = prog.graph.nodes[size_t(s.node)].outputs[0];
      for (size_t k = i + 1; k < s.joinAt; ++k) {
        const Node& n = prog.graph.nodes[size_t(prog.steps[k].node)];
        if (prog.steps[k].kernel == "collective.boxing") continue;  // after it, on the lane
        ++beside;
        QVERIFY2(std::find(n.inputs.begin(), n.inputs.end(), moved) == n.inputs.end(),
                 n.name.c_str());
      }
    }
    QVERIFY(boxings >= 4);
    QVERIFY(beside > 0);
  }

  // Pipelines: the messages one stage sends another go in the order the other takes
  // them (a transport may pair them by order alone, as NCCL does). Three stages, four
  // micro-batches, values crossing each boundary side by side and one skipping a stage:
  // for every pair of stages, the tags of one's sends to the other, in plan order,
  // are those of the other's receives from it.
  void stagesTakeMessagesInTheOrderSent() {
    using namespace testutil;
    const std::string body =
        input("x", "8") + labels() + node("p", "Linear", "x", intAttr("out_features", 8)) +
        node("q", "Linear", "x", intAttr("out_features", 8)) + node("tq", "Tanh", "q") +
        node("tp", "Tanh", "p") + node("mid", "Add", "tq,tp") +
        node("r", "Linear", "mid", intAttr("out_features", 8)) + node("tr", "Tanh", "r") +
        node("late", "Add", "tr,tp") + node("out", "Linear", "late", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "out,label");
    const int stages = 3;
    auto comms = threadRanks(stages, 30);
    // (from, to) -> the tags of the messages, in the order sent and in the order taken
    std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> sent, taken;
    size_t messages = 0;
    for (int r = 0; r < stages; ++r) {
      CompileOptions o = gradientsOnly();
      o.batch = 8;
      o.comm = comms[size_t(r)].get();
      o.stageComm = comms[size_t(r)].get();
      o.microBatches = 4;
      o.stagePlacements = {{"p", 0}, {"q", 0},  {"tq", 0},   {"tp", 0},  {"mid", 1},
                           {"r", 1}, {"tr", 1}, {"late", 2}, {"out", 2}, {"loss", 2}};
      ParamStore store;
      auto p = compile(model(body), o, store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      for (const PlanStep& s : (*p)->steps) {
        const Node& n = (*p)->graph.nodes[size_t(s.node)];
        const std::string op = n.op->name;
        if (op != "PipeSend" && op != "PipeRecv") continue;
        const int64_t peer = n.attrs.i("peer"), tag = n.attrs.i("tag");
        if (op == "PipeSend")
          sent[{r, peer}].push_back(tag);
        else
          taken[{peer, r}].push_back(tag);
        ++messages;
      }
    }
    const std::pair<int64_t, int64_t> skip{0, 2}, next{0, 1}, back{1, 0};
    QVERIFY2(sent.count(skip) && sent.count(next) && sent.count(back),
             "a skip across a stage, values side by side, gradients back");
    QVERIFY(sent[next].size() >= 8);  // two values a micro-batch
    QCOMPARE(sent.size(), taken.size());
    for (const auto& [pair, tags] : sent) {
      QVERIFY2(taken.count(pair), "a pair that sends but never receives");
      QCOMPARE(taken[pair], tags);
    }
    QCOMPARE(messages % 2, size_t(0));
  }
};

QTEST_GUILESS_MAIN(TestPasses)
#include "tst_passes.moc"
