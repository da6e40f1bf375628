#include "editor/autolayout.h"

#include <graphviz/gvc.h>

#include <memory>
#include <set>

#include "editor/layered_layout.h"
#include "editor/scene.h"

namespace netloom::editor {

namespace {

constexpr double kPointsPerInch = 72.0;
constexpr double kNodeSep = 25;   // between boxes in a rank
constexpr double kRankSep = 100;  // between ranks: room for a shape label on every wire
// Top to bottom, shape labels sit beside the wires: ranks closer, nodes further apart.
constexpr double kVerticalNodeSep = 60;
constexpr double kVerticalRankSep = 50;
// Above this many nodes dot takes seconds; the simpler layered layout is used.
constexpr size_t kLargeLayout = 1500;

// Graphviz's attribute setters take mutable C strings.
void set(void* obj, const char* key, const std::string& value) {
  agsafeset(obj, const_cast<char*>(key), const_cast<char*>(value.c_str()), const_cast<char*>(""));
}

struct Context {
  GVC_t* gvc = gvContext();
  Agraph_t* g = nullptr;
  ~Context() {
    if (g) {
      gvFreeLayout(gvc, g);
      agclose(g);
    }
    gvFreeContext(gvc);
  }
};

}  // namespace

LayoutInput layoutInput(const GraphDocument& doc, const std::vector<NodeId>& ids,
                        std::optional<bool> vertical) {
  LayoutInput in;
  in.vertical = vertical.value_or(doc.vertical());
  std::vector<NodeId> nodes = ids.empty() ? doc.nodes() : ids;
  std::set<NodeId> chosen;
  in.origin = QPointF(1e300, 1e300);
  for (NodeId id : nodes) {
    if (!doc.contains(id) || !chosen.insert(id).second) continue;
    in.boxes.push_back(
        {id, NodeGeometry::kWidth,
         NodeGeometry::heightFor(in.vertical, doc.inputPortCount(id), doc.outputPortCount(id))});
    QPointF p = doc.node(id).pos;
    in.origin = QPointF(std::min(in.origin.x(), p.x()), std::min(in.origin.y(), p.y()));
  }
  if (ids.empty()) in.origin = QPointF(0, 0);
  for (const Connection& c : doc.connections())
    if (chosen.count(c.from) && chosen.count(c.to)) in.edges.push_back({c.from, c.to});
  return in;
}

namespace {

// Snapped to the canvas grid, as a hand-placed node would be.
QPointF onGrid(QPointF origin, double x, double y) {
  return QPointF(std::round((origin.x() + x) / GraphScene::kGrid) * GraphScene::kGrid,
                 std::round((origin.y() + y) / GraphScene::kGrid) * GraphScene::kGrid);
}

}  // namespace

std::map<NodeId, QPointF> runLayout(const LayoutInput& in, QString* error) {
  std::map<NodeId, QPointF> out;
  if (in.boxes.empty()) return out;
  if (in.boxes.size() > kLargeLayout) {
    // Ranks run along x; top to bottom, the drawing is made on its side and turned.
    std::vector<LayeredBox> boxes;
    std::map<NodeId, int> index;
    for (const LayoutInput::Box& b : in.boxes) {
      index[b.id] = int(boxes.size());
      boxes.push_back(in.vertical ? LayeredBox{b.height, b.width} : LayeredBox{b.width, b.height});
    }
    std::vector<std::pair<int, int>> edges;
    for (const auto& [from, to] : in.edges) edges.push_back({index.at(from), index.at(to)});
    auto corners = layeredPositions(
        boxes, edges,
        {in.vertical ? kVerticalRankSep : kRankSep, in.vertical ? kVerticalNodeSep : kNodeSep});
    for (size_t i = 0; i < in.boxes.size(); ++i) {
      auto [x, y] = corners[i];
      out[in.boxes[i].id] = in.vertical ? onGrid(in.origin, y, x) : onGrid(in.origin, x, y);
    }
    return out;
  }
  Context cx;
  cx.g = agopen(const_cast<char*>("netloom"), Agdirected, nullptr);
  set(cx.g, "rankdir", in.vertical ? "TB" : "LR");
  set(cx.g, "nodesep",
      std::to_string((in.vertical ? kVerticalNodeSep : kNodeSep) / kPointsPerInch));
  set(cx.g, "ranksep",
      std::to_string((in.vertical ? kVerticalRankSep : kRankSep) / kPointsPerInch));
  set(cx.g, "splines", "none");  // only node positions are read: no edge routing
  std::map<NodeId, Agnode_t*> gv;
  for (const LayoutInput::Box& b : in.boxes) {
    std::string name = "n" + std::to_string(b.id);
    Agnode_t* n = agnode(cx.g, const_cast<char*>(name.c_str()), 1);
    set(n, "shape", "box");
    set(n, "fixedsize", "true");
    set(n, "width", std::to_string(b.width / kPointsPerInch));
    set(n, "height", std::to_string(b.height / kPointsPerInch));
    set(n, "label", "");
    gv[b.id] = n;
  }
  for (const auto& [from, to] : in.edges) agedge(cx.g, gv.at(from), gv.at(to), nullptr, 1);
  if (gvLayout(cx.gvc, cx.g, "dot") != 0) {
    if (error) *error = QObject::tr("Graphviz could not lay out the graph");
    return out;
  }
  // Graphviz gives centres in points with y upwards; the canvas wants top-left
  // corners with y downwards, one point per scene unit.
  double minX = 1e300, maxY = -1e300;
  for (const auto& [id, n] : gv) {
    double w = ND_width(n) * kPointsPerInch, h = ND_height(n) * kPointsPerInch;
    minX = std::min(minX, ND_coord(n).x - w / 2);
    maxY = std::max(maxY, ND_coord(n).y + h / 2);
  }
  for (const auto& [id, n] : gv) {
    double w = ND_width(n) * kPointsPerInch, h = ND_height(n) * kPointsPerInch;
    double x = ND_coord(n).x - w / 2 - minX, y = maxY - (ND_coord(n).y + h / 2);
    out[id] = onGrid(in.origin, x, y);
  }
  return out;
}

std::map<NodeId, QPointF> layeredLayout(const GraphDocument& doc, const std::vector<NodeId>& ids,
                                        QString* error) {
  return runLayout(layoutInput(doc, ids), error);
}

bool autoLayout(GraphDocument& doc, const std::vector<NodeId>& ids, QString* error) {
  auto positions = layeredLayout(doc, ids, error);
  if (positions.empty()) return doc.nodes().empty();
  doc.placeNodes(positions, QObject::tr("Auto-layout"));
  return true;
}

}  // namespace netloom::editor
