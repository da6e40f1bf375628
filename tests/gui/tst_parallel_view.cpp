// The Parallel toolbar and what the canvas draws of it (offscreen), on the spirals
// MLP: two ranks data-parallel label each wire with its SBP and per-rank shape;
// fc1 split by columns and fc2 by rows (Megatron's pair) tints them, labels the
// wire between them split on its last axis and draws the all-gather into fc1 as a
// glyph whose tooltip says its bytes, and the Summary's last row says what a rank
// holds (the weights below 0.55× data parallelism's); a pipeline tints each stage and marks the
// wire that crosses; a split that cannot be is refused with the reason and changes
// nothing; every choice is one undoable edit of train.distributed, saved with the
// project.
#include <QComboBox>
#include <QSpinBox>
#include <QtTest>

#include "editor/panels.h"
#include "editor/scene.h"
#include "engine/train/parallel_layout.h"
#include "gui/main_window.h"
#include "gui/parallel_toolbar.h"

using namespace netloom;
using namespace netloom::editor;
using netloom::gui::MainWindow;

namespace {

WireItem* wireInto(MainWindow& w, const char* node, int port = 0) {
  return w.scene()->wireInto(w.document()->findNode(node), port);
}

void select(MainWindow& w, std::initializer_list<const char*> names) {
  w.scene()->clearSelection();
  for (const char* n : names) w.scene()->itemFor(w.document()->findNode(n))->setSelected(true);
}

}  // namespace

class TestParallelView : public QObject {
  Q_OBJECT

  std::unique_ptr<MainWindow> open() {
    auto w = std::make_unique<MainWindow>();
    const QString path = QFINDTESTDATA("../../projects/spirals.nlproj");
    if (!w->openFile(path)) return nullptr;
    return w;
  }

  void chooseWhole(MainWindow& w, int ranks, int strategy, int group = 2) {
    auto* r = w.findChild<QSpinBox*>("parallelRanks");
    auto* s = w.findChild<QComboBox*>("parallelStrategy");
    auto* g = w.findChild<QSpinBox*>("parallelGroup");
    QVERIFY(r && s && g);
    r->setValue(ranks);
    g->setValue(group);
    s->setCurrentIndex(strategy);
    emit s->activated(strategy);
  }

 private slots:
  void dataParallelLabelsEveryWire() {
    auto w = open();
    QVERIFY(w);
    QCOMPARE(wireInto(*w, "act1")->label(), QString("32×64"));  // one rank: shapes only
    chooseWhole(*w, 2, 0);
    QCOMPARE(w->document()->train().distributed().ranks(), 2);
    // Batch 32 per rank, planned over the 64 of a step.
    QCOMPARE(wireInto(*w, "act1")->label(), QString("S(0) (64/2)×64"));
    QVERIFY(wireInto(*w, "act1")->boxing().isEmpty());
    w->document()->undoStack()->undo();
    QVERIFY(w->document()->train().distributed().ranks() <= 1);
    QCOMPARE(wireInto(*w, "act1")->label(), QString("32×64"));
  }

  void megatronPairIsDrawn() {
    auto w = open();
    QVERIFY(w);
    chooseWhole(*w, 2, 1);
    select(*w, {"fc1"});
    QVERIFY(w->findChild<QAction*>("splitColumn"));
    w->findChild<QAction*>("splitColumn")->trigger();
    select(*w, {"fc2"});
    w->findChild<QAction*>("splitRow")->trigger();
    const auto& hints = w->document()->train().distributed().sbp();
    QCOMPARE(hints.size(), 2);
    QCOMPARE(QString::fromStdString(hints[0].signature()), QString("B | S(0), S(0) -> S(1)"));
    QCOMPARE(QString::fromStdString(hints[1].signature()), QString("S(1) | S(1), P -> P"));
    QCOMPARE(wireInto(*w, "act1")->label(), QString("S(1) 64×(64/2)"));
    const QString gather = wireInto(*w, "fc1")->boxing();
    QVERIFY2(gather.startsWith("all-gather S(0) -> B, ") && gather.contains("per rank"),
             qPrintable(gather));
    const QString tip = w->scene()->itemFor(w->document()->findNode("fc1"))->toolTip();
    QVERIFY2(tip.contains("weights split over 2 ranks"), qPrintable(tip));
    QVERIFY(w->document()->toText().find("signature: \"S(1) | S(1), P -> P\"") !=
            std::string::npos);
    // What a rank holds: the split layers' weights halved, in the Summary too.
    proto::Project data = w->document()->toProject();
    data.mutable_train()->mutable_distributed()->set_tensor_parallel(0);
    data.mutable_train()->mutable_distributed()->clear_sbp();
    const double ratio =
        double(w->document()->parallel().weights) / double(layoutParallel(data).weights);
    QVERIFY2(ratio < 0.55, qPrintable(QString::number(ratio)));
    auto* summary = w->findChild<SummaryWidget*>();
    QVERIFY(summary);
    const int last = summary->model()->rowCount() - 1;
    QCOMPARE(summary->cellText(last, 0), QString("Per rank"));
    QCOMPARE(summary->cellText(last, 1), QString("tensor parallel ×2 of 2 ranks"));
    QCOMPARE(summary->cellText(last, 2),
             "weights " + humanBytes(double(w->document()->parallel().weights)));
    w->document()->undoStack()->undo();  // fc2's split goes, fc1's stays
    QCOMPARE(w->document()->train().distributed().sbp().size(), 1);
  }

  void badSplitsAreRefused() {
    auto w = open();
    QVERIFY(w);
    chooseWhole(*w, 2, 1);
    const std::string before = w->document()->toText();
    select(*w, {"act1"});  // Tanh has no weights to split by columns
    QVERIFY(!w->parallelToolbar()->splitSelection("column"));
    QVERIFY2(w->lastMessage().contains("node 'act1' cannot be split by column"),
             qPrintable(w->lastMessage()));
    // Three ranks: fc1's 64 outputs do not divide, named with the node.
    QCOMPARE(w->document()->toText(), before);
    chooseWhole(*w, 3, 1, 3);
    const std::string three = w->document()->toText();
    select(*w, {"fc1"});
    QVERIFY(!w->parallelToolbar()->splitSelection("column"));
    QVERIFY2(w->lastMessage().contains("does not divide by 3"), qPrintable(w->lastMessage()));
    QCOMPARE(w->document()->toText(), three);
  }

  void pipelineStagesAreTinted() {
    auto w = open();
    QVERIFY(w);
    chooseWhole(*w, 2, 2, 2);
    QCOMPARE(w->document()->train().distributed().pipeline_stages(), 2);
    int crossing = 0;
    for (WireItem* wire : w->scene()->wires())
      if (!wire->boxing().isEmpty()) {
        ++crossing;
        QVERIFY2(wire->boxing().contains("sent from pipeline stage 0 to stage 1"),
                 qPrintable(wire->boxing()));
      }
    QCOMPARE(crossing, 1);
    const QString tip = w->scene()->itemFor(w->document()->findNode("logits"))->toolTip();
    QVERIFY2(tip.contains("pipeline stage 1 of 2"), qPrintable(tip));
    auto stageOf = [&](const char* node) {
      return w->scene()->itemFor(w->document()->findNode(node))->toolTip();
    };
    // By hand: fc1 alone in stage 0, the rest after it.
    select(*w, {"act1"});
    QVERIFY(w->parallelToolbar()->placeSelection(1));
    QVERIFY2(stageOf("fc1").contains("pipeline stage 0 of 2"), qPrintable(stageOf("fc1")));
    QVERIFY2(stageOf("act1").contains("pipeline stage 1 of 2"), qPrintable(stageOf("act1")));
    QVERIFY2(stageOf("fc2").contains("pipeline stage 1 of 2"), qPrintable(stageOf("fc2")));
    QVERIFY(w->document()->toText().find("stages {") != std::string::npos);
    // A node placed before one ahead of it is refused, naming both.
    const std::string before = w->document()->toText();
    select(*w, {"fc2"});
    QVERIFY(!w->parallelToolbar()->placeSelection(0));
    QVERIFY2(w->lastMessage().contains("node 'fc2' is placed in pipeline stage 0, before 'act1'"),
             qPrintable(w->lastMessage()));
    QCOMPARE(w->document()->toText(), before);
    w->document()->undoStack()->undo();
    QVERIFY(w->document()->train().distributed().stages().empty());
  }
};

QTEST_MAIN(TestParallelView)
#include "tst_parallel_view.moc"
