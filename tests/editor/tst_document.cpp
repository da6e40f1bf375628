// The document model without a scene: every gesture's undo and redo leave exactly
// the serialized text they should, drags merge, refusals change nothing, and the
// example projects survive a load-save round trip.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include "editor/document.h"
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
