// The compiler passes on small graphs: validation errors, fusion, dead-code
// elimination, autodiff through whole models, the memory planner's invariant and
// the determinism of plans.
#include <omp.h>

#include <QtTest>
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "engine/compiler/compile.h"
#include "engine/compiler/kernel_choice.h"
#include "engine/compiler/lifetimes.h"
#include "engine/compiler/memory_planner.h"
#include "engine/graph/analyze.h"
#include "gradient_check.h"
#include "kernels/core/functors.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

std::string mlpBody() {
  return input("x", "4") + labels() + node("fc1", "Linear", "x", intAttr("out_features", 8)) +
         node("act", "ReLU", "fc1") + node("fc2", "Linear", "act", intAttr("out_features", 3)) +
         node("loss", "SoftmaxCrossEntropy", "fc2,label") + node("acc", "Accuracy", "fc2,label");
}

// Checks that no two arena tensors that are live at the same step overlap, from
// the program's steps alone (independently of the planner's own bookkeeping).
bool arenaIsSafe(const Program& p) {
  std::map<ValueId, std::pair<int, int>> live;  // value -> first/last step
  const char* lo = p.arena.data();
  const char* hi = lo + p.arenaBytes;
  auto inArena = [&](ValueId v) {
    const char* d = static_cast<const char*>(p.refs[v].data);
    return d >= lo && d < hi;
  };
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Node& n = p.graph.nodes[p.steps[i].node];
    std::vector<ValueId> used = n.inputs;
    used.insert(used.end(), n.outputs.begin(), n.outputs.end());
    for (ValueId v : used) {
      if (!inArena(v)) continue;
      int first = p.graph.values[v].kind == ValueKind::Input ? 0 : int(i);
      auto [it, fresh] = live.try_emplace(v, first, int(i));
      if (!fresh) it->second.second = int(i);
    }
  }
  for (ValueId v : {p.loss}) live[v].second = int(p.steps.size());
  // An output written in place shares its input's buffer: legal only where the step
  // that writes it is the input's last reader. The two are then one buffer, live
  // from the input's first step to the output's last.
  for (const auto& [out, in] : p.overwrote) {
    if (p.refs[out].data != p.refs[in].data) return false;
    if (!live.count(in) || !live.count(out) || live[in].second != live[out].first) return false;
  }
  std::map<ValueId, ValueId> root;
  for (const PlanStep& s : p.steps)  // in step order, so an input's root is known
    for (ValueId out : p.graph.nodes[s.node].outputs)
      if (auto it = p.overwrote.find(out); it != p.overwrote.end()) {
        ValueId r = root.count(it->second) ? root[it->second] : it->second;
        root[out] = r;
        live[r].second = std::max(live[r].second, live[out].second);
      }
  for (const auto& [out, r] : root) live.erase(out);
  for (auto a = live.begin(); a != live.end(); ++a)
    for (auto b = std::next(a); b != live.end(); ++b) {
      bool together = a->second.first <= b->second.second && b->second.first <= a->second.second;
      const char* a0 = static_cast<const char*>(p.refs[a->first].data);
      const char* b0 = static_cast<const char*>(p.refs[b->first].data);
      int64_t an = p.refs[a->first].numel() * int64_t(dtypeSize(p.refs[a->first].dtype));
      int64_t bn = p.refs[b->first].numel() * int64_t(dtypeSize(p.refs[b->first].dtype));
      if (together && a0 < b0 + bn && b0 < a0 + an) return false;
    }
  return true;
}

}  // namespace

class TestCompiler : public QObject {
  Q_OBJECT

 private slots:
  void errorsNameNodeAndPort_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("unknown op") << QString::fromStdString(input("x", "4") +
                                                          node("a", "Lineer", "x"))
                                << QStringList{"'a'", "unknown op 'Lineer'"};
    QTest::newRow("dangling input")
        << QString::fromStdString(input("x", "4") + node("a", "ReLU", "nowhere"))
        << QStringList{"'a'", "input 'x'", "'nowhere'"};
    QTest::newRow("cycle") << QString::fromStdString(input("x", "4") + node("a", "Add", "x,b") +
                                                     node("b", "ReLU", "a"))
                           << QStringList{"cycle", "'a'", "'b'"};
    QTest::newRow("shape mismatch")
        << QString::fromStdString(input("x", "4") + input("y", "5", "y") + node("s", "Add", "x,y"))
        << QStringList{"'s'", "input 'b'", "×5", "×4"};
    QTest::newRow("duplicate name")
        << QString::fromStdString(input("x", "4") + node("x", "ReLU", "x"))
        << QStringList{"'x'", "used by another node"};
    QTest::newRow("arity") << QString::fromStdString(input("x", "4") + node("s", "Add", "x"))
                           << QStringList{"'s'", "expects 2 input(s), has 1"};
    QTest::newRow("bad port") << QString::fromStdString(input("x", "4") + node("r", "ReLU", "x:3"))
                              << QStringList{"'r'", "no output port 3"};
    QTest::newRow("attribute range")
        << QString::fromStdString(input("x", "4") +
                                  node("d", "Dropout", "x", "attrs { key: 'p' value { f: 1.5 } }"))
        << QStringList{"'d'", "'p'", "between 0 and 0.99"};
    QTest::newRow("no loss") << QString::fromStdString(input("x", "4") + node("r", "ReLU", "x"))
                             << QStringList{"no loss node"};
    QTest::newRow("two losses") << QString::fromStdString(mlpBody() + node("loss2",
                                                                           "SoftmaxCrossEntropy",
                                                                           "fc2,label"))
                                << QStringList{"several loss nodes", "train.loss"};
    QTest::newRow("labels dtype") << QString::fromStdString(
                                         input("x", "4") + input("l", "", "label") +
                                         node("fc", "Linear", "x", intAttr("out_features", 3)) +
                                         node("loss", "SoftmaxCrossEntropy", "fc,l"))
                                  << QStringList{"'loss'", "input 'labels'", "int32"};
    QTest::newRow("linear on a vector")
        << QString::fromStdString(input("x", "") +
                                  node("fc", "Linear", "x", intAttr("out_features", 3)))
        << QStringList{"'fc'", "input 'x'", "batch × features"};
  }
  void errorsNameNodeAndPort() {
    QFETCH(QString, body);
    QFETCH(QStringList, mentions);
    expectCompileError(body.toStdString(), mentions);
  }

  void fusesLinearWithItsOnlyRelu() {
    ParamStore store;
    auto p = compile(model(mlpBody()), CompileOptions{}, store);
    QVERIFY(p.ok());
    QCOMPARE(int((*p)->fusions.size()), 1);
    for (const Node& n : (*p)->graph.nodes) QVERIFY(n.op->name != "ReLU");
    // A second reader of fc1 keeps the ReLU separate.
    std::string body = mlpBody() + node("tap", "Tanh", "fc1");
    CompileOptions o;
    o.keep = {"tap"};
    ParamStore store2;
    auto q = compile(model(body), o, store2);
    QVERIFY(q.ok());
    QCOMPARE(int((*q)->fusions.size()), 0);
  }

  void removesDeadBranches() {
    std::string body = mlpBody() + node("unused", "Tanh", "fc1");
    ParamStore store;
    auto p = compile(model(body), CompileOptions{}, store);
    QVERIFY(p.ok());
    for (const Node& n : (*p)->graph.nodes) QVERIFY(n.name != "unused");
  }

  void accumulatesGradientsOfSharedTensors() {
    // fc1 feeds two branches; its gradient must be the sum of both.
    std::string body =
        input("x", "4") + labels() + node("fc1", "Linear", "x", intAttr("out_features", 6)) +
        node("a", "Tanh", "fc1") + node("b", "Sigmoid", "fc1") + node("sum", "Add", "a,b") +
        node("fc2", "Linear", "sum", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc2,label");
    harness::checkModelGradients(body);
  }

  // Weight tying (ModelDef.shared): fc2 reads and trains fc1's weight. The store
  // holds one tensor, and its gradient is the sum of both uses, against float64
  // differences of the model that reads the one value twice.
  void sharedParametersAreOneTensor() {
    const std::string body =
        input("x", "4") + labels() + node("fc1", "Linear", "x", intAttr("out_features", 4)) +
        node("t", "Tanh", "fc1") + node("fc2", "Linear", "t", intAttr("out_features", 4)) +
        node("fc3", "Linear", "fc2", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc3,label") +
        "shared { param: 'fc2.weight' with: 'fc1.weight' } ";
    ParamStore store;
    CompileOptions o;
    o.batch = 5;
    auto p = compile(model(body), o, store);
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    QVERIFY(store.find("fc1.weight"));
    QVERIFY(!store.find("fc2.weight"));
    QVERIFY(store.find("fc2.bias"));  // only the weight is shared
    harness::checkModelGradients(body);
  }

  void sharedParametersNameWhatIsWrong() {
    const std::string body = input("x", "4") + labels() +
                             node("fc1", "Linear", "x", intAttr("out_features", 4)) +
                             node("fc2", "Linear", "fc1", intAttr("out_features", 3)) +
                             node("loss", "SoftmaxCrossEntropy", "fc2,label");
    expectCompileError(body + "shared { param: 'fc2.weight' with: 'fc1.weight' } ",
                       {"fc2", "fc1.weight", "4×4", "3×4"});
    expectCompileError(body + "shared { param: 'fc9.weight' with: 'fc1.weight' } ",
                       {"model.shared", "'fc9.weight' is no parameter"});
    expectCompileError(body + "shared { param: 'fc2.weight' with: 'fc1.kernel' } ",
                       {"model.shared", "'fc1.kernel' is no parameter"});
  }

  void wholeModelGradients_data() {
    QTest::addColumn<QString>("body");
    QTest::newRow("mlp") << QString::fromStdString(mlpBody());
    auto ints = [](const std::string& key, const std::string& v) {
      return "attrs { key: '" + key + "' value { ints { values: [" + v + "] } } }";
    };
    QTest::newRow("conv, batch norm, pooling") << QString::fromStdString(
        input("x", "2,6,6") + labels() +
        node("conv", "Conv2d", "x",
             intAttr("out_channels", 4) + ints("kernel_size", "3") + ints("padding", "1")) +
        node("bn", "BatchNorm", "conv") + node("relu", "ReLU", "bn") +
        node("pool", "AvgPool2d", "relu", ints("kernel_size", "2")) +
        node("flat", "Flatten", "pool") +
        node("fc1", "Linear", "flat", intAttr("out_features", 6)) + node("tanh", "Tanh", "fc1") +
        node("fc2", "Linear", "tanh", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc2,label"));
  }
  void wholeModelGradients() {
    QFETCH(QString, body);
    harness::checkModelGradients(body.toStdString());
  }

  void concatAndReshapeModelGradients() {
    std::string body =
        input("x", "6") + labels() +
        node("r", "Reshape", "x", "attrs { key: 'shape' value { ints { values: [2, 3] } } }") +
        node("f", "Flatten", "r") + node("g", "GELU", "f") + node("c", "Concat", "f,g") +
        node("fc", "Linear", "c", intAttr("out_features", 4)) +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    harness::checkModelGradients(body);
  }

  void plannerNeverOverlapsLiveBuffers() {
    Rng rng(11);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<BufferRequest> reqs(1 + rng.below(40));
      for (auto& r : reqs) {
        r.bytes = int64_t(1 + rng.below(5000));
        r.first = int(rng.below(30));
        r.last = r.first + int(rng.below(10));
      }
      MemoryPlan plan = planMemory(reqs);
      QVERIFY(planIsValid(reqs, plan));
      QVERIFY(plan.arenaBytes <= plan.naiveBytes);
      // Independently of the planner's own notion of overlap: step by step, the buffers
      // live at that step (first <= step <= last), in offset order, each end before the
      // next begins.
      QCOMPARE(plan.offsets.size(), reqs.size());
      for (int step = 0; step < 40; ++step) {
        std::vector<std::pair<int64_t, size_t>> live;  // offset, buffer
        for (size_t i = 0; i < reqs.size(); ++i) {
          if (step < reqs[i].first || step > reqs[i].last) continue;
          QVERIFY(plan.offsets[i] >= 0 && plan.offsets[i] % 64 == 0);
          QVERIFY(plan.offsets[i] + reqs[i].bytes <= plan.arenaBytes);
          live.push_back({plan.offsets[i], i});
        }
        std::sort(live.begin(), live.end());
        for (size_t k = 1; k < live.size(); ++k) {
          const size_t before = live[k - 1].second, at = live[k].second;
          QVERIFY2(
              plan.offsets[before] + reqs[before].bytes <= plan.offsets[at],
              qPrintable(
                  QString("step %1: buffers %2 and %3 overlap").arg(step).arg(before).arg(at)));
        }
      }
    }
    // Disjoint lifetimes share memory.
    std::vector<BufferRequest> chain{{1000, 0, 1}, {1000, 2, 3}, {1000, 4, 5}};
    QCOMPARE(planMemory(chain).arenaBytes, int64_t(1024));
  }

  void compiledArenaIsSafeAndSmallerThanNaive() {
    ParamStore store;
    CompileOptions o;
    o.batch = 16;
    auto p = compile(model(mlpBody()), o, store);
    QVERIFY(p.ok());
    QVERIFY(arenaIsSafe(**p));
    QVERIFY((*p)->arenaBytes > 0);
    QVERIFY((*p)->arenaBytes < (*p)->naiveBytes);
  }

  // Attention's scratch is planned: each pool thread's blocks of scores and
  // transposed keys, O(block + T) floats, never T×T, inside the arena beside the
  // activations, disjoint from what the step reads and writes. Causal FLOPs count
  // the pairs a query sees.
  void attentionScratchIsPlanned() {
    const int t = 96, d = 8;
    std::string body = input("x", "2, " + std::to_string(t) + ", " + std::to_string(d)) +
                       node("q", "Linear", "x", intAttr("out_features", d)) +
                       node("att", "ScaledDotProductAttention", "q,q,q",
                            "attrs { key: 'causal' value { b: true } }") +
                       node("loss", "MSELoss", "att,att");
    ParamStore store;
    CompileOptions o;
    o.batch = 3;
    auto p = compile(model(body), o, store);
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    QVERIFY(arenaIsSafe(**p));
    const int64_t threads = omp_get_max_threads();
    int planned = 0;
    for (const PlanStep& step : (*p)->steps) {
      if (step.kernel != "cpu.flash_attention" && step.kernel != "cpu.flash_attention_backward")
        continue;
      ++planned;
      const bool back = step.kernel == "cpu.flash_attention_backward";
      const int64_t perThread = back ? 3 * 16 * 64 + 2 * d * t + t : 16 * 64 + 16 * d + d * t;
      QCOMPARE(step.workspaceBytes, threads * perThread * int64_t(sizeof(float)));
      QVERIFY(step.workspaceBytes < int64_t(t) * t * int64_t(sizeof(float)) * threads);
      const char* ws = static_cast<const char*>(step.workspace);
      QVERIFY(ws >= (*p)->arena.data() &&
              ws + step.workspaceBytes <= (*p)->arena.data() + (*p)->arenaBytes);
      std::vector<TensorRef> used = step.in;
      used.insert(used.end(), step.out.begin(), step.out.end());
      for (const TensorRef& r : used) {
        const char* at = static_cast<const char*>(r.data);
        const int64_t bytes = r.numel() * int64_t(dtypeSize(r.dtype));
        QVERIFY(at + bytes <= ws || at >= ws + step.workspaceBytes);
      }
    }
    QCOMPARE(planned, 2);
    ModelAnalysis a = analyzeModel(model(body), 3);
    const int64_t pairs = int64_t(3) * 2 * (t * (t + 1) / 2);
    QCOMPARE(a.nodes.at("att").flops, pairs * (2 * d + 2 * d + 5));
  }

  // Unfused, fc1's output dies at the ReLU that reads it, so the ReLU writes over it;
  // the backward's ReLUGrad likewise over the gradient it reads. The losses and
  // gradients are bit for bit those of a plan with no in-place writes.
  void elementwiseOpsWriteOverDeadInputs() {
    std::string body = mlpBody();
    std::vector<std::vector<float>> grads;
    std::vector<int> counts;
    for (bool inPlace : {true, false}) {
      ParamStore store;
      CompileOptions o;
      o.batch = 8;
      o.fuse = false;
      o.updateParams = false;
      o.inPlace = inPlace;
      auto p = compile(model(body), o, store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      QVERIFY(arenaIsSafe(**p));
      counts.push_back(int((*p)->overwrote.size()));
      if (inPlace) {
        const std::string text = (*p)->explain();
        QVERIFY2(text.find("(in place of fc1)") != std::string::npos, text.c_str());
        QVERIFY((*p)->arenaBytes < (*p)->naiveBytes);
      }
      Rng rng(5);
      std::vector<float> x(8 * 4);
      for (float& v : x) v = float(rng.uniform(-1, 1));
      std::vector<int32_t> l{0, 2, 1, 1, 0, 2, 2, 1};
      std::memcpy((*p)->input("x")->data, x.data(), x.size() * sizeof(float));
      std::memcpy((*p)->input("label")->data, l.data(), l.size() * sizeof(int32_t));
      StepContext ctx;
      ctx.step = 1;
      (*p)->run(ctx);
      grads.push_back(lossAndGradients(**p));
    }
    QVERIFY(counts[0] >= 2);
    QCOMPARE(counts[1], 0);
    QCOMPARE(grads[0], grads[1]);
  }

  // Flatten shares the loader's input (a view writes nothing), and the Dropout after
  // it, which may write over a dead activation, does not write over the input's
  // memory. Loss and gradients are bit for bit those of a plan with no sharing.
  void viewsShareTheLoadersInput() {
    const std::string body =
        input("x", "2,3,3") + labels() + node("flat", "Flatten", "x") +
        node("drop", "Dropout", "flat", "attrs { key: 'p' value { f: 0.5 } }") +
        node("fc", "Linear", "drop", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    std::vector<std::vector<float>> results;
    for (bool inPlace : {true, false}) {
      ParamStore store;
      CompileOptions o;
      o.batch = 4;
      o.updateParams = false;
      o.inPlace = inPlace;
      auto p = compile(model(body), o, store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      QVERIFY(arenaIsSafe(**p));
      const Graph& g = (*p)->graph;
      const ValueId x = g.findValue("x"), flat = g.findValue("flat");
      QCOMPARE((*p)->overwrote.count(flat), size_t(inPlace ? 1 : 0));
      if (inPlace) QCOMPARE((*p)->overwrote.at(flat), x);
      for (const auto& [out, in] : (*p)->overwrote) QVERIFY(in != flat);
      for (int64_t i = 0; i < 4 * 18; ++i) (*p)->input("x")->f32()[i] = float(i % 7) - 3.f;
      for (int64_t i = 0; i < 4; ++i) (*p)->input("label")->i32()[i] = int32_t(i % 3);
      StepContext ctx;
      ctx.step = 1;
      ctx.seed = 4;
      (*p)->run(ctx);
      results.push_back(lossAndGradients(**p));
    }
    QCOMPARE(results[0], results[1]);
  }

  // A value kept readable after the step is never overwritten, even by its last reader.
  void keptValuesAreNotOverwritten() {
    ParamStore store;
    CompileOptions o;
    o.fuse = false;
    o.training = false;
    o.keep = {"fc1"};
    auto p = compile(model(mlpBody()), o, store);
    QVERIFY(p.ok());
    ValueId fc1 = (*p)->graph.findNode("fc1")->outputs[0];
    for (const auto& [out, in] : (*p)->overwrote) QVERIFY(in != fc1);
    QVERIFY(arenaIsSafe(**p));
  }

  // The passes run in one order, each recorded with what it changed.
  void explainListsEachPass() {
    ParamStore store;
    CompileOptions o;
    o.batch = 8;
    auto p = compile(model(mlpBody()), o, store);
    QVERIFY(p.ok());
    QStringList names;
    for (const auto& pass : (*p)->passes) names << QString::fromStdString(pass.name);
    QCOMPARE(names, QStringList({"fusion", "autodiff", "optimizer", "dead code", "chains",
                                 "layouts", "in place", "kernels", "memory", "multi-tensor"}));
    const auto& fusion = (*p)->passes.front();
    QCOMPARE(fusion.nodesAfter + 1, fusion.nodesBefore);  // fc1 and act became one node
    QVERIFY2(fusion.change.find("Linear with ReLU") != std::string::npos, fusion.change.c_str());
    const auto& autodiff = (*p)->passes[1];
    QVERIFY(autodiff.nodesAfter > autodiff.nodesBefore);
    QVERIFY2(autodiff.change.find("4 gradients") != std::string::npos, autodiff.change.c_str());
    const std::string text = (*p)->explain();
    QVERIFY2(text.find("passes (nodes before -> after") != std::string::npos, text.c_str());
    QVERIFY2(text.find("multi-tensor") != std::string::npos, text.c_str());
  }

  // On the CPU a small kernel runs on the calling thread alone; a large one, and a
  // multi-tensor launch, as its kernel parallelises it.
  void smallKernelsRunAlone() {
    ParamStore store;
    CompileOptions o;
    o.batch = 8;
    auto p = compile(model(mlpBody()), o, store);
    QVERIFY(p.ok());
    int alone = 0;
    for (const PlanStep& s : (*p)->steps) {
      alone += s.alone;
      if (s.groupEnd > 0) QVERIFY(!s.alone);
    }
    QVERIFY(alone > 0);
    QVERIFY(store.device().runsAlone(1e3, 1024));
    QVERIFY(!store.device().runsAlone(1e9, 1024));
    QVERIFY(!store.device().runsAlone(1e3, int64_t(64) << 20));
    QVERIFY((*p)->explain().find("(one thread)") != std::string::npos);
  }

  // Lifetimes alone, on the forward graph: an input lives from step 0, an activation
  // from its producer to its last reader, a pinned value to the end; parameters
  // never enter the arena.
  void lifetimesSpanProducerToLastReader() {
    auto g = buildGraph(model(mlpBody()), 4);
    QVERIFY(g.ok());
    const NodeId fc1 = NodeId(g->findNode("fc1") - g->nodes.data());
    const NodeId act = NodeId(g->findNode("act") - g->nodes.data());
    const ValueId loss = g->findNode("loss")->outputs[0];
    Lifetimes t = bufferLifetimes(*g, {loss});
    const ValueId x = g->inputsByField.at("x"), h = g->nodes[size_t(fc1)].outputs[0];
    QCOMPARE(t.first[size_t(x)], 0);
    QCOMPARE(t.last[size_t(x)], int(fc1));
    QCOMPARE(t.first[size_t(h)], int(fc1));
    QCOMPARE(t.last[size_t(h)], int(act));
    QCOMPARE(t.last[size_t(loss)], int(g->nodes.size()) - 1);
    const ValueId w = g->findValue("fc1.weight");
    QVERIFY(!livesInArena(g->values[size_t(w)]));
  }

  // Kernel choice alone: the first kernel that accepts, or the reference.
  void kernelChoiceTakesTheFirstThatAccepts() {
    auto g = buildGraph(model(mlpBody()), 4);
    QVERIFY(g.ok());
    KernelSig context;
    context.device = &cpuDevice();
    for (bool reference : {false, true}) {
      auto chosen = chooseKernels(*g, KernelRegistry::instance(), context, reference);
      QVERIFY(chosen.ok());
      for (const ChosenKernel& c : *chosen)
        if (g->nodes[size_t(c.step.node)].name == "fc1")
          QCOMPARE(QString::fromStdString(c.step.kernel),
                   reference ? QString("reference.linear") : QString("onednn.sgemm+bias"));
    }
  }

  void plansAreDeterministic() {
    ParamStore a, b;
    auto p = compile(model(mlpBody()), CompileOptions{}, a);
    auto q = compile(model(mlpBody()), CompileOptions{}, b);
    QVERIFY(p.ok() && q.ok());
    // Offsets are printed relative to each arena, so the texts compare plans.
    QCOMPARE(QString::fromStdString((*p)->explain()), QString::fromStdString((*q)->explain()));
    QCOMPARE(a.exportParams()[0].data, b.exportParams()[0].data);  // seeded initialisation
  }

  void explainNamesKernelsAndMemory() {
    ParamStore store;
    auto p = compile(model(mlpBody()), CompileOptions{}, store);
    QVERIFY(p.ok());
    std::string text = (*p)->explain();
    QVERIFY(text.find("onednn.sgemm") != std::string::npos);
    QVERIFY(text.find("fused: fc1 + act") != std::string::npos);
    QVERIFY(text.find("memory: arena") != std::string::npos);
  }

  void optimizerStateIsNamedLikePyTorch() {
    ParamStore store;
    CompileOptions o;
    o.optimizer.set_kind(proto::Optimizer::SGD);
    o.optimizer.set_momentum(0.9);
    QVERIFY(compile(model(mlpBody()), o, store).ok());
    QVERIFY(store.find("fc1.weight.momentum_buffer"));
    ParamStore adam;
    QVERIFY(compile(model(mlpBody()), CompileOptions{}, adam).ok());
    QVERIFY(adam.find("fc2.bias.exp_avg_sq"));
    QCOMPARE(adam.find("fc1.weight")->desc.shape, (Shape{8, 4}));  // [out, in]
  }

  // The updates are one multi-tensor launch, which moves every parameter as the
  // update rule applied tensor by tensor does.
  void updatesAreOneMultiTensorLaunch() {
    for (auto kind : {proto::Optimizer::SGD, proto::Optimizer::ADAM}) {
      ParamStore store;
      CompileOptions o;
      o.optimizer.set_kind(kind);
      o.optimizer.set_momentum(kind == proto::Optimizer::SGD ? 0.9 : 0.0);
      auto p = compile(model(mlpBody()), o, store);
      QVERIFY(p.ok());
      const Program& prog = **p;
      size_t launches = 0, updates = 0;
      for (size_t i = prog.updatesBegin; i < prog.steps.size(); ++i) {
        updates += 1;
        launches += prog.steps[i].fn ? 1 : 0;
      }
      QCOMPARE(updates, size_t(4));  // two Linear layers' weights and biases
      QCOMPARE(launches, size_t(1));
      QCOMPARE(prog.steps[prog.updatesBegin].groupEnd, prog.steps.size());
      std::string text = prog.explain();
      QVERIFY2(text.find("one multi-tensor launch for steps") != std::string::npos, text.c_str());
      QVERIFY2(text.find("in the multi-tensor launch above") != std::string::npos, text.c_str());
      // One step, against the rule applied on the host to each parameter's gradient.
      std::vector<std::vector<float>> before;
      for (const auto& e : store.entries()) before.push_back(ParamStore::read(*e));
      Rng rng(4);
      std::vector<float> x(32 * 4);
      for (float& v : x) v = float(rng.uniform(-1, 1));
      std::vector<int32_t> labels(32);
      for (int32_t& l : labels) l = int32_t(rng.next() % 3);
      std::memcpy(prog.input("x")->data, x.data(), x.size() * sizeof(float));
      std::memcpy(prog.input("label")->data, labels.data(), labels.size() * sizeof(int32_t));
      StepContext ctx{1, 0.1, 0, true};
      prog.run(ctx, 0, prog.updatesBegin);
      std::map<std::string, std::vector<float>> grads;
      for (size_t i = prog.updatesBegin; i < prog.steps.size(); ++i) {
        const Node& n = prog.graph.nodes[prog.steps[i].node];
        grads[n.origin] = prog.read(n.inputs[1]);
      }
      prog.run(ctx, prog.updatesBegin, prog.steps.size());
      size_t k = 0;
      for (const auto& e : store.entries()) {
        std::vector<float> expected = before[k++];
        if (e->kind != ValueKind::Param) continue;
        const std::vector<float>& g = grads.at(e->name);
        if (kind == proto::Optimizer::SGD) {
          fn::SgdStep step{0.1f, 0.9f, 0.f, false};
          for (size_t i = 0; i < expected.size(); ++i) {
            float buf = 0;
            step(expected[i], g[i], buf);
          }
        } else {
          fn::AdamStep step = fn::AdamStep::make(0.9f, 0.999f, 1e-8f, 0.f, false, 0.1, 1);
          for (size_t i = 0; i < expected.size(); ++i) {
            float m = 0, v = 0;
            step(expected[i], g[i], m, v);
          }
        }
        QVERIFY2(ParamStore::read(*e) == expected, e->name.c_str());
      }
    }
  }
};

QTEST_APPLESS_MAIN(TestCompiler)
#include "tst_compiler.moc"
