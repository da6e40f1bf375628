// The layered layout for large graphs: every wire runs left to right, nothing
// overlaps, a chain stays on one line, branches sit either side of their join, a
// cycle still lays out, and a residual stack of thousands of nodes lays out through
// autoLayout as one undoable step.
#include <QtTest>
#include <algorithm>
#include <map>

#include "editor/autolayout.h"
#include "editor/layered_layout.h"
#include "editor/scene.h"
#include "engine/io/project_file.h"

using namespace netloom;
using namespace netloom::editor;

namespace {

using Corners = std::vector<std::pair<double, double>>;

// No two boxes of one column overlap (boxes of different columns cannot).
bool overlapFree(const std::vector<LayeredBox>& boxes, const Corners& at) {
  std::map<double, std::vector<std::pair<double, double>>> columns;
  for (size_t i = 0; i < boxes.size(); ++i)
    columns[at[i].first].push_back({at[i].second, at[i].second + boxes[i].height});
  for (auto& [x, spans] : columns) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second) return false;
  }
  return true;
}

std::string residualStack(int blocks) {
  std::string s =
      "model {\n  nodes { name: 'x' op: 'Input' attrs { key: 'shape' value { ints { values: [8, "
      "4, 4] } } } }\n";
  std::string prev = "x";
  for (int b = 0; b < blocks; ++b) {
    std::string p = "b" + std::to_string(b) + "_";
    auto node = [&](const std::string& name, const std::string& op, const std::string& in) {
      s += "  nodes { name: '" + p + name + "' op: '" + op + "' inputs: '" + in + "' }\n";
    };
    node("c", "ReLU", prev);
    node("n", "Sigmoid", p + "c");
    node("r", "ReLU", p + "n");
    s += "  nodes { name: '" + p + "add' op: 'Add' inputs: '" + p + "r' inputs: '" + prev + "' }\n";
    prev = p + "add";
  }
  return s + "}\n";
}

}  // namespace

class TestLayout : public QObject {
  Q_OBJECT

 private slots:
  void aChainIsOneRowLeftToRight() {
    std::vector<LayeredBox> boxes(50, {176, 70});
    std::vector<std::pair<int, int>> edges;
    for (int i = 1; i < 50; ++i) edges.push_back({i - 1, i});
    Corners at = layeredPositions(boxes, edges, {100, 25});
    for (int i = 0; i < 50; ++i) {
      QCOMPARE(at[i].second, 0.0);
      QCOMPARE(at[i].first, i * 276.0);
    }
  }

  void branchesSitEitherSideOfTheirJoin() {
    // a -> b, a -> c, b -> d, c -> d, and a late source e -> d.
    std::vector<LayeredBox> boxes(5, {100, 40});
    Corners at = layeredPositions(boxes, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {4, 3}});
    QVERIFY(overlapFree(boxes, at));
    QCOMPARE(at[1].first, at[2].first);
    QVERIFY(at[3].first > at[1].first);
    // The source read only by d is drawn just before it, not at the far left.
    QCOMPARE(at[4].first, at[1].first);
    double top = std::min(at[1].second, at[2].second),
           bottom = std::max(at[1].second, at[2].second);
    QVERIFY(at[3].second >= top && at[3].second <= bottom);
    QVERIFY(at[0].second >= top && at[0].second <= bottom);
  }

  void aCycleStillLaysOut() {
    std::vector<LayeredBox> boxes(4, {100, 40});
    Corners at = layeredPositions(boxes, {{0, 1}, {1, 2}, {2, 1}, {2, 3}, {3, 3}, {7, 1}});
    QCOMPARE(int(at.size()), 4);
    QVERIFY(overlapFree(boxes, at));
    QVERIFY(at[0].first < at[1].first && at[1].first < at[2].first && at[2].first < at[3].first);
    QVERIFY(layeredPositions({}, {}).empty());
  }

  // A source read by every tenth node of a 3,000-node chain, and a wire from end
  // to end: long wires take no dummies past a bound, and everything is still placed.
  void longWiresStayCheap() {
    const int n = 3000;
    std::vector<LayeredBox> boxes(n + 1, {176, 70});
    std::vector<std::pair<int, int>> edges;
    for (int i = 1; i < n; ++i) edges.push_back({i - 1, i});
    for (int i = 10; i < n; i += 10) edges.push_back({n, i});
    edges.push_back({0, n - 1});
    Corners at = layeredPositions(boxes, edges);
    QCOMPARE(int(at.size()), n + 1);
    QVERIFY(overlapFree(boxes, at));
    for (int i = 1; i < n; ++i) QVERIFY(at[i - 1].first < at[i].first);
    QVERIFY(at[n].first < at[10].first);  // the source sits before its first reader
  }

  void aLargeResidualStackLaysOutThroughAutoLayout() {
    auto project = parseProject(residualStack(600), "stack");
    QVERIFY2(project.ok(), project.ok() ? "" : project.error().message.c_str());
    GraphDocument doc;
    doc.setProject(*project);
    QVERIFY(doc.nodes().size() > 2000);  // past the size dot is used for
    std::string before = doc.toText();
    QString why;
    QVERIFY2(autoLayout(doc, {}, &why), qPrintable(why));
    std::vector<LayeredBox> boxes;
    Corners at;
    for (NodeId id : doc.nodes()) {
      boxes.push_back(
          {NodeGeometry::kWidth, NodeGeometry::height(std::max(doc.inputPortCount(id), 1))});
      at.push_back({doc.node(id).pos.x(), doc.node(id).pos.y()});
    }
    QVERIFY(overlapFree(boxes, at));
    for (const Connection& c : doc.connections())
      QVERIFY(doc.node(c.from).pos.x() < doc.node(c.to).pos.x());
    // The stack's spine does not drift: every node within a few rows of the first.
    double y0 = doc.node(doc.findNode("x")).pos.y();
    for (NodeId id : doc.nodes())
      QVERIFY2(std::abs(doc.node(id).pos.y() - y0) < 200,
               qPrintable(QString::fromStdString(doc.node(id).def.name())));
    doc.undoStack()->undo();
    QCOMPARE(doc.toText(), before);
  }
};

QTEST_MAIN(TestLayout)
#include "tst_layout.moc"
