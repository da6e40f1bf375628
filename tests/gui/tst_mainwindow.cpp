// The netloom main window's editing side, through its real actions and shortcuts
// (offscreen): a project that fails to parse opens nothing and says where; an invalid
// graph still opens with its problems listed; the title carries the modified mark;
// closing with changes asks; autosave writes a side file that is offered back on the
// next open; garbage on the clipboard does nothing but say so; the clipboard carries
// text-format nodes; Ctrl+L lays out and undoes; New from template opens untitled.
#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QLayout>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QtTest>

#include "../common/wait.h"
#include "editor/palette.h"
#include "editor/panels.h"
#include "editor/scene.h"
#include "editor/view.h"
#include "engine/compiler/compile.h"
#include "gui/main_window.h"
#include "gui/project_files.h"
#include "gui/settings_form.h"

using namespace netloom;
using namespace netloom::editor;
using netloom::gui::MainWindow;

namespace {

void write(const QString& path, const QByteArray& text) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(text);
}

QByteArray read(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Records every question and answers with `answer`.
struct Answers {
  QStringList asked;
  QMessageBox::StandardButton answer = QMessageBox::Cancel;
  MainWindow::Prompt prompt() {
    return [this](const QString& title, const QString& text, QMessageBox::StandardButtons) {
      asked << title + ": " + text;
      return answer;
    };
  }
};

void trigger(MainWindow& w, const char* name) {
  QAction* a = w.action(name);
  QVERIFY2(a, name);
  a->trigger();
}

// A wire runs the way the document is drawn: down, or to the right.
bool flowsOn(const GraphDocument& d, const Connection& c) {
  QPointF from = d.node(c.from).pos, to = d.node(c.to).pos;
  return d.vertical() ? from.y() < to.y() : from.x() < to.x();
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

  QString copyProject(const char* name) {
    QString to = m_dir.filePath(name);
    QFile::remove(to);
    QFile::copy(QString(NETLOOM_SOURCE_DIR "/projects/") + name, to);
    QFile(to).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    return to;
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    qputenv("NETLOOM_PROJECTS", NETLOOM_SOURCE_DIR "/projects");
  }

  void unparsableProjectOpensNothing() {
    MainWindow w;
    Answers a;
    w.setPrompt(a.prompt());
    QString good = copyProject("fashion-lenet.nlproj");
    QVERIFY(w.openFile(good));
    std::string before = w.document()->toText();
    QString bad = m_dir.filePath("broken.nlproj");
    write(bad, "model {\n  nodes { name: 'x' op: 'Input' }\n  nodes { name: \n");
    QVERIFY(!w.openFile(bad));
    QCOMPARE(w.document()->toText(), before);
    QCOMPARE(w.document()->filePath(), good);
    QVERIFY2(w.lastMessage().contains("broken.nlproj") && w.lastMessage().contains(":4"),
             qPrintable(w.lastMessage()));
    QCOMPARE(a.asked.size(), 1);
  }

  void invalidGraphOpensWithProblems() {
    MainWindow w;
    QString path = m_dir.filePath("invalid.nlproj");
    write(path,
          "model {\n nodes { name: 'x' op: 'Input' attrs { key: 'shape' value { ints { values: "
          "[3, 8, 8] } } } }\n nodes { name: 'fc' op: 'Linear' inputs: 'x' }\n nodes { name: "
          "'act' op: 'ReLU' }\n}\n");
    QVERIFY(w.openFile(path));
    QCOMPARE(w.document()->nodes().size(), size_t(3));
    QVERIFY(w.problems()->count() >= 2);
    QStringList rows;
    for (int i = 0; i < w.problems()->count(); ++i) rows << w.problems()->item(i)->text();
    QVERIFY2(rows.join("\n").contains("fc") && rows.join("\n").contains("act"),
             qPrintable(rows.join("\n")));
    // Laid out on open, top to bottom, since the file has no positions, and still
    // unmodified.
    QVERIFY(!w.isWindowModified());
    QVERIFY(w.document()->vertical());
    NodeId x = w.document()->findNode("x"), fc = w.document()->findNode("fc");
    QVERIFY(w.document()->node(x).pos.y() < w.document()->node(fc).pos.y());
  }

  void titleModifiedMarkAndCloseAsks() {
    MainWindow w;
    Answers a;
    w.setPrompt(a.prompt());
    QString path = copyProject("spirals.nlproj");
    QVERIFY(w.openFile(path));
    QVERIFY(w.windowTitle().startsWith("spirals.nlproj"));
    QVERIFY(!w.isWindowModified());
    w.document()->addNode("ReLU", {0, 0});
    QVERIFY(w.isWindowModified());
    a.answer = QMessageBox::Cancel;
    QVERIFY(!w.close());  // cancelled: the window stays
    QCOMPARE(a.asked.size(), 1);
    QVERIFY(a.asked[0].contains("spirals.nlproj"));
    trigger(w, "undo");
    QVERIFY(!w.isWindowModified());
    QVERIFY(w.close());  // nothing to ask
    QCOMPARE(a.asked.size(), 1);
  }

  // Every example, opened (and laid out, as it has no positions) and saved unedited,
  // keeps its bytes; an edit to one node changes that node's line and nothing else,
  // the head comment included.
  void savingKeepsWhatWasNotEdited() {
    for (const char* name : {"fashion-lenet.nlproj", "fashion-resnet.nlproj", "spirals.nlproj",
                             "autoencoder.nlproj"}) {
      const QString path = copyProject(name);
      const QByteArray original = read(path);
      MainWindow w;
      QVERIFY(w.openFile(path));
      QVERIFY(w.save());
      QCOMPARE(read(path), original);
      const NodeId first = w.document()->nodes()[2];
      proto::AttrValue note;
      note.set_s("edited");
      w.document()->setAttr(first, "note", note);
      QVERIFY(w.save());
      const QList<QByteArray> before = original.split('\n'), after = read(path).split('\n');
      QCOMPARE(after.size(), before.size());
      int differ = 0;
      for (int i = 0; i < before.size(); ++i) differ += before[i] != after[i];
      QCOMPARE(differ, 1);
      // A node moved by hand: the positions are the user's now, and are written.
      w.document()->moveNodes({{first, QPointF(1000, 1000)}}, 1);
      QVERIFY(w.save());
      QVERIFY(read(path).contains("layout {"));
      QVERIFY(read(path).startsWith("#"));
    }
  }

  void saveIsAtomicAndClean() {
    MainWindow w;
    QString path = copyProject("fashion-mlp.nlproj");
    QVERIFY(w.openFile(path));
    w.document()->addNode("ReLU", {0, 0}, "extra");
    QVERIFY(w.save());
    QVERIFY(!w.isWindowModified());
    QVERIFY(read(path).contains("extra"));
    QVERIFY(!QFile::exists(MainWindow::autosavePath(path)));
    QString other = m_dir.filePath("copy-of-mlp");
    QVERIFY(w.saveAs(other));
    QCOMPARE(w.document()->filePath(), other + ".nlproj");
    QVERIFY(w.windowTitle().startsWith("copy-of-mlp.nlproj"));
  }

  void autosaveIsOfferedBack() {
    QString path = copyProject("fashion-lenet.nlproj");
    QString side = MainWindow::autosavePath(path);
    std::string edited;
    {
      MainWindow w;
      QVERIFY(w.openFile(path));
      w.document()->addNode("Dropout", {0, 0}, "unsaved_dropout");
      edited = w.document()->toText();
      w.files()->autosaveNow();
      QVERIFY(QFile::exists(side));
      QCOMPARE(read(side).toStdString(), edited);
      // The window "crashes": it is destroyed without closing.
    }
    QVERIFY(QFile::exists(side));
    MainWindow w;
    Answers a;
    a.answer = QMessageBox::Yes;
    w.setPrompt(a.prompt());
    QVERIFY(w.openFile(path));
    QCOMPARE(a.asked.size(), 1);
    QVERIFY(a.asked[0].contains("Recover"));
    QVERIFY(w.document()->findNode("unsaved_dropout") >= 0);
    QCOMPARE(w.document()->filePath(), path);
    QVERIFY(w.isWindowModified());  // recovered, not yet saved
    QVERIFY(w.save());
    QVERIFY(!QFile::exists(side));
    QVERIFY(read(path).contains("unsaved_dropout"));
  }

  void clipboardCarriesTextNodes() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-mlp.nlproj")));
    NodeId fc1 = w.document()->findNode("fc1");
    QVERIFY(fc1 >= 0);
    w.scene()->selectNodes({fc1});
    trigger(w, "copy");
    QString text = QGuiApplication::clipboard()->text();
    QVERIFY2(text.contains("op: \"Linear\"") || text.contains("op: 'Linear'"), qPrintable(text));
    size_t before = w.document()->nodes().size();
    trigger(w, "paste");
    QCOMPARE(w.document()->nodes().size(), before + 1);
    QVERIFY(w.document()->findNode("fc1_2") >= 0);
    trigger(w, "duplicate");
    QCOMPARE(w.document()->nodes().size(), before + 2);
    trigger(w, "delete");
    QCOMPARE(w.document()->nodes().size(), before + 1);
    w.scene()->selectNodes({w.document()->findNode("fc1_2")});
    trigger(w, "cut");
    QCOMPARE(w.document()->nodes().size(), before);

    // Garbage: nothing changes, and the status bar says why.
    QGuiApplication::clipboard()->setText("this is not a graph {");
    std::string snapshot = w.document()->toText();
    trigger(w, "paste");
    QCOMPARE(w.document()->toText(), snapshot);
    QVERIFY2(w.lastMessage().contains("clipboard"), qPrintable(w.lastMessage()));

    trigger(w, "selectAll");
    QCOMPARE(w.scene()->selectedNodes().size(), w.document()->nodes().size());
  }

  // Make block, the block in the palette, expand and collapse, all through the
  // window's actions; the project with its block trains-compiles and saves.
  void blocksThroughTheWindow() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-lenet.nlproj")));
    GraphDocument* doc = w.document();
    // The library's blocks are in the palette from the start.
    QVERIFY(w.palette()->itemFor("ConvBNReLU"));
    QVERIFY(w.palette()->itemFor("MLPHead"));
    QString asked;
    w.setNamePrompt([&](const QString& title, const QString& suggestion) {
      asked = title + ": " + suggestion;
      return QString("ConvPool");
    });
    std::vector<NodeId> group{doc->findNode("conv1"), doc->findNode("relu1"),
                              doc->findNode("pool1")};
    netloom::Shape pooled = doc->analysis().nodes.at("pool1").outputs[0].shape;
    w.scene()->selectNodes(group);
    trigger(w, "makeBlock");
    QCOMPARE(asked, QString("Make block: Block"));
    NodeId inst = doc->findNode("convpool");
    QVERIFY(inst >= 0 && doc->isInstance(inst));
    QCOMPARE(doc->analysis().nodes.at("convpool").outputs[0].shape, pooled);
    QVERIFY(w.palette()->itemFor("ConvPool"));  // the project's block joins the palette
    QVERIFY(doc->analysis().ok());
    QCOMPARE(w.scene()->selectedNodes(), std::vector<NodeId>{inst});
    // Expand in place, then collapse back: the same project text.
    std::string made = doc->toText();
    trigger(w, "expandBlock");
    QCOMPARE(int(w.scene()->selectedNodes().size()), 3);
    QVERIFY(doc->findNode("convpool/conv1") >= 0);
    trigger(w, "collapseBlock");
    QCOMPARE(doc->toText(), made);
    // A refused gesture says why and changes nothing.
    w.scene()->selectNodes({doc->findNode("fc1")});
    trigger(w, "expandBlock");
    QVERIFY2(w.lastMessage().contains("block instance"), qPrintable(w.lastMessage()));
    QCOMPARE(doc->toText(), made);
    // It saves, and compiles by inlining: the parameters are named by instance path.
    QVERIFY(w.save());
    netloom::ParamStore store;
    netloom::CompileOptions o;
    o.batch = 4;
    auto prog = netloom::compile(doc->toProject().model(), o, store);
    QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
    QVERIFY(store.find("convpool/conv1.weight"));
  }

  // A large graph is laid out on a worker thread: the window keeps handling
  // events meanwhile, and the result lands as one undo step; an edit made during
  // the layout wins over it.
  void largeGraphsAreLaidOutInTheBackground() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-resnet.nlproj")));
    GraphDocument* doc = w.document();
    w.setBackgroundLayoutFrom(1);
    std::map<NodeId, QPointF> stacked;
    for (NodeId id : doc->nodes()) stacked[id] = QPointF(0, 0);
    doc->placeNodes(stacked, "stack");
    std::string before = doc->toText();
    int steps = doc->undoStack()->count();
    trigger(w, "layout");
    QVERIFY(w.layoutRunning());
    QVERIFY(testing::waitUntil([&] { return !w.layoutRunning(); }));
    QCOMPARE(doc->undoStack()->count(), steps + 1);
    for (const Connection& c : doc->connections()) QVERIFY(flowsOn(*doc, c));
    doc->undoStack()->undo();
    QCOMPARE(doc->toText(), before);
    // An edit while it runs: the stale result is dropped, and the window says so.
    trigger(w, "layout");
    QVERIFY(w.layoutRunning());
    doc->moveNodes({{doc->nodes().front(), QPointF(32, 32)}});
    std::string edited = doc->toText();
    QVERIFY(testing::waitUntil([&] { return !w.layoutRunning(); }));
    QCOMPARE(doc->toText(), edited);
    QVERIFY2(w.lastMessage().contains("changed"), qPrintable(w.lastMessage()));
  }

  void shortcutsReachTheActions() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-convbn.nlproj")));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w, testing::kHangMs));
    QCOMPARE(w.action("layout")->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_L));
    QCOMPARE(w.action("frame")->shortcut(), QKeySequence(Qt::Key_F));
    std::string before = w.document()->toText();
    w.view()->setFocus();
    // Scatter the nodes, then Ctrl+L: one undoable step.
    std::map<NodeId, QPointF> scattered;
    int i = 0;
    for (NodeId id : w.document()->nodes())
      scattered[id] = QPointF((i * 37) % 300, (i * 91) % 500), ++i;
    w.document()->placeNodes(scattered, "scatter");
    QTest::keyClick(w.view(), Qt::Key_L, Qt::ControlModifier);
    for (const Connection& c : w.document()->connections()) QVERIFY(flowsOn(*w.document(), c));
    QTest::keyClick(w.view(), Qt::Key_Z, Qt::ControlModifier);
    for (const auto& [id, p] : scattered) QCOMPARE(w.document()->node(id).pos, p);
    QTest::keyClick(w.view(), Qt::Key_Z, Qt::ControlModifier);
    QCOMPARE(w.document()->toText(), before);
    // F frames the selection.
    w.scene()->selectNodes({w.document()->findNode("conv1")});
    QTest::keyClick(w.view(), Qt::Key_F);
    QVERIFY(w.view()
                ->mapToScene(w.view()->viewport()->rect())
                .boundingRect()
                .contains(w.scene()->nodesRect({w.document()->findNode("conv1")})));
  }

  // With every dock open, LeNet loaded and a node selected, the window still fits
  // 1280x720, status bar and all; View > Reset Layout brings closed docks back.
  void fitsALaptopScreen() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-lenet.nlproj")));
    w.show();
    const QList<QDockWidget*> docks = w.findChildren<QDockWidget*>();
    QVERIFY(docks.size() >= 8);
    for (QDockWidget* d : docks) d->show();
    QApplication::processEvents();
    auto fits = [&] {
      const QSize m = w.minimumSizeHint().expandedTo(w.minimumSize());
      return m.width() <= 1280 && m.height() <= 720;
    };
    QVERIFY2(fits(), qPrintable(QString("minimum %1x%2")
                                    .arg(w.minimumSizeHint().width())
                                    .arg(w.minimumSizeHint().height())));
    const NodeId conv = w.document()->findNode("conv1");
    QVERIFY(conv >= 0);
    w.scene()->selectNodes({conv});
    QApplication::processEvents();
    QVERIFY(fits());
    w.resize(1280, 720);
    QApplication::processEvents();
    QCOMPARE(w.size(), QSize(1280, 720));
    QVERIFY(w.statusBar()->isVisible());
    QVERIFY(w.statusBar()->geometry().bottom() < w.height());
    // The canvas has the largest share of the window.
    QVERIFY(w.view()->width() * w.view()->height() > 1280 * 720 / 4);
    docks[0]->hide();
    trigger(w, "resetLayout");
    QVERIFY(docks[0]->isVisible());
    // Opened at this size, the graph is readable (names drawn, not boxes), from its
    // input on; the minimap keeps to a corner and can be hidden.
    QVERIFY(w.openFile(copyProject("fashion-lenet.nlproj")));
    QApplication::processEvents();
    QVERIFY2(w.view()->zoom() >= GraphView::kReadableZoom - 1e-9,
             qPrintable(QString::number(w.view()->zoom())));
    const QRectF seen = w.view()->mapToScene(w.view()->viewport()->rect()).boundingRect();
    QVERIFY(
        seen.contains(w.scene()->itemFor(w.document()->findNode("image"))->sceneBoundingRect()));
    QVERIFY(w.view()->miniMap()->isVisible());
    QVERIFY(w.view()->miniMap()->width() * w.view()->miniMap()->height() * 12 <
            w.view()->width() * w.view()->height());
    trigger(w, "minimap");
    QVERIFY(!w.view()->miniMap()->isVisible());
  }

  // A project opened without positions, or a new one, is drawn top to bottom,
  // inputs on each node's top edge; View > Draw Top to Bottom turns it to left to
  // right and back, one undo step each way; none of it is an edit the file keeps.
  void theGraphTurnsBetweenDownAndAcross() {
    MainWindow w;
    QString path = copyProject("fashion-lenet.nlproj");
    QVERIFY(w.openFile(path));
    GraphDocument* doc = w.document();
    QVERIFY(doc->vertical());
    QVERIFY(w.action("topToBottom")->isChecked());
    NodeItem* conv = w.scene()->itemFor(doc->findNode("conv1"));
    QCOMPARE(conv->inputPos(0).y(), conv->scenePos().y());
    QVERIFY(conv->outputPos(0).y() > conv->inputPos(0).y());
    for (const Connection& c : doc->connections()) QVERIFY(flowsOn(*doc, c));
    for (WireItem* wire : w.scene()->wires())
      QVERIFY(wire->path().currentPosition().y() > wire->path().elementAt(0).y);
    std::string before = doc->toText();
    QByteArray file = [&] {
      QFile f(path);
      f.open(QIODevice::ReadOnly);
      return f.readAll();
    }();
    QCOMPARE(QByteArray::fromStdString(before), file);

    w.action("topToBottom")->trigger();
    QVERIFY(!doc->vertical());
    QVERIFY(!w.action("topToBottom")->isChecked());
    for (const Connection& c : doc->connections()) QVERIFY(flowsOn(*doc, c));
    conv = w.scene()->itemFor(doc->findNode("conv1"));
    QCOMPARE(conv->inputPos(0).x(), conv->scenePos().x());
    QVERIFY(w.isWindowModified());
    doc->undoStack()->undo();
    QVERIFY(doc->vertical());
    QVERIFY(w.action("topToBottom")->isChecked());
    QCOMPARE(doc->toText(), before);
    // A new project is drawn top to bottom too.
    doc->directionForLayout(proto::Layout::LEFT_TO_RIGHT);
    trigger(w, "new");
    QVERIFY(doc->nodes().empty());
    QVERIFY(doc->vertical());
  }

  // On a laptop screen, with a node of long descriptions selected, every wrapped line
  // of the inspector is shown whole: each label is as tall as its text needs.
  void inspectorLinesAreNotClipped() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-lenet.nlproj")));
    w.resize(1366, 768);
    w.show();
    for (const char* node : {"conv1", "pool1", "loss"}) {
      w.scene()->selectNodes({w.document()->findNode(node)});
      // The dock's scroll area settles in passes: a scroll bar appears, the width
      // shrinks, the lines wrap again.
      for (int pass = 0; pass < 4; ++pass) QApplication::processEvents();
      int wrapped = 0;
      for (QLabel* l : w.inspector()->findChildren<QLabel*>()) {
        if (!l->isVisible() || !l->wordWrap() || l->text().isEmpty()) continue;
        ++wrapped;
        QVERIFY2(l->height() >= l->heightForWidth(l->width()),
                 qPrintable(QString("%1: %2 px for %3 px of '%4'")
                                .arg(node)
                                .arg(l->height())
                                .arg(l->heightForWidth(l->width()))
                                .arg(l->text())));
      }
      QVERIFY(wrapped >= 2);
    }
  }

  // Typing a learning rate at a person's speed, each key an edit that reloads the
  // form, leaves what was typed; unset optimizer fields show what the run uses.
  void aFocusedNumberKeepsWhatIsTyped() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-mlp.nlproj")));
    w.show();
    QApplication::setActiveWindow(&w);
    auto* lr = w.trainingSettings()->findChild<QDoubleSpinBox*>("optimizer.lr");
    QVERIFY(lr);
    auto* beta1 = w.trainingSettings()->findChild<QDoubleSpinBox*>("optimizer.beta1");
    QVERIFY(beta1);
    QCOMPARE(beta1->text(), QString("0.9"));
    lr->setFocus();
    QVERIFY(lr->hasFocus());
    lr->selectAll();
    QTest::keyClicks(lr, "0.002", Qt::NoModifier, 20);
    QApplication::processEvents();
    QCOMPARE(lr->text(), QString("0.002"));
    QCOMPARE(w.document()->train().optimizer().lr(), 0.002);
    // Small numbers read as themselves.
    lr->selectAll();
    QTest::keyClicks(lr, "1e-05");
    QCOMPARE(w.document()->train().optimizer().lr(), 1e-5);
    beta1->setFocus();
    QCOMPARE(lr->text(), QString("1e-05"));
  }

  void newFromTemplateIsUntitled() {
    MainWindow w;
    QVERIFY(w.files()->newFromTemplate(MainWindow::templatesDir() + "/fashion-resnet.nlproj"));
    QVERIFY(w.document()->filePath().isEmpty());
    QVERIFY(w.windowTitle().startsWith("Untitled"));
    QVERIFY(w.document()->findNode("stem") >= 0);
    QVERIFY(w.summary()->totalParams() > 0);
    QVERIFY(w.document()->analysis().ok());
  }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
