// SBP: the notation, the shape each rank holds (a split that does not divide is named),
// the collective and bytes that move a tensor from one SBP to another, and, for every
// op case of the harness, that every signature its op declares is right: each rank
// runs the float64 reference on its local parts (split slices, broadcast wholes,
// random partial summands) and the parts combined by the output's SBP equal the
// reference on the whole, at 2 and 4 ranks wherever the shapes divide.
#include <QtTest>

#include "engine/compiler/sbp_plan.h"
#include "engine/graph/graph.h"
#include "engine/graph/sbp.h"
#include "model_text.h"
#include "op_cases.h"

using namespace netloom;
using harness::OpCase;
using harness::RefArgs;
using harness::Vec;

namespace {

// Strides of `shape` around `axis`: outer × axis × inner.
struct Around {
  int64_t outer = 1, len = 1, inner = 1;
  Around(const Shape& s, int axis) {
    for (int i = 0; i < int(s.size()); ++i)
      (i < axis ? outer : i == axis ? len : inner) *= s[size_t(i)];
  }
};

// Rank r's part of `full` under `sbp`; a partial summand is random but for the last
// rank's, which makes the parts sum to the whole.
Vec partOf(const Vec& full, const Shape& shape, const Sbp& sbp, int r, int ranks, Rng& rng,
           std::vector<Vec>& partials) {
  if (sbp.kind == Sbp::Kind::Broadcast) return full;
  if (sbp.kind == Sbp::Kind::Partial) {
    if (r == 0) {
      partials.assign(size_t(ranks), Vec(full.size()));
      Vec rest = full;
      for (int k = 0; k + 1 < ranks; ++k)
        for (size_t i = 0; i < full.size(); ++i)
          rest[i] -= partials[size_t(k)][i] = rng.uniform(-1, 1);
      partials[size_t(ranks - 1)] = rest;
    }
    return partials[size_t(r)];
  }
  const Around a(shape, sbp.axis);
  const int64_t n = a.len / ranks;
  Vec out;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = r * n; i < (r + 1) * n; ++i)
      for (int64_t k = 0; k < a.inner; ++k)
        out.push_back(full[size_t((o * a.len + i) * a.inner + k)]);
  return out;
}

// The whole from the ranks' parts under `sbp` (broadcast parts must agree).
Vec combine(const std::vector<Vec>& parts, const Shape& shape, const Sbp& sbp, bool& agree) {
  if (sbp.kind == Sbp::Kind::Broadcast) {
    for (const Vec& p : parts)
      for (size_t i = 0; i < p.size(); ++i) agree = agree && std::fabs(p[i] - parts[0][i]) < 1e-9;
    return parts[0];
  }
  if (sbp.kind == Sbp::Kind::Partial) {
    Vec sum(parts[0].size(), 0.0);
    for (const Vec& p : parts)
      for (size_t i = 0; i < p.size(); ++i) sum[i] += p[i];
    return sum;
  }
  const Around a(shape, sbp.axis);
  const int64_t n = a.len / int64_t(parts.size());
  Vec out(size_t(numel(shape)));
  for (size_t r = 0; r < parts.size(); ++r)
    for (int64_t o = 0; o < a.outer; ++o)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < a.inner; ++k)
          out[size_t((o * a.len + int64_t(r) * n + i) * a.inner + k)] =
              parts[r][size_t((o * n + i) * a.inner + k)];
  return out;
}

struct Checked {
  int signatures = 0, ops = 0;
  std::string failures;
};

// Every declared signature of case `c` at `ranks` ranks, where its shapes divide.
void checkCase(const std::string& name, const OpCase& c, int ranks, Checked& done) {
  const OpDef* op = OpRegistry::instance().find(c.op);
  if (!op || (!op->sbp && !op->elementwise)) return;
  auto g = buildGraph(harness::caseModel(c), c.inputs.empty() ? 1 : c.inputs[0].shape[0]);
  if (!g) return;
  const Node* node = g->findNode("op");
  SbpCtx ctx{node->attrs, {}, {}, {}};
  RefArgs whole;
  Rng rng(11);
  for (int k = 0; k < node->numDataInputs(); ++k) {
    const Shape& s = g->values[node->inputs[size_t(k)]].desc.shape;
    ctx.in.push_back(s);
    Vec v(size_t(numel(s)));
    for (double& x : v)
      x = c.inputs[size_t(k)].fill == harness::Fill::Labels
              ? double(rng.below(uint64_t(c.inputs[size_t(k)].classes)))
              : rng.uniform(-1, 1);
    whole.in.push_back(v);
    whole.isLabels.push_back(c.inputs[size_t(k)].fill == harness::Fill::Labels);
    whole.inShapes.push_back(s);
  }
  for (size_t k = size_t(node->numDataInputs()); k < node->inputs.size(); ++k) {
    const Shape& s = g->values[node->inputs[k]].desc.shape;
    ctx.params.push_back(s);
    Vec v(size_t(numel(s)));
    for (double& x : v) x = rng.uniform(-0.5, 0.5);
    whole.params.push_back(v);
    whole.paramShapes.push_back(s);
  }
  for (ValueId v : node->outputs) ctx.out.push_back(g->values[v].desc.shape);
  whole.outShape = ctx.out[0];
  const Vec want = c.reference(whole);
  ++done.ops;
  for (const SbpSignature& sig : sbpSignatures(*op, ctx)) {
    bool divides = localShape(ctx.out[0], sig.out[0], ranks).ok();
    for (size_t k = 0; k < sig.in.size(); ++k)
      divides = divides && localShape(ctx.in[k], sig.in[k], ranks).ok();
    for (size_t k = 0; k < sig.params.size(); ++k)
      divides = divides && localShape(ctx.params[k], sig.params[k], ranks).ok();
    // Labels (ids) are never summands.
    for (size_t k = 0; k < sig.in.size(); ++k)
      divides = divides && !(whole.isLabels[k] && sig.in[k].kind == Sbp::Kind::Partial);
    if (!divides) continue;
    std::vector<std::vector<Vec>> inPartials(sig.in.size()), paramPartials(sig.params.size());
    std::vector<Vec> outs;
    for (int r = 0; r < ranks; ++r) {
      RefArgs local = whole;
      for (size_t k = 0; k < sig.in.size(); ++k) {
        local.in[k] = partOf(whole.in[k], ctx.in[k], sig.in[k], r, ranks, rng, inPartials[k]);
        local.inShapes[k] = *localShape(ctx.in[k], sig.in[k], ranks);
      }
      for (size_t k = 0; k < sig.params.size(); ++k) {
        local.params[k] =
            partOf(whole.params[k], ctx.params[k], sig.params[k], r, ranks, rng, paramPartials[k]);
        local.paramShapes[k] = *localShape(ctx.params[k], sig.params[k], ranks);
      }
      local.outShape = *localShape(ctx.out[0], sig.out[0], ranks);
      Attrs attrs = node->attrs;  // the part's, as the sbp pass sets them
      if (op->localAttrs) op->localAttrs(attrs, local.paramShapes, {local.outShape}, r);
      local.local = &attrs;
      outs.push_back(c.reference(local));
    }
    bool agree = true;
    const Vec got = combine(outs, ctx.out[0], sig.out[0], agree);
    double worst = agree ? 0 : 1;
    for (size_t i = 0; i < want.size() && i < got.size(); ++i)
      worst = std::max(worst, std::fabs(got[i] - want[i]) / (1 + std::fabs(want[i])));
    if (got.size() != want.size() || worst > 1e-9)
      done.failures += name + " at " + std::to_string(ranks) + " ranks, " + sig.str() +
                       ": off by " + std::to_string(worst) + "\n";
    ++done.signatures;
  }
}

}  // namespace

class TestSbp : public QObject {
  Q_OBJECT

 private slots:
  void notation() {
    for (const char* text : {"S(0)", "S(3)", "B", "P"}) {
      auto s = parseSbp(text);
      QVERIFY(s.ok());
      QCOMPARE(s->str(), std::string(text));
    }
    auto bad = parseSbp("S(x)");
    QVERIFY(!bad.ok());
    QVERIFY(bad.error().message.find("'S(x)' is no SBP") != std::string::npos);
  }

  void localShapes() {
    QCOMPARE(*localShape({64, 512}, Sbp::split(1), 2), (Shape{64, 256}));
    QCOMPARE(*localShape({64, 512}, Sbp::partial(), 2), (Shape{64, 512}));
    QCOMPARE(describeLocal({64, 512}, Sbp::split(1), 2), std::string("S(1) 64×(512/2)"));
    auto odd = localShape({64, 510}, Sbp::split(1), 4);
    QVERIFY(!odd.ok());
    QCOMPARE(odd.error().message,
             std::string("S(1): axis 1 of 64×510 (510) does not divide by 4 ranks"));
    QVERIFY(!localShape({64}, Sbp::split(1), 2).ok());
  }

  void boxingMovesWhatItMust() {
    const TensorDesc t{{64, 512}, DType::F32, {}};  // 131,072 bytes
    auto check = [&](Sbp from, Sbp to, Boxing::Kind kind, int64_t bytes) {
      Boxing b = boxing(from, to, t, 4);
      QCOMPARE(b.str(), (Boxing{kind, 0}.str()));
      QCOMPARE(b.bytesPerRank, bytes);
    };
    check(Sbp::split(0), Sbp::broadcast(), Boxing::Kind::AllGather, 98304);
    check(Sbp::partial(), Sbp::broadcast(), Boxing::Kind::AllReduce, 196608);
    check(Sbp::partial(), Sbp::split(1), Boxing::Kind::ReduceScatter, 98304);
    check(Sbp::split(0), Sbp::split(1), Boxing::Kind::AllToAll, 24576);
    check(Sbp::broadcast(), Sbp::split(0), Boxing::Kind::Local, 0);
    check(Sbp::split(1), Sbp::split(1), Boxing::Kind::None, 0);
    QCOMPARE(boxing(Sbp::split(0), Sbp::broadcast(), t, 1).kind, Boxing::Kind::None);
  }

  // The ops that declare signatures (Linear's data, column and row parallelism,
  // attention by batch and by heads, norms and softmax outside their axes, element-wise
  // ops, Add's partial sums) compute, spread over the ranks, what they compute whole.
  void everySignatureComputesTheWhole() {
    Checked done;
    for (const auto& [name, c] : harness::allCases())
      for (int ranks : {2, 4}) checkCase(name, c, ranks, done);
    qInfo("%d op cases, %d signatures checked", done.ops, done.signatures);
    QVERIFY2(done.failures.empty(), done.failures.c_str());
    QVERIFY(done.signatures > 100);
    const OpDef* linear = OpRegistry::instance().find("Linear");
    Attrs a;
    a.set("bias", true);
    auto sigs = sbpSignatures(*linear, SbpCtx{a, {{8, 6}}, {{4, 6}, {4}}, {{8, 4}}});
    std::vector<std::string> texts;
    for (const auto& s : sigs) texts.push_back(s.str());
    QVERIFY(std::find(texts.begin(), texts.end(), "S(0) | B, B -> S(0)") != texts.end());
    QVERIFY(std::find(texts.begin(), texts.end(), "B | S(0), S(0) -> S(1)") != texts.end());
    QVERIFY(std::find(texts.begin(), texts.end(), "S(1) | S(1), P -> P") != texts.end());
  }

  // The plan of an MLP: data parallel by default, nothing moved; column then row
  // parallel where hinted (Megatron's pair), the input gathered for the first and the
  // partial sum reduce-scattered back to the batch split for the tanh after it; hints
  // that name nothing, or what does not divide, are refused naming the node.
  void plansMoveTheFewestBytes() {
    using namespace testutil;
    const std::string body =
        input("x", "8") + labels() + node("fc1", "Linear", "x", intAttr("out_features", 16)) +
        node("act1", "Tanh", "fc1") + node("fc2", "Linear", "act1", intAttr("out_features", 16)) +
        node("act2", "Tanh", "fc2") + node("out", "Linear", "act2", intAttr("out_features", 4)) +
        node("loss", "SoftmaxCrossEntropy", "out,label");
    auto g = buildGraph(model(body), 32);
    QVERIFY2(g.ok(), g.ok() ? "" : g.error().message.c_str());
    auto data = planSbp(*g, 2);
    QVERIFY2(data.ok(), data.ok() ? "" : data.error().message.c_str());
    QCOMPARE(data->bytesPerStep(), int64_t(0));
    QCOMPARE(data->sbp.at(g->findNode("fc2")->outputs[0]).str(), std::string("S(0)"));
    QCOMPARE(data->sbp.at(g->findNode("fc2")->inputs[1]).str(), std::string("B"));
    // Data parallel sums every gradient: 8·16+16 + 16·16+16 + 16·4+4 floats, all-reduced.
    const int64_t params = (8 * 16 + 16 + 16 * 16 + 16 + 16 * 4 + 4) * 4;
    QCOMPARE(data->gradientBytes(*g), 2 * params / 2);
    QCOMPARE(gradientSbp(Sbp::broadcast()).str(), std::string("P"));
    QCOMPARE(gradientSbp(Sbp::split(1)).str(), std::string("S(1)"));

    auto megatron =
        planSbp(*g, 2, {{"fc1", "B | S(0), S(0) -> S(1)"}, {"fc2", "S(1) | S(1), P -> P"}});
    QVERIFY2(megatron.ok(), megatron.ok() ? "" : megatron.error().message.c_str());
    QCOMPARE(megatron->sbp.at(g->findNode("act1")->outputs[0]).str(), std::string("S(1)"));
    QCOMPARE(megatron->sbp.at(g->findNode("fc2")->inputs[1]).str(), std::string("S(1)"));
    QCOMPARE(int(megatron->boxings.size()), 2);
    QCOMPARE(megatron->boxings[0].box.str(), std::string("all-gather"));
    QCOMPARE(megatron->boxings[0].box.bytesPerRank, int64_t(32 * 8 * 4 / 2));
    QCOMPARE(megatron->boxings[1].box.str(), std::string("reduce-scatter"));
    QCOMPARE(megatron->boxings[1].box.bytesPerRank, int64_t(32 * 16 * 4 / 2));
    // fc1's weight and bias and fc2's weight are split, so are their gradients, and
    // nothing is summed of them; fc2's partial bias has a broadcast gradient; only the
    // output layer, broadcast, has partial gradients to sum.
    const int64_t summed = (16 * 4 + 4) * 4;  // the output layer, broadcast
    QCOMPARE(megatron->gradientBytes(*g), 2 * summed / 2);
    // What a rank holds: the split layers' weights halved, the output layer's whole.
    const RankMemory whole = data->memory(*g, 2), split = megatron->memory(*g, 2);
    QCOMPARE(whole.weights, params);
    QCOMPARE(whole.optimizerState, 2 * params);
    QCOMPARE(split.weights, ((8 * 16 + 16 + 16 * 16) / 2 + 16 + 16 * 4 + 4) * 4);
    QCOMPARE(split.boxing, int64_t(32 * 16 * 4));    // fc2's partial output, whole
    QVERIFY(whole.activations < split.activations);  // fc2's output is held whole
    const std::string text = megatron->explain(*g);
    QVERIFY2(text.find("each rank holds: weights " + std::to_string(split.weights) + ",") !=
                 std::string::npos,
             text.c_str());
    QVERIFY2(text.find("fc1: S(1) 32×(16/2)") != std::string::npos, text.c_str());
    // Its time on a link: a message's latency for each of the two collectives' one
    // step at 2 ranks, and the bytes over the bandwidth.
    SbpPlanOptions timed{{{"fc1", "B | S(0), S(0) -> S(1)"}, {"fc2", "S(1) | S(1), P -> P"}},
                         false,
                         false,
                         {},
                         LinkCost{1e-3, 1e6, true}};
    auto onLink = planSbp(*g, 2, timed);
    QVERIFY(onLink.ok());
    QCOMPARE(onLink->boxings[0].box.messages + onLink->boxings[1].box.messages, 2);
    QCOMPARE(onLink->secondsPerStep(), 2e-3 + double(megatron->bytesPerStep()) / 1e6);
    const std::string timedText = onLink->explain(*g);
    QVERIFY2(timedText.find("1000.0 µs a message, 0.00 GB/s, measured") != std::string::npos,
             timedText.c_str());

    auto unknown = planSbp(*g, 2, std::vector<SbpHint>{{"fc9", "B"}});
    QVERIFY(!unknown.ok() && unknown.error().message.find("'fc9'") != std::string::npos);
    auto wrong = planSbp(*g, 2, std::vector<SbpHint>{{"act1", "P -> P"}});
    QVERIFY(!wrong.ok());
    QVERIFY2(wrong.error().message.find(
                 "node 'act1': has no signature 'P -> P'; it takes: B -> B") != std::string::npos,
             wrong.error().message.c_str());
    auto odd = planSbp(*g, 3, std::vector<SbpHint>{{"fc1", "B | S(0), S(0) -> S(1)"}});
    QVERIFY(!odd.ok());
    QVERIFY2(
        odd.error().message.find("node 'fc1': S(1): axis 1 of 32×16 (16) does not divide by 3") !=
            std::string::npos,
        odd.error().message.c_str());
  }

  // Between signatures that cost alike, the planner takes the one whose output owes
  // nothing later: after a column-parallel layer a Flatten keeps the split (S(1)), where
  // a partial output, as free now, would cost a reduce-scatter at the next reader.
  void tiesGoToWhatOwesNothing() {
    using namespace testutil;
    const std::string body = input("x", "8") + labels() +
                             node("fc1", "Linear", "x", intAttr("out_features", 16)) +
                             node("flat", "Flatten", "fc1") + node("act", "Tanh", "flat") +
                             node("out", "Linear", "act", intAttr("out_features", 4)) +
                             node("loss", "SoftmaxCrossEntropy", "out,label");
    auto g = buildGraph(model(body), 8);
    QVERIFY2(g.ok(), g.ok() ? "" : g.error().message.c_str());
    auto plan = planSbp(*g, 2, std::vector<SbpHint>{{"fc1", "B | S(0), S(0) -> S(1)"}});
    QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
    const Node* flat = g->findNode("flat");
    QCOMPARE(QString::fromStdString(plan->signature.at(NodeId(flat - g->nodes.data())).str()),
             QString("S(1) -> S(1)"));
    QCOMPARE(plan->sbp.at(g->findNode("act")->outputs[0]).str(), std::string("S(1)"));
  }

  // Tensor parallelism splits an embedding by its vocabulary (Megatron's): every rank
  // reads all the ids (gathered from the batch split) in its half of the table, and
  // its output, a partial sum, is reduce-scattered back to the batch split for the
  // norm after it. The table's gradient is split alike, so nothing of it is summed.
  void embeddingsSplitByTheVocabulary() {
    using namespace testutil;
    const std::string body =
        input("ids", "6", "x", "int32") + labels() +
        node("wte", "Embedding", "ids",
             intAttr("num_embeddings", 10) + " " + intAttr("embedding_dim", 4)) +
        node("norm", "RMSNorm", "wte") + node("flat", "Flatten", "norm") +
        node("out", "Linear", "flat", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "out,label");
    auto g = buildGraph(model(body), 8);
    QVERIFY2(g.ok(), g.ok() ? "" : g.error().message.c_str());
    auto plan = planSbp(*g, 2, SbpPlanOptions{{}, true, false, {}, {}});
    QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
    const Node* wte = g->findNode("wte");
    QCOMPARE(plan->signature.at(NodeId(wte - g->nodes.data())).str(), std::string("B | S(0) -> P"));
    QCOMPARE(plan->sbp.at(wte->inputs[1]).str(), std::string("S(0)"));
    QCOMPARE(gradientSbp(plan->sbp.at(wte->inputs[1])).str(), std::string("S(0)"));
    std::vector<std::string> moved;
    for (const SbpBoxingStep& b : plan->boxings)
      if (g->nodes[size_t(b.reader)].name == "wte" || g->nodes[size_t(b.reader)].name == "norm")
        moved.push_back(g->values[b.value].name + " " + b.box.str());
    std::string all;
    for (const std::string& m : moved) all += m + "; ";
    QCOMPARE(QString::fromStdString(all), QString("ids all-gather; wte reduce-scatter; "));
    // A vocabulary that does not divide keeps the table whole.
    auto odd = planSbp(*g, 3, SbpPlanOptions{{}, true, false, {}, {}});
    QVERIFY(odd.ok());
    QVERIFY(plan->sbp.at(wte->inputs[1]).isSplit() && !odd->sbp.at(wte->inputs[1]).isSplit());
  }
};

QTEST_GUILESS_MAIN(TestSbp)
#include "tst_sbp.moc"
