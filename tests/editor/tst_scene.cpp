// The canvas and its panels, driven through the real widgets (offscreen): a drop from
// the palette adds a node, dragging between ports connects them, a cycle is refused
// at the drop, a wire dropped on empty canvas offers only the ops that take it, Tab
// opens quick-add, inspector edits change the model and undo, auto-layout draws left
// to right, and the LeNet project renders with a shape on every wire (the picture is
// kept as a test artifact).
#include <QApplication>
#include <QDir>
#include <QLineEdit>
#include <QMimeData>
#include <QPainter>
#include <QScreen>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStyleOptionGraphicsItem>
#include <QtTest>

#include "editor/autolayout.h"
#include "editor/palette.h"
#include "editor/panels.h"
#include "editor/scene.h"
#include "editor/view.h"
#include "engine/io/project_file.h"

using namespace netloom;
using namespace netloom::editor;

namespace {

// A scene and view around a fresh document, shown so that mapping works.
struct Canvas {
  GraphDocument doc;
  GraphScene scene{&doc};
  GraphView view{&scene};
  Canvas() {
    doc.setProject({});
    view.resize(1000, 700);
    view.show();
    view.resetTransform();
    view.centerOn(400, 200);
    QApplication::processEvents();
  }
  QPoint at(QPointF scenePos) const { return view.mapFromScene(scenePos); }
  // Left-button press, moves and release in the viewport, as a hand would do them.
  void drag(QPointF from, QPointF to) {
    QWidget* vp = view.viewport();
    auto send = [&](QEvent::Type t, QPointF scene, Qt::MouseButtons buttons) {
      QPoint p = at(scene);
      QMouseEvent e(t, p, vp->mapToGlobal(p), Qt::LeftButton, buttons, Qt::NoModifier);
      QApplication::sendEvent(vp, &e);
    };
    send(QEvent::MouseButtonPress, from, Qt::LeftButton);
    for (int i = 1; i <= 4; ++i)
      send(QEvent::MouseMove, from + (to - from) * (i / 4.0), Qt::LeftButton);
    send(QEvent::MouseButtonRelease, to, Qt::NoButton);
  }
};

proto::AttrValue ints(std::initializer_list<int64_t> v) {
  proto::AttrValue a;
  for (int64_t x : v) a.mutable_ints()->add_values(x);
  return a;
}

NodeId imageInput(GraphDocument& doc, QPointF pos, std::initializer_list<int64_t> shape) {
  NodeId id = doc.addNode("Input", pos, "image");
  doc.setAttr(id, "shape", ints(shape));
  return id;
}

}  // namespace

class TestScene : public QObject {
  Q_OBJECT

 private slots:
  void paletteDropAddsNode() {
    Canvas c;
    PaletteWidget palette;
    QTreeWidgetItem* item = palette.itemFor("Conv2d");
    QVERIFY(item);
    QVERIFY(!palette.itemFor("AdamUpdate"));  // internal ops are not offered
    QVERIFY(!item->toolTip(0).isEmpty());
    std::unique_ptr<QMimeData> mime(palette.tree()->dragData({item}));
    QVERIFY(mime && mime->hasFormat(kOpMimeType));

    QPoint drop = c.at(QPointF(300, 100));
    QWidget* vp = c.view.viewport();
    QDragEnterEvent enter(drop, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(vp, &enter);
    QVERIFY(enter.isAccepted());
    QDragMoveEvent move(drop, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(vp, &move);
    QDropEvent dropEvent(drop, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(vp, &dropEvent);

    QCOMPARE(c.doc.nodes().size(), size_t(1));
    NodeId id = c.doc.nodes()[0];
    QCOMPARE(c.doc.node(id).def.op(), std::string("Conv2d"));
    QVERIFY(QLineF(c.doc.node(id).pos, QPointF(300 - NodeGeometry::kWidth / 2, 88)).length() < 20);
    QVERIFY(c.scene.itemFor(id));
    QCOMPARE(c.scene.selectedNodes(), std::vector<NodeId>{id});
    c.doc.undoStack()->undo();
    QVERIFY(c.doc.nodes().empty());
    QVERIFY(!c.scene.itemFor(id));

    // The search field narrows the palette.
    palette.searchField()->setText("pool");
    QVERIFY(palette.itemFor("MaxPool2d")->isHidden() == false);
    QVERIFY(palette.itemFor("Conv2d")->isHidden());
  }

  void portDragConnectsAndCycleIsRefused() {
    Canvas c;
    NodeId in = imageInput(c.doc, {0, 0}, {784});
    NodeId a = c.doc.addNode("ReLU", {300, 0});
    NodeId b = c.doc.addNode("ReLU", {600, 0});
    QApplication::processEvents();
    c.drag(c.scene.itemFor(in)->outputPos(0), c.scene.itemFor(a)->inputPos(0));
    QVERIFY(c.doc.inputConnection(a, 0).has_value());
    QCOMPARE(c.doc.inputConnection(a, 0)->from, in);
    c.drag(c.scene.itemFor(a)->outputPos(0), c.scene.itemFor(b)->inputPos(0));
    QCOMPARE(c.doc.connections().size(), size_t(2));
    WireItem* w = c.scene.wireInto(b, 0);
    QVERIFY(w);
    QCOMPARE(w->label(), QString("1×784"));  // batch 1: the project sets none

    // b -> a closes a loop: refused at the drop, with the reason, and nothing changes.
    QSignalSpy refused(&c.scene, &GraphScene::refused);
    std::string before = c.doc.toText();
    c.drag(c.scene.itemFor(b)->outputPos(0), c.scene.itemFor(a)->inputPos(0));
    QCOMPARE(refused.count(), 1);
    QVERIFY2(refused.first().first().toString().contains("cycle"),
             qPrintable(refused.first().first().toString()));
    QCOMPARE(c.doc.toText(), before);

    // Output to output is refused too.
    c.drag(c.scene.itemFor(a)->outputPos(0), c.scene.itemFor(in)->outputPos(0));
    QCOMPARE(refused.count(), 2);
    QCOMPARE(c.doc.toText(), before);

    // Deleting the middle node takes both its wires off the canvas; undo brings them back.
    c.doc.removeNodes({a});
    QVERIFY(c.scene.wires().empty());
    QVERIFY(!c.scene.itemFor(a));
    c.doc.undoStack()->undo();
    QCOMPARE(c.scene.wires().size(), size_t(2));
    QVERIFY(c.scene.wireInto(b, 0));
    // Its wires follow a moved node.
    QPointF end = c.scene.wireInto(b, 0)->path().pointAtPercent(1);
    c.doc.moveNodes({{b, c.doc.node(b).pos + QPointF(0, 160)}});
    QCOMPARE(c.scene.wireInto(b, 0)->path().pointAtPercent(1), end + QPointF(0, 160));
  }

  void nodeDragIsOneUndoStep() {
    Canvas c;
    NodeId a = c.doc.addNode("ReLU", {0, 0});
    QApplication::processEvents();
    int steps = c.doc.undoStack()->count();
    QPointF grab = c.scene.itemFor(a)->mapToScene(QPointF(60, 30));
    c.drag(grab, grab + QPointF(200, 96));
    QCOMPARE(c.doc.undoStack()->count(), steps + 1);
    QPointF p = c.doc.node(a).pos;
    QCOMPARE(p, QPointF(208, 96));  // snapped to the 16-unit grid
    c.doc.undoStack()->undo();
    QCOMPARE(c.scene.itemFor(a)->pos(), QPointF(0, 0));
  }

  // A click (press and release with no move, or a hand's jitter of a pixel) moves
  // nothing, even a node off the grid, and records no undo entry.
  void aClickMovesNothing() {
    Canvas c;
    NodeId a = c.doc.addNode("ReLU", {103, 57});
    c.doc.undoStack()->setClean();
    QApplication::processEvents();
    const int steps = c.doc.undoStack()->count();
    const QPointF grab = c.scene.itemFor(a)->mapToScene(QPointF(60, 30));
    QWidget* vp = c.view.viewport();
    auto send = [&](QEvent::Type t, QPoint p, Qt::MouseButtons buttons) {
      QMouseEvent e(t, p, vp->mapToGlobal(p), Qt::LeftButton, buttons, Qt::NoModifier);
      QApplication::sendEvent(vp, &e);
    };
    for (QPoint jitter : {QPoint(0, 0), QPoint(1, 1)}) {
      send(QEvent::MouseButtonPress, c.at(grab), Qt::LeftButton);
      send(QEvent::MouseMove, c.at(grab) + jitter, Qt::LeftButton);
      send(QEvent::MouseButtonRelease, c.at(grab) + jitter, Qt::NoButton);
      QApplication::processEvents();
      QCOMPARE(c.doc.node(a).pos, QPointF(103, 57));
      QCOMPARE(c.scene.itemFor(a)->pos(), QPointF(103, 57));
      QCOMPARE(c.doc.undoStack()->count(), steps);
      QVERIFY(c.doc.undoStack()->isClean());
      QVERIFY(c.scene.itemFor(a)->isSelected());
    }
  }

  // What the canvas shows on screen (the window's backing store, painted region by
  // region as the view repaints) matches a full repaint after every kind of edit: a
  // rename, an attribute that fixes a problem, its undo, a selection change.
  void everyEditIsRedrawn() {
    Canvas c;
    NodeId in = imageInput(c.doc, {0, 0}, {4});
    NodeId fc = c.doc.addNode("Linear", {240, 0}, "fc");
    QVERIFY(c.doc.connectPorts(in, 0, fc, 0));
    QVERIFY(QTest::qWaitForWindowExposed(&c.view));
    auto shown = [&] {
      // The scene's change notice, the view's update request and its paint are
      // events in turn: let them all through.
      for (int i = 0; i < 4; ++i) QApplication::processEvents();
      const QRect r =
          c.view.mapFromScene(c.scene.itemFor(fc)->sceneBoundingRect().adjusted(-12, -12, 12, 12))
              .boundingRect();
      QImage screen = c.view.screen()->grabWindow(c.view.winId()).toImage();
      QImage fresh = c.view.grab().toImage();
      const QPoint at = c.view.viewport()->mapTo(&c.view, QPoint(0, 0));
      return screen.copy(r.translated(at)) == fresh.copy(r.translated(at));
    };
    QVERIFY(c.scene.itemFor(fc)->hasProblem());  // out_features is missing
    QVERIFY(shown());
    QVERIFY(c.doc.renameNode(fc, "classifier_with_a_new_name"));
    QVERIFY(shown());
    proto::AttrValue n;
    n.set_i(3);
    c.doc.setAttr(fc, "out_features", n);
    QVERIFY(!c.scene.itemFor(fc)->hasProblem());
    QVERIFY(shown());
    c.doc.undoStack()->undo();
    QVERIFY(c.scene.itemFor(fc)->hasProblem());
    QVERIFY(shown());
    c.scene.selectNodes({fc});
    QVERIFY(shown());
  }

  void wireOnEmptyCanvasOffersOnlyOpsThatTakeIt() {
    Canvas c;
    NodeId in = imageInput(c.doc, {0, 0}, {784});
    QApplication::processEvents();
    std::vector<std::string> ok = c.doc.opsAccepting(in, 0);
    auto has = [&](const char* op) { return std::find(ok.begin(), ok.end(), op) != ok.end(); };
    QVERIFY(has("Linear"));
    QVERIFY(has("ReLU"));
    QVERIFY(!has("Conv2d"));  // needs N×C×H×W
    QVERIFY(!has("Input"));   // takes nothing

    c.drag(c.scene.itemFor(in)->outputPos(0), QPointF(500, 300));
    QuickAdd* q = c.view.quickAdd();
    QVERIFY(q->isVisible());
    QStringList offered;
    for (int i = 0; i < q->list()->count(); ++i) offered << q->list()->item(i)->text();
    QVERIFY(offered.contains("Linear"));
    QVERIFY(!offered.contains("Conv2d"));
    QTest::keyClicks(q->field(), "relu");
    QCOMPARE(q->list()->currentItem()->text(), QString("ReLU"));
    int steps = c.doc.undoStack()->count();
    QTest::keyClick(q->field(), Qt::Key_Return);
    QVERIFY(!q->isVisible());
    QCOMPARE(c.doc.nodes().size(), size_t(2));
    NodeId relu = c.doc.nodes()[1];
    QCOMPARE(c.doc.inputConnection(relu, 0)->from, in);
    QCOMPARE(c.doc.undoStack()->count(), steps + 1);  // add and wire: one step
    c.doc.undoStack()->undo();
    QCOMPARE(c.doc.nodes().size(), size_t(1));
  }

  // Dragged from an embedding's output, quick-add lists attention first; picking it
  // brings the library block's definition with it.
  void quickAddOffersAttentionAfterAnEmbedding() {
    Canvas c;
    NodeId in = imageInput(c.doc, {0, 0}, {16});
    netloom::proto::AttrValue v;
    v.set_s("int32");
    c.doc.setAttr(in, "dtype", v);
    NodeId emb = c.doc.addNode("Embedding", {250, 0});
    QVERIFY(c.doc.connectPorts(in, 0, emb, 0));
    v.Clear();
    v.set_i(100);
    c.doc.setAttr(emb, "num_embeddings", v);
    v.set_i(128);
    c.doc.setAttr(emb, "embedding_dim", v);
    QVERIFY(c.doc.analysis().ok());
    QApplication::processEvents();
    c.drag(c.scene.itemFor(emb)->outputPos(0), QPointF(700, 300));
    QuickAdd* q = c.view.quickAdd();
    QVERIFY(q->isVisible());
    QVERIFY(q->list()->count() > 3);
    QCOMPARE(q->list()->item(0)->text(), QString("MultiHeadAttention"));
    QCOMPARE(q->list()->item(1)->text(), QString("TransformerBlock"));
    QTest::keyClick(q->field(), Qt::Key_Return);
    NodeId mha = c.doc.nodes().back();
    QVERIFY(c.doc.isInstance(mha));
    QCOMPARE(c.doc.inputConnection(mha, 0)->from, emb);
    QVERIFY(c.doc.block("MultiHeadAttention"));
    QVERIFY2(c.doc.analysis().ok(), c.doc.analysis().problems.empty()
                                        ? ""
                                        : c.doc.analysis().problems.front().message.c_str());
  }

  void tabOpensQuickAdd() {
    Canvas c;
    c.view.setFocus();
    QTest::keyClick(&c.view, Qt::Key_Tab);
    QVERIFY(c.view.quickAdd()->isVisible());
    QTest::keyClicks(c.view.quickAdd()->field(), "batchnorm");
    QTest::keyClick(c.view.quickAdd()->field(), Qt::Key_Return);
    QCOMPARE(c.doc.nodes().size(), size_t(1));
    QCOMPARE(c.doc.node(c.doc.nodes()[0]).def.op(), std::string("BatchNorm"));
  }

  void inspectorEditsUndo() {
    GraphDocument doc;
    doc.setProject({});
    NodeId in = imageInput(doc, {0, 0}, {784});
    NodeId fc = doc.addNode("Linear", {300, 0});
    QVERIFY(doc.connectPorts(in, 0, fc, 0));
    InspectorWidget inspector(&doc);
    inspector.showNode(fc);
    auto* out = qobject_cast<QSpinBox*>(inspector.fieldFor("out_features"));
    QVERIFY(out);
    QVERIFY(out->minimum() <= 1);
    std::string before = doc.toText();
    QVERIFY(!doc.analysis().ok());  // out_features is required
    // Typing 6, then 64: one burst, one undo step; the shape follows at each key.
    int steps = doc.undoStack()->count();
    out->setValue(6);
    QCOMPARE(doc.analysis().nodes.at("linear").outputs.at(0).shape, (Shape{1, 6}));
    out->setValue(64);
    QCOMPARE(doc.undoStack()->count(), steps + 1);
    QCOMPARE(doc.node(fc).def.attrs().at("out_features").i(), 64);
    QVERIFY(doc.analysis().ok());
    QCOMPARE(doc.analysis().nodes.at("linear").outputs.at(0).shape, (Shape{1, 64}));
    doc.undoStack()->undo();
    QCOMPARE(doc.toText(), before);
    QCOMPARE(out->value(), out->minimum());  // the field follows the undo

    // A shape list: a bad entry is flagged and changes nothing.
    NodeId conv = doc.addNode("Conv2d", {0, 200});
    inspector.showNode(conv);
    auto* ks = qobject_cast<QLineEdit*>(inspector.fieldFor("kernel_size"));
    QVERIFY(ks);
    ks->setFocus();
    ks->selectAll();
    QTest::keyClicks(ks, "3,q");
    QVERIFY(!ks->styleSheet().isEmpty());
    ks->selectAll();
    QTest::keyClicks(ks, "5, 5");
    QCOMPARE(doc.node(conv).def.attrs().at("kernel_size").ints().values_size(), 2);
    QCOMPARE(doc.node(conv).def.attrs().at("kernel_size").ints().values(1), 5);

    // Renaming through the name field; a taken name is refused and flagged.
    inspector.nameField()->setText("features");
    emit inspector.nameField()->editingFinished();
    QCOMPARE(doc.node(conv).def.name(), std::string("features"));
    inspector.nameField()->setText("image");
    emit inspector.nameField()->editingFinished();
    QCOMPARE(doc.node(conv).def.name(), std::string("features"));
    QVERIFY(!inspector.nameField()->styleSheet().isEmpty());
  }

  // A node's attribute line follows every edit, undo and redo at once, whether or
  // not the edit changes any shape (here the node has no input, so none changes).
  void attributeLinesFollowEditsUndoAndRedo() {
    GraphDocument doc;
    doc.setProject({});
    GraphScene scene(&doc);
    const NodeId fc = doc.addNode("Linear", {0, 0});
    NodeItem* item = scene.itemFor(fc);
    QVERIFY(item);
    proto::AttrValue v;
    v.set_i(64);
    doc.setAttr(fc, "out_features", v);
    QVERIFY2(item->summary().contains("64"), qPrintable(item->summary()));
    v.set_i(10);
    doc.setAttr(fc, "out_features", v);
    QVERIFY2(item->summary().contains("10") && !item->summary().contains("64"),
             qPrintable(item->summary()));
    doc.undoStack()->undo();
    QVERIFY2(item->summary().contains("64"), qPrintable(item->summary()));
    doc.undoStack()->redo();
    QVERIFY2(item->summary().contains("10"), qPrintable(item->summary()));
    // What is painted is that line: render the item and compare with a render of the
    // line's own text.
    QImage shown(240, 120, QImage::Format_ARGB32);
    shown.fill(Qt::white);
    QPainter painter(&shown);
    QStyleOptionGraphicsItem option;
    item->paint(&painter, &option, nullptr);
    painter.end();
    doc.undoStack()->undo();
    QImage before(240, 120, QImage::Format_ARGB32);
    before.fill(Qt::white);
    QPainter again(&before);
    item->paint(&again, &option, nullptr);
    again.end();
    QVERIFY(shown != before);  // the line drawn changed with the undo
  }

  void problemsListSelectsTheNode() {
    GraphDocument doc;
    doc.setProject({});
    doc.addNode("ReLU", {0, 0});  // its input is not connected
    ProblemsWidget problems(&doc);
    // The data's problem (a new project has no data source yet), what a run needs
    // (a loss), then the graph's.
    QCOMPARE(problems.count(), 3);
    QVERIFY(problems.item(0)->text().contains("no data source"));
    QVERIFY(problems.item(0)->text().contains("Choose Dataset"));
    QVERIFY(problems.item(1)->text().contains("has no loss"));
    QVERIFY(problems.item(2)->text().contains("relu"));
    QSignalSpy activated(&problems, &ProblemsWidget::nodeActivated);
    QTest::mouseClick(problems.viewport(), Qt::LeftButton, {},
                      problems.visualItemRect(problems.item(2)).center());
    QCOMPARE(activated.count(), 1);
    QCOMPARE(activated.first().first().toInt(), doc.nodes()[0]);
  }

  void autoLayoutDrawsLeftToRightAndUndoes() {
    GraphDocument doc;
    QVERIFY(doc.load(NETLOOM_SOURCE_DIR "/projects/fashion-resnet.nlproj").ok());
    std::string before = doc.toText();
    QString why;
    QVERIFY2(autoLayout(doc, {}, &why), qPrintable(why));
    for (const Connection& c : doc.connections())
      QVERIFY2(doc.node(c.from).pos.x() < doc.node(c.to).pos.x(),
               qPrintable(QString::fromStdString(doc.node(c.from).def.name() + " -> " +
                                                 doc.node(c.to).def.name())));
    // No two nodes overlap.
    std::vector<QRectF> boxes;
    for (NodeId id : doc.nodes()) {
      QRectF r(doc.node(id).pos, QSizeF(NodeGeometry::kWidth, NodeGeometry::height(1)));
      for (const QRectF& o : boxes) QVERIFY(!r.intersects(o));
      boxes.push_back(r);
    }
    QVERIFY(doc.toText() != before);
    doc.undoStack()->undo();
    QCOMPARE(doc.toText(), before);
  }

  // An edit that changes every shape of a long chain: the wires in view show the new
  // shapes as soon as the edit returns, the rest follow while the event loop idles,
  // and a keystroke that changes no shape redraws one node.
  void aLargeEditRedrawsWhatIsInViewFirst() {
    std::string text =
        "model { nodes { name: 'x' op: 'Input' attrs { key: 'shape' value { ints { values: [8] } "
        "} } }\n";
    std::string prev = "x";
    for (int i = 0; i < 1200; ++i) {
      std::string name = "r" + std::to_string(i);
      text += "nodes { name: '" + name + "' op: 'ReLU' inputs: '" + prev + "' }\n";
      prev = name;
    }
    auto project = parseProject(text + "}", "chain");
    QVERIFY(project.ok());
    Canvas c;
    c.doc.setProject(*project);
    QVERIFY(autoLayout(c.doc, {}));
    c.scene.finishRefresh();
    c.view.resetTransform();
    c.view.centerOn(c.scene.itemFor(c.doc.findNode("r0"))->sceneBoundingRect().center());
    QApplication::processEvents();
    WireItem* near = c.scene.wireInto(c.doc.findNode("r1"), 0);
    WireItem* far = c.scene.wireInto(c.doc.findNode("r1199"), 0);
    QCOMPARE(far->label(), QString("1×8"));

    proto::AttrValue shape;
    shape.mutable_ints()->add_values(32);
    c.doc.setAttr(c.doc.findNode("x"), "shape", shape);
    QCOMPARE(near->label(), QString("1×32"));
    QVERIFY(c.scene.refreshPending());
    QCOMPARE(far->label(), QString("1×8"));  // out of view: not yet
    QSignalSpy finished(&c.scene, &GraphScene::refreshFinished);
    QVERIFY(finished.wait());
    QVERIFY(!c.scene.refreshPending());
    QCOMPARE(far->label(), QString("1×32"));
    for (WireItem* w : c.scene.wires()) QCOMPARE(w->label(), QString("1×32"));

    proto::AttrValue field;
    field.set_s("x");
    c.doc.setAttr(c.doc.findNode("x"), "field", field);  // the default: nothing changes
    c.doc.setAttr(c.doc.findNode("r600"), "inplace", std::nullopt);
    QVERIFY(c.doc.analysisChangedNodes());
    QVERIFY(c.doc.analysisChangedNodes()->size() <= 1);
    QVERIFY(!c.scene.refreshPending());
  }

  void unknownOpsAreShownAsUnknown() {
    GraphDocument doc;
    auto p = netloom::parseProject(
        "model { nodes { name: 'x' op: 'Input' attrs { key: 'shape' value { ints { values: [4] } } "
        "} }"
        " nodes { name: 'future' op: 'FancyAttention' inputs: 'x' attrs { key: 'heads' value { i: "
        "8 } } } }",
        "t");
    QVERIFY(p.ok());
    doc.setProject(*p);
    GraphScene scene(&doc);
    NodeItem* item = scene.itemFor(doc.findNode("future"));
    QVERIFY(item);
    QVERIFY(item->hasProblem());
    QVERIFY(item->problemText().contains("FancyAttention"));
    QVERIFY(item->summary().contains("heads 8"));
    QVERIFY(scene.wireInto(doc.findNode("future"), 0));
  }

  // LeNet rendered: every wire carries the shape shape inference gives it; the PNG
  // is kept under the build folder.
  void lenetScreenshotShowsShapes() {
    GraphDocument doc;
    QVERIFY(doc.load(NETLOOM_SOURCE_DIR "/projects/fashion-lenet.nlproj").ok());
    GraphScene scene(&doc);
    GraphView view(&scene);
    view.resize(1600, 700);
    view.show();
    QVERIFY(autoLayout(doc, {}));
    view.frameAll();
    QApplication::processEvents();
    QVERIFY(!scene.wires().empty());
    for (WireItem* w : scene.wires()) {
      const std::string& from = doc.node(w->connection().from).def.name();
      const auto& out = doc.analysis().nodes.at(from).outputs;
      QVERIFY(!out.empty());
      QString want = QString::fromStdString(shapeToString(out[w->connection().fromPort].shape));
      QVERIFY2(w->label().startsWith(want),
               qPrintable(QString::fromStdString(from) + ": " + w->label()));
    }
    // The first convolution's output is 16 (the project's batch) × 6 × 28 × 28.
    WireItem* conv1 = nullptr;
    for (WireItem* w : scene.wires())
      if (doc.node(w->connection().from).def.op() == "Conv2d" && !conv1) conv1 = w;
    QVERIFY(conv1);
    // Worked out by hand: 5×5 kernels with padding 2 keep 28×28, and 6 out_channels.
    static const QRegularExpression conv1Shape(QString::fromUtf8("^16×6×28×28(?![0-9×])"));
    QVERIFY2(conv1Shape.match(conv1->label()).hasMatch(), qPrintable(conv1->label()));

    // The whole drawing at 1:1, as a user reads it.
    QRectF area = scene.itemsBoundingRect().adjusted(-20, -20, 20, 20);
    QImage shot(area.size().toSize(), QImage::Format_ARGB32);
    shot.fill(Qt::black);
    QPainter painter(&shot);
    painter.setRenderHint(QPainter::Antialiasing);
    scene.render(&painter, QRectF(QPointF(0, 0), area.size()), area);
    painter.end();
    QDir().mkpath(NETLOOM_BINARY_DIR "/tests/artifacts");
    QString file = NETLOOM_BINARY_DIR "/tests/artifacts/lenet-editor.png";
    QVERIFY(shot.save(file));
    qInfo("saved %s", qPrintable(file));
    // Text was drawn where a wire label is: bright pixels on the dark canvas.
    QGraphicsItem* text = conv1->childItems().first();
    QRect label = text->mapToScene(text->boundingRect())
                      .boundingRect()
                      .translated(-area.topLeft())
                      .toAlignedRect()
                      .intersected(shot.rect());
    QVERIFY(!label.isEmpty());
    int bright = 0;
    for (int y = label.top(); y <= label.bottom(); ++y)
      for (int x = label.left(); x <= label.right(); ++x) bright += qGray(shot.pixel(x, y)) > 120;
    QVERIFY2(bright > 5, qPrintable(QString("%1 bright pixels in the label").arg(bright)));
  }
};

QTEST_MAIN(TestScene)
#include "tst_scene.moc"
