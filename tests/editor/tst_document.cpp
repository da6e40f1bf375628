// The document model without a scene: every gesture's undo and redo leave exactly
// the serialized text they should, drags merge, refusals change nothing, and the
// example projects survive a load-save round trip.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "editor/document.h"
#include "engine/compiler/compile.h"
#include "engine/graph/graph.h"
#include "engine/io/project_file.h"

using netloom::editor::GraphDocument;
using netloom::editor::NodeId;

class TestDocument : public QObject {
  Q_OBJECT

  // Does `gesture`, then checks undo returns the text before it and redo the text after.
  template <class F>
  void checkUndo(GraphDocument& doc, F gesture) {
    std::string before = doc.toText();
    gesture();
    std::string after = doc.toText();
    QVERIFY(after != before);
    doc.undoStack()->undo();
    QCOMPARE(doc.toText(), before);
    doc.undoStack()->redo();
    QCOMPARE(doc.toText(), after);
  }

 private slots:
  void gesturesUndoExactly() {
    GraphDocument doc;
    doc.setProject({});
    NodeId in = doc.addNode("Input", {0, 0}, "image");
    NodeId fc = doc.addNode("Linear", {200, 0});
    NodeId relu = doc.addNode("ReLU", {400, 0});
    QCOMPARE(doc.node(fc).def.name(), std::string("linear"));
    checkUndo(doc, [&] { QVERIFY(doc.connectPorts(in, 0, fc, 0)); });
    checkUndo(doc, [&] { QVERIFY(doc.connectPorts(fc, 0, relu, 0)); });
    QCOMPARE(doc.connections().size(), size_t(2));
    netloom::proto::AttrValue v;
    v.set_i(32);
    checkUndo(doc, [&] { doc.setAttr(fc, "out_features", v); });
    checkUndo(doc, [&] { QVERIFY(doc.renameNode(fc, "fc1")); });
    QCOMPARE(doc.node(relu).def.inputs(0), std::string("fc1"));
    checkUndo(doc, [&] { doc.disconnectInput(relu, 0); });
    checkUndo(doc, [&] { doc.removeNodes({in}); });
    QVERIFY(!doc.contains(in));
    QCOMPARE(doc.node(fc).def.inputs_size(), 0);
  }

  void dragMergesIntoOneStep() {
    GraphDocument doc;
    doc.setProject({});
    NodeId a = doc.addNode("ReLU", {0, 0});
    int steps = doc.undoStack()->count();
    std::string before = doc.toText();
    for (int i = 1; i <= 5; ++i) doc.moveNodes({{a, QPointF(10.0 * i, 0)}}, 7);
    QCOMPARE(doc.undoStack()->count(), steps + 1);
    QCOMPARE(doc.node(a).pos, QPointF(50, 0));
    doc.undoStack()->undo();
    QCOMPARE(doc.toText(), before);
  }

  void refusalsChangeNothing() {
    GraphDocument doc;
    doc.setProject({});
    NodeId a = doc.addNode("ReLU", {0, 0});
    NodeId b = doc.addNode("ReLU", {100, 0});
    QVERIFY(doc.connectPorts(a, 0, b, 0));
    std::string text = doc.toText();
    QString why;
    QVERIFY(!doc.connectPorts(b, 0, a, 0, &why));
    QVERIFY2(why.contains("cycle"), qPrintable(why));
    QVERIFY(!doc.connectPorts(a, 0, a, 0, &why));
    QVERIFY(!doc.renameNode(a, doc.node(b).def.name(), &why));
    QVERIFY2(why.contains("already named"), qPrintable(why));
    QCOMPARE(doc.toText(), text);
    auto pasted = doc.pasteText("this is { not a project", {0, 0});
    QVERIFY(!pasted.ok());
    QVERIFY(pasted.error().message.find("clipboard") != std::string::npos);
    QCOMPARE(doc.toText(), text);
  }

  void copyPasteKeepsInnerWiresAndMakesNamesUnique() {
    GraphDocument doc;
    doc.setProject({});
    NodeId a = doc.addNode("ReLU", {0, 0});
    NodeId b = doc.addNode("Tanh", {100, 0});
    QVERIFY(doc.connectPorts(a, 0, b, 0));
    auto ids = doc.pasteText(doc.copyText({a, b}), {0, 200});
    QVERIFY(ids.ok());
    QCOMPARE(ids->size(), size_t(2));
    QCOMPARE(doc.node((*ids)[0]).def.name(), std::string("relu_2"));
    QCOMPARE(doc.node((*ids)[1]).def.inputs(0), std::string("relu_2"));
    QCOMPARE(doc.node((*ids)[1]).pos, QPointF(100, 200));
  }

  void analysisLabelsShapesAndProblems() {
    auto project = netloom::loadProject(NETLOOM_SOURCE_DIR "/projects/fashion-lenet.nlproj");
    QVERIFY(project.ok());
    GraphDocument doc;
    doc.setProject(*project);
    QVERIFY(doc.analysis().ok());
    NodeId conv = -1;
    for (NodeId id : doc.nodes())
      if (doc.node(id).def.op() == "Conv2d") conv = id;
    QVERIFY(conv >= 0);
    const auto& out = doc.analysis().nodes.at(doc.node(conv).def.name()).outputs;
    QCOMPARE(out.size(), size_t(1));
    QCOMPARE(out[0].shape[0], doc.batch());
    doc.disconnectInput(conv, 0);
    QVERIFY(!doc.analysis().ok());
    QCOMPARE(doc.analysis().problems[0].node, doc.node(conv).def.name());
    QCOMPARE(doc.analysis().problems[0].port, 0);
    doc.undoStack()->undo();
    QVERIFY(doc.analysis().ok());
  }

  void examplesRoundTrip() {
    QTemporaryDir dir;
    QDir projects(NETLOOM_SOURCE_DIR "/projects");
    const QStringList files = projects.entryList({"*.nlproj"});
    QVERIFY(!files.isEmpty());
    for (const QString& f : files) {
      GraphDocument doc;
      QVERIFY(doc.load(projects.filePath(f)).ok());
      QString a = dir.filePath("a.nlproj"), b = dir.filePath("b.nlproj");
      QVERIFY(doc.save(a).ok());
      GraphDocument again;
      QVERIFY(again.load(a).ok());
      QVERIFY(again.save(b).ok());
      QFile fa(a), fb(b);
      QVERIFY(fa.open(QIODevice::ReadOnly) && fb.open(QIODevice::ReadOnly));
      QCOMPARE(fb.readAll(), fa.readAll());
      QCOMPARE(again.nodes().size(), doc.nodes().size());
    }
  }

 private:
  // A conv stack: image -> conv -> bn -> relu -> flat -> fc, with a batch of 4.
  struct Stack {
    NodeId image, conv, bn, relu, flat, fc;
  };
  Stack convStack(GraphDocument& doc) {
    netloom::proto::Project p;
    p.mutable_train()->set_batch_size(4);
    doc.setProject(p);
    Stack s;
    s.image = doc.addNode("Input", {0, 0}, "image");
    netloom::proto::AttrValue shape;
    shape.mutable_ints()->add_values(3);
    shape.mutable_ints()->add_values(8);
    shape.mutable_ints()->add_values(8);
    doc.setAttr(s.image, "shape", shape);
    s.conv = doc.addNode("Conv2d", {200, 0}, "conv");
    netloom::proto::AttrValue v;
    v.set_i(16);
    doc.setAttr(s.conv, "out_channels", v);
    netloom::proto::AttrValue k;
    k.mutable_ints()->add_values(3);
    doc.setAttr(s.conv, "kernel_size", k);
    s.bn = doc.addNode("BatchNorm", {400, 0}, "bn");
    s.relu = doc.addNode("ReLU", {600, 0}, "relu");
    s.flat = doc.addNode("Flatten", {800, 0}, "flat");
    s.fc = doc.addNode("Linear", {1000, 0}, "fc");
    v.set_i(10);
    doc.setAttr(s.fc, "out_features", v);
    doc.connectPorts(s.image, 0, s.conv, 0);
    doc.connectPorts(s.conv, 0, s.bn, 0);
    doc.connectPorts(s.bn, 0, s.relu, 0);
    doc.connectPorts(s.relu, 0, s.flat, 0);
    doc.connectPorts(s.flat, 0, s.fc, 0);
    return s;
  }

  netloom::Shape shapeOf(const GraphDocument& doc, NodeId id, int port = 0) {
    auto it = doc.analysis().nodes.find(doc.node(id).def.name());
    if (it == doc.analysis().nodes.end() || port >= int(it->second.outputs.size())) return {};
    return it->second.outputs[port].shape;
  }

 private slots:
  void makeBlockUndoesExactlyAndKeepsShapes() {
    GraphDocument doc;
    Stack s = convStack(doc);
    netloom::Shape reluShape = shapeOf(doc, s.relu);
    QCOMPARE(reluShape, (netloom::Shape{4, 16, 6, 6}));
    NodeId inst = -1;
    checkUndo(doc, [&] {
      auto made = doc.makeBlock({s.conv, s.bn, s.relu}, "CBR");
      QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
      inst = *made;
    });
    inst = doc.findNode("cbr");
    QVERIFY(doc.isInstance(inst));
    QCOMPARE(doc.inputPortCount(inst), 1);
    QCOMPARE(doc.outputPortCount(inst), 1);
    QCOMPARE(doc.node(inst).def.inputs(0), std::string("image"));
    QCOMPARE(doc.node(doc.findNode("flat")).def.inputs(0), std::string("cbr"));
    QVERIFY(!doc.contains(s.conv));
    QCOMPARE(shapeOf(doc, inst), reluShape);
    QVERIFY2(doc.analysis().ok(),
             doc.analysis().ok() ? "" : doc.analysis().problems.front().message.c_str());
    QCOMPARE(doc.blockNames(), std::vector<std::string>{"CBR"});
    // The block's text form: its input port, its nodes renamed nowhere, its output.
    const netloom::proto::ModelDef* def = doc.block("CBR");
    QCOMPARE(def->nodes(0).op(), std::string("BlockInput"));
    QCOMPARE(def->nodes(1).name(), std::string("conv"));
    QCOMPARE(def->outputs(0), std::string("relu"));
    // Refusals change nothing.
    std::string text = doc.toText();
    QVERIFY(!doc.makeBlock({doc.findNode("flat")}, "CBR").ok());   // taken
    QVERIFY(!doc.makeBlock({doc.findNode("flat")}, "ReLU").ok());  // an op
    QVERIFY(!doc.makeBlock({doc.findNode("flat")}, "two words").ok());
    QVERIFY(!doc.makeBlock({}, "Empty").ok());
    QCOMPARE(doc.toText(), text);
    // The project with the block compiles and round-trips through its text.
    QTemporaryDir dir;
    QString path = dir.filePath("b.nlproj");
    QVERIFY(doc.save(path).ok());
    GraphDocument back;
    QVERIFY(back.load(path).ok());
    QCOMPARE(back.toText(), doc.toText());
    QVERIFY(netloom::validateModel(back.toProject().model(), 4).ok());
  }

  void editingADefinitionUpdatesEveryInstance() {
    GraphDocument doc;
    Stack s = convStack(doc);
    QVERIFY(doc.makeBlock({s.conv, s.bn, s.relu}, "CBR").ok());
    NodeId a = doc.findNode("cbr");
    // A second instance, fed by the first.
    NodeId b = doc.addNode("CBR", {300, 200}, "second");
    QVERIFY(doc.isInstance(b));
    QVERIFY(doc.connectPorts(a, 0, b, 0));
    QCOMPARE(shapeOf(doc, b), (netloom::Shape{4, 16, 4, 4}));
    // Expand the first, widen its convolution, collapse: the definition changes, so
    // the second instance (never touched) widens too.
    std::string before = doc.toText();
    auto nodes = doc.expandInstance(a);
    QVERIFY2(nodes.ok(), nodes.ok() ? "" : nodes.error().message.c_str());
    QCOMPARE(int(nodes->size()), 3);
    NodeId conv = doc.findNode("cbr/conv");
    QVERIFY(conv >= 0);
    QCOMPARE(doc.node(conv).def.inputs(0), std::string("image"));
    QCOMPARE(doc.node(b).def.inputs(0), std::string("cbr/relu"));
    QVERIFY(doc.canCollapse(*nodes));
    netloom::proto::AttrValue wide;
    wide.set_i(24);
    doc.setAttr(conv, "out_channels", wide);
    auto back = doc.collapse(*nodes);
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
    QCOMPARE(doc.node(*back).def.name(), std::string("cbr"));
    QCOMPARE(doc.node(b).def.inputs(0), std::string("cbr"));
    QCOMPARE(doc.block("CBR")->nodes(1).attrs().at("out_channels").i(), int64_t(24));
    QCOMPARE(shapeOf(doc, *back), (netloom::Shape{4, 24, 6, 6}));
    QCOMPARE(shapeOf(doc, b), (netloom::Shape{4, 24, 4, 4}));
    // Three steps (expand, edit, collapse) undo back to the text before.
    for (int i = 0; i < 3; ++i) doc.undoStack()->undo();
    QCOMPARE(doc.toText(), before);
    QCOMPARE(shapeOf(doc, b), (netloom::Shape{4, 16, 4, 4}));
    for (int i = 0; i < 3; ++i) doc.undoStack()->redo();
    QCOMPARE(shapeOf(doc, b), (netloom::Shape{4, 24, 4, 4}));
    // setBlock is one step too.
    netloom::proto::ModelDef def = *doc.block("CBR");
    def.mutable_nodes(1)->mutable_attrs()->at("out_channels").set_i(8);
    checkUndo(doc, [&] { doc.setBlock(def); });
    QCOMPARE(shapeOf(doc, b), (netloom::Shape{4, 8, 4, 4}));
  }

  void libraryBlocksComeWithTheirDefinitionAndParams() {
    GraphDocument doc;
    Stack s = convStack(doc);
    std::string before = doc.toText();
    NodeId r = doc.addNode("ResidualBlock", {600, 200});
    QVERIFY(doc.isInstance(r));
    QVERIFY(doc.block("ResidualBlock"));
    QVERIFY(doc.connectPorts(s.relu, 0, r, 0));
    QCOMPARE(shapeOf(doc, r), (netloom::Shape{4, 16, 6, 6}));
    // A param is an attribute of the instance; the inspector's schema says so.
    const netloom::OpDef* op = doc.opOf(r);
    QVERIFY(op && op->attr("channels"));
    netloom::proto::AttrValue wrong;
    wrong.set_i(8);  // the identity shortcut then adds 16 to 8 channels
    doc.setAttr(r, "channels", wrong);
    QVERIFY(!doc.analysis().ok());
    QCOMPARE(doc.analysis().problems.front().node, doc.node(r).def.name());
    doc.undoStack()->undo();
    QVERIFY(doc.analysis().ok());
    // Expanding writes the instance's params into the nodes; collapsing unchanged
    // leaves the definition as it was, '$channels' and all.
    std::string def = netloom::blockToText(*doc.block("ResidualBlock"));
    auto nodes = doc.expandInstance(r);
    QVERIFY(nodes.ok());
    QCOMPARE(doc.node(doc.findNode("residualblock/conv1")).def.attrs().at("out_channels").i(),
             int64_t(16));
    QVERIFY(doc.collapse(*nodes).ok());
    QCOMPARE(netloom::blockToText(*doc.block("ResidualBlock")), def);
    // Undo back to before the drop removes the definition with the instance.
    while (doc.toText() != before && doc.undoStack()->canUndo()) doc.undoStack()->undo();
    QCOMPARE(doc.toText(), before);
    QVERIFY(!doc.block("ResidualBlock"));
  }

  // GPT comes with the TransformerBlock it instances. Expanded, it shows its four
  // blocks as instances on the canvas and its tied output layer stays tied, in the
  // model's ties; collapsing puts the tie back inside the block. A Transformer block
  // expanded post-LN leaves out the pre-LN norms, their inputs passing through.
  void gptExpandsIntoBlockInstances() {
    GraphDocument doc;
    NodeId tokens = doc.addNode("Input", {0, 0}, "tokens");
    netloom::proto::AttrValue v;
    v.mutable_ints()->add_values(12);
    doc.setAttr(tokens, "shape", v);
    v.Clear();
    v.set_s("int32");
    doc.setAttr(tokens, "dtype", v);
    std::string before = doc.toText();
    NodeId gpt = doc.addNode("GPT", {300, 0});
    QVERIFY(doc.block("GPT") && doc.block("TransformerBlock"));
    QVERIFY(doc.connectPorts(tokens, 0, gpt, 0));
    QVERIFY2(doc.analysis().ok(), doc.analysis().problems.empty()
                                      ? ""
                                      : doc.analysis().problems.front().message.c_str());
    QCOMPARE(shapeOf(doc, gpt), (netloom::Shape{1, 12, 256}));
    std::string dropped = doc.toText();
    auto nodes = doc.expandInstance(gpt);
    QVERIFY2(nodes.ok(), nodes.ok() ? "" : nodes.error().message.c_str());
    int instances = 0;
    for (NodeId id : *nodes) instances += doc.isInstance(id);
    QCOMPARE(instances, 4);
    const auto ties = doc.toProject().model().shared();
    QCOMPARE(ties.size(), 1);
    QCOMPARE(ties.Get(0).param(), std::string("gpt/head.weight"));
    QCOMPARE(ties.Get(0).with(), std::string("gpt/wte.weight"));
    QVERIFY(doc.analysis().ok());
    QCOMPARE(shapeOf(doc, doc.findNode("gpt/head")), (netloom::Shape{1, 12, 256}));
    netloom::ParamStore store;
    netloom::CompileOptions o;
    o.batch = 2;
    netloom::proto::ModelDef m = doc.toProject().model();
    auto* loss = m.add_nodes();
    loss->set_name("loss");
    loss->set_op("MSELoss");
    loss->add_inputs("gpt/head");
    loss->add_inputs("gpt/head");
    QVERIFY(netloom::compile(m, o, store).ok());
    QVERIFY(store.find("gpt/wte.weight") && !store.find("gpt/head.weight"));
    auto back = doc.collapse(*nodes);
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
    QCOMPARE(doc.toProject().model().shared_size(), 0);
    QCOMPARE(doc.block("GPT")->shared_size(), 1);
    QCOMPARE(doc.toText(), dropped);
    doc.undoStack()->undo();
    doc.undoStack()->undo();
    QCOMPARE(doc.toText(), dropped);
    while (doc.toText() != before && doc.undoStack()->canUndo()) doc.undoStack()->undo();
    QVERIFY(!doc.block("GPT") && !doc.block("TransformerBlock"));

    doc.removeNodes({tokens});
    NodeId x = doc.addNode("Input", {0, 300}, "x");
    v.Clear();
    v.mutable_ints()->add_values(6);
    v.mutable_ints()->add_values(128);
    doc.setAttr(x, "shape", v);
    NodeId block = doc.addNode("TransformerBlock", {300, 300}, "post");
    QVERIFY(doc.connectPorts(x, 0, block, 0));
    v.Clear();
    v.set_b(false);
    doc.setAttr(block, "norm_first", v);
    QVERIFY(doc.expandInstance(block).ok());
    QVERIFY(doc.findNode("post/ln1") < 0 && doc.findNode("post/ln2") < 0);
    QCOMPARE(doc.node(doc.findNode("post/q")).def.inputs(0), std::string("x"));
    QCOMPARE(doc.node(doc.findNode("post/fc")).def.inputs(0), std::string("post/ln1_post"));
    QVERIFY(doc.node(doc.findNode("post/ln1_post")).def.attrs().count("when") == 0);
    QVERIFY2(doc.analysis().ok(), doc.analysis().problems.empty()
                                      ? ""
                                      : doc.analysis().problems.front().message.c_str());
  }

  // A project asking for more than any machine has opens and is analysed without
  // allocating it; references with ports past int neither throw nor make billions of ports.
  void hugeProjectsOpenWithoutAllocating() {
    auto project = netloom::parseProject(
        "model { nodes { name: 'x' op: 'Input' attrs { key: 'shape' value { ints { values: "
        "[1000000000, 1000000000, 1000000000] } } } }"
        " nodes { name: 'y' op: 'Input' attrs { key: 'shape' value { ints { values: [784] } } } "
        "attrs { key: 'field' value { s: 'y' } } }"
        " nodes { name: 'fc1' op: 'Linear' inputs: 'y' attrs { key: 'out_features' value { i: "
        "16777216 } } }"
        " nodes { name: 'future' op: 'FutureOp' }"
        " nodes { name: 'a' op: 'Tanh' inputs: 'future:99999999999999999999' }"
        " nodes { name: 'b' op: 'Tanh' inputs: 'future:2147483647' }"
        " nodes { name: 'c' op: 'Tanh' inputs: 'fc1:99999999999999999999' } }"
        " train { batch_size: 2147483647 }",
        "t");
    QVERIFY(project.ok());
    GraphDocument doc;
    doc.setProject(*project);
    QCOMPARE(doc.batch(), int64_t(2147483647));
    std::set<std::string> faulty;
    for (const auto& p : doc.analysis().problems) faulty.insert(p.node);
    for (const char* n : {"x", "fc1", "future", "a", "b", "c"}) QVERIFY2(faulty.count(n), n);
    for (NodeId id : doc.nodes()) {
      QVERIFY(doc.outputPortCount(id) >= 1);
      QVERIFY(doc.outputPortCount(id) <= netloom::kMaxPorts);
    }
  }

  void unknownOpsAreKept() {
    auto project = netloom::parseProject(
        "model { nodes { name: 'x' op: 'FutureOp' attrs { key: 'k' value { i: 3 } } } }", "t");
    QVERIFY(project.ok());
    GraphDocument doc;
    doc.setProject(*project);
    QCOMPARE(doc.nodes().size(), size_t(1));
    QVERIFY(!doc.analysis().ok());
    QVERIFY(doc.toText().find("FutureOp") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestDocument)
#include "tst_document.moc"
