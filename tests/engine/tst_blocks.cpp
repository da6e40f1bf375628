// Blocks: instances inline into plain nodes named "instance/node", with params
// substituted, nested blocks and pass-through ports resolved; a model with
// instances trains exactly like the same model written out by hand; mistakes in
// blocks are problems named after the instance; the analysis folds an instance's
// shapes and costs back onto it.
#include <QtTest>

#include "engine/graph/blocks.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

std::string convAttrs(const std::string& out) {
  return "attrs { key: 'out_channels' value { " + out +
         " } } attrs { key: 'kernel_size' value { ints { values: [3] } } } attrs { key: 'padding' "
         "value { ints { values: [1] } } } attrs { key: 'bias' value { b: false } }";
}

// Conv-BN-ReLU with a param, and a block that nests it twice and passes its input
// through as a second output.
std::string blocks() {
  return "blocks { name: 'CBR' params { key: 'ch' value { i: 8 } } " + node("x", "BlockInput", "") +
         node("conv", "Conv2d", "x", convAttrs("s: '$ch'")) + node("bn", "BatchNorm", "conv") +
         node("relu", "ReLU", "bn") +
         "outputs: 'relu' } "
         "blocks { name: 'Pair' params { key: 'width' value { i: 4 } } " +
         node("in", "BlockInput", "") +
         node("a", "CBR", "in", "attrs { key: 'ch' value { s: '$width' } }") +
         node("b", "CBR", "a", "attrs { key: 'ch' value { s: '$width' } }") +
         "outputs: 'b' outputs: 'in' } ";
}

std::string head(const std::string& from) {
  return node("gap", "GlobalAvgPool2d", from) +
         node("fc", "Linear", "gap", intAttr("out_features", 10)) +
         node("loss", "SoftmaxCrossEntropy", "fc,label");
}

std::string withInstances() {
  return input("img", "3, 8, 8") + labels() + node("p", "Pair", "img", intAttr("width", 16)) +
         node("skip", "Conv2d", "p:1", convAttrs("i: 16")) + node("sum", "Add", "p,skip") +
         head("sum") + blocks();
}

// The same network written out by hand, as inlining must produce it.
std::string byHand() {
  auto cbr = [](const std::string& prefix, const std::string& in) {
    return node(prefix + "/conv", "Conv2d", in, convAttrs("i: 16")) +
           node(prefix + "/bn", "BatchNorm", prefix + "/conv") +
           node(prefix + "/relu", "ReLU", prefix + "/bn");
  };
  return input("img", "3, 8, 8") + labels() + cbr("p/a", "img") + cbr("p/b", "p/a/relu") +
         node("skip", "Conv2d", "img", convAttrs("i: 16")) + node("sum", "Add", "p/b/relu,skip") +
         head("sum");
}

std::vector<double> trainLosses(const proto::ModelDef& m, int steps) {
  ParamStore store;
  CompileOptions o;
  o.batch = 4;
  o.seed = 9;
  auto p = compile(m, o, store);
  if (!p) qWarning("%s", p.error().message.c_str());
  if (!p) return {};
  std::vector<double> out;
  StepContext ctx;
  ctx.lr = 1e-2;
  for (int s = 1; s <= steps; ++s) {
    Rng rng{uint64_t(s)};
    const TensorRef* x = (*p)->input("x");
    for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = float(rng.uniform(-1, 1));
    const TensorRef* y = (*p)->input("label");
    for (int64_t i = 0; i < y->numel(); ++i) y->i32()[i] = int32_t(i % 10);
    ctx.step = s;
    (*p)->run(ctx);
    out.push_back((*p)->scalar((*p)->loss));
  }
  return out;
}

std::string problemsText(const ModelAnalysis& a) {
  std::string s;
  for (const ModelProblem& p : a.problems) s += "[" + p.node + "] " + p.message + "\n";
  return s;
}

}  // namespace

class TestBlocks : public QObject {
  Q_OBJECT

 private slots:
  void inliningNamesNodesByInstancePath() {
    auto flat = inlineBlocks(model(withInstances()));
    QVERIFY2(flat.ok(), flat.ok() ? "" : flat.error().message.c_str());
    std::map<std::string, const proto::NodeDef*> byName;
    for (const proto::NodeDef& n : flat->nodes()) byName[n.name()] = &n;
    QVERIFY(byName.count("p/a/conv") && byName.count("p/b/relu"));
    QVERIFY(!byName.count("p") && !byName.count("p/in"));  // no instance or port nodes
    QCOMPARE(byName["p/a/conv"]->inputs(0), std::string("img"));
    QCOMPARE(byName["p/b/conv"]->inputs(0), std::string("p/a/relu"));
    QCOMPARE(byName["skip"]->inputs(0), std::string("img"));  // the pass-through port
    QCOMPARE(byName["sum"]->inputs(0), std::string("p/b/relu"));
    // The instance's width (16) reaches both nested convolutions through '$width'.
    QCOMPARE(byName["p/a/conv"]->attrs().at("out_channels").i(), int64_t(16));
    QCOMPARE(byName["p/b/conv"]->attrs().at("out_channels").i(), int64_t(16));
  }

  void instancesTrainLikeTheModelWrittenOut() {
    std::vector<double> a = trainLosses(model(withInstances()), 3);
    std::vector<double> b = trainLosses(model(byHand()), 3);
    QCOMPARE(int(a.size()), 3);
    QCOMPARE(a, b);  // the same nodes, names, seeds: the same numbers
  }

  void analysisFoldsInstancesBack() {
    ModelAnalysis a = analyzeModel(model(withInstances()), 4);
    QVERIFY2(a.ok(), problemsText(a).c_str());
    const NodeAnalysis& p = a.nodes.at("p");
    QVERIFY(p.known);
    QCOMPARE(int(p.outputs.size()), 2);
    QCOMPARE(p.outputs[0].shape, (Shape{4, 16, 8, 8}));
    QCOMPARE(p.outputs[1].shape, (Shape{4, 3, 8, 8}));
    // Two 3×3 convolutions (3→16, 16→16, no bias) and two BatchNorms (16 + 16 each).
    QCOMPARE(p.params, int64_t(16 * 3 * 9 + 16 * 16 * 9 + 2 * 32));
    QVERIFY(p.flops > 0);
  }

  void mistakesNameTheInstance_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("node");
    QTest::addColumn<QString>("mentions");
    std::string pre = input("img", "3, 8, 8") + labels();
    QTest::addRow("unknown param")
        << QString::fromStdString(pre + node("p", "Pair", "img", intAttr("depth", 2)) + head("p") +
                                  blocks())
        << "p"
        << "has no param 'depth'";
    QTest::addRow("wrong input count")
        << QString::fromStdString(pre + node("p", "Pair", "img,img") + head("p") + blocks()) << "p"
        << "takes 1 input(s), the instance has 2";
    QTest::addRow("undefined $ref")
        << QString::fromStdString(pre + node("c", "Bad", "img") + head("c") +
                                  "blocks { name: 'Bad' " + node("x", "BlockInput", "") +
                                  node("conv", "Conv2d", "x", convAttrs("s: '$nope'")) +
                                  "outputs: 'conv' }")
        << "c"
        << "'$nope', which is not a param";
    QTest::addRow("recursion") << QString::fromStdString(
                                      pre + node("r", "A", "img") + head("r") +
                                      "blocks { name: 'A' " + node("x", "BlockInput", "") +
                                      node("inner", "B", "x") +
                                      "outputs: 'inner' } blocks { name: 'B' " +
                                      node("x", "BlockInput", "") + node("again", "A", "x") +
                                      "outputs: 'again' }")
                               << "r"
                               << "contains an instance of itself";
    QTest::addRow("inner shape error")
        << QString::fromStdString(pre + node("p", "CBR", "img") + node("fc", "Linear", "p", "") +
                                  node("loss", "SoftmaxCrossEntropy", "fc,label") + blocks())
        << "fc"
        << "'fc'";
    QTest::addRow("port outside a block")
        << QString::fromStdString(pre + node("x2", "BlockInput", "") + head("img") + blocks())
        << "x2"
        << "BlockInput belongs inside a block definition";
  }
  void mistakesNameTheInstance() {
    QFETCH(QString, body);
    QFETCH(QString, node);
    QFETCH(QString, mentions);
    ModelAnalysis a = analyzeModel(model(body.toStdString()), 4);
    bool found = false;
    for (const ModelProblem& p : a.problems)
      found = found || (p.node == node.toStdString() &&
                        p.message.find(mentions.toStdString()) != std::string::npos);
    QVERIFY2(found, problemsText(a).c_str());
    expectCompileError(body.toStdString(), {mentions});
  }

  void problemInsideABlockBadgesTheInstance() {
    // 'ch' 0 is refused by Conv2d inside the block: the instance carries it.
    std::string body = input("img", "3, 8, 8") + labels() +
                       node("p", "CBR", "img", intAttr("ch", 0)) + head("p") + blocks();
    ModelAnalysis a = analyzeModel(model(body), 4);
    QVERIFY(!a.ok());
    QCOMPARE(a.problems.front().node, std::string("p"));
    QVERIFY2(a.problems.front().message.find("in block instance 'p'") != std::string::npos,
             problemsText(a).c_str());
    QVERIFY(a.nodes.at("p").outputs.empty());
  }

  void blockNamedLikeAnOpIsRefused() {
    std::string body = input("img", "3, 8, 8") + labels() + node("r", "ReLU", "img") + head("r") +
                       "blocks { name: 'ReLU' " + node("x", "BlockInput", "") + "outputs: 'x' }";
    expectCompileError(body, {"block 'ReLU' has the name of an op"});
  }

  // A node with "when" is there only where the bool param holds; left out, its first
  // input passes through: the Transformer block's norms before or after its sublayers.
  void nodesWhenAParamHolds() {
    const std::string block =
        "blocks { name: 'Norm' params { key: 'first' value { b: true } } "
        "nodes { name: 'x' op: 'BlockInput' } "
        "nodes { name: 'pre' op: 'LayerNorm' inputs: 'x' attrs { key: 'when' value { s: '$first' "
        "} } } nodes { name: 'fc' op: 'Linear' inputs: 'pre' attrs { key: 'out_features' value { "
        "i: 4 } } } nodes { name: 'post' op: 'LayerNorm' inputs: 'fc' attrs { key: 'when' value { "
        "s: '!$first' } } } outputs: 'post' } ";
    auto flat = [&](const std::string& first) {
      return inlineBlocks(model(input("x", "4") + "nodes { name: 'b' op: 'Norm' inputs: 'x' " +
                                first + " } " + block));
    };
    auto pre = flat("");
    QVERIFY2(pre.ok(), pre.ok() ? "" : pre.error().message.c_str());
    QStringList names;
    for (const auto& n : pre->nodes()) names << QString::fromStdString(n.name());
    QCOMPARE(names, QStringList({"x", "b/pre", "b/fc"}));
    QCOMPARE(pre->nodes(1).attrs().count("when"), size_t(0));
    auto post = flat("attrs { key: 'first' value { b: false } }");
    QVERIFY(post.ok());
    names.clear();
    for (const auto& n : post->nodes()) names << QString::fromStdString(n.name());
    QCOMPARE(names, QStringList({"x", "b/fc", "b/post"}));
    QCOMPARE(post->nodes(1).inputs(0), std::string("x"));  // 'pre' passed its input on
    auto bad = flat("attrs { key: 'first' value { i: 2 } }");
    QVERIFY(!bad.ok());
    QVERIFY2(bad.error().message.find("'when' must name a bool param") != std::string::npos,
             bad.error().message.c_str());
  }

  // Every library block parses and analyses cleanly with its defaults, beside the
  // others (GPT instances TransformerBlock): on a 16-channel image, the sequence
  // blocks on 12 tokens of width 128, GPT on 12 token ids.
  void libraryBlocksParseAndInline() {
    QDir dir(QStringLiteral(NETLOOM_SOURCE_DIR "/resources/blocks"));
    QStringList files = dir.entryList({"*.nlblock"});
    QVERIFY(files.size() >= 3);
    std::vector<proto::ModelDef> library;
    for (const QString& f : files) {
      QFile file(dir.filePath(f));
      QVERIFY(file.open(QIODevice::ReadOnly));
      auto block = parseBlock(file.readAll().toStdString(), f.toStdString());
      QVERIFY2(block.ok(), block.ok() ? "" : block.error().message.c_str());
      BlockInterface io = blockInterface(*block);
      QCOMPARE(int(io.inputs.size()), 1);
      QCOMPARE(int(io.outputs.size()), 1);
      library.push_back(*block);
    }
    for (const proto::ModelDef& block : library) {
      const std::string& name = block.name();
      const bool sequence = name == "MultiHeadAttention" || name == "TransformerBlock";
      std::string in = name == "GPT" ? input("img", "12", "x", "int32")
                       : sequence    ? input("img", "12, 128")
                                     : input("img", "16, 8, 8");
      proto::ModelDef m = model(in + node("inst", name, "img"));
      for (const proto::ModelDef& b : library) *m.add_blocks() = b;
      ModelAnalysis a = analyzeModel(m, 2);
      QVERIFY2(a.ok(), (name + ": " + problemsText(a)).c_str());
      QVERIFY2(!a.nodes.at("inst").outputs.empty(), name.c_str());
    }
  }

  // A block's tied parameters tie within each instance: two instances of a block
  // whose output layer reads its embedding table have one table each, and no
  // output weight of their own.
  void blocksTieTheirOwnParams() {
    const std::string tied =
        "blocks { name: 'LM' " + node("t", "BlockInput", "") +
        node("emb", "Embedding", "t", intAttr("num_embeddings", 7) + intAttr("embedding_dim", 5)) +
        node("out", "Linear", "emb",
             intAttr("out_features", 7) + " attrs { key: 'bias' value { b: false } }") +
        "outputs: 'out' shared { param: 'out.weight' with: 'emb.weight' } } ";
    proto::ModelDef m =
        model(input("ids", "3", "x", "int32") + node("a", "LM", "ids") + node("b", "LM", "ids") +
              node("sum", "Add", "a,b") + node("loss", "MSELoss", "sum,sum") + tied);
    auto flat = inlineBlocks(m);
    QVERIFY2(flat.ok(), flat.ok() ? "" : flat.error().message.c_str());
    QCOMPARE(flat->shared_size(), 2);
    QCOMPARE(flat->shared(1).param(), std::string("b/out.weight"));
    QCOMPARE(flat->shared(1).with(), std::string("b/emb.weight"));
    ParamStore store;
    CompileOptions o;
    o.batch = 2;
    auto p = compile(m, o, store);
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    QVERIFY(store.find("a/emb.weight") && store.find("b/emb.weight"));
    QVERIFY(!store.find("a/out.weight") && !store.find("b/out.weight"));
  }
};

QTEST_GUILESS_MAIN(TestBlocks)
#include "tst_blocks.moc"
