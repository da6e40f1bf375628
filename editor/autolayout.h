// Auto-layout: a layered drawing of the graph (or of some of its nodes), left to
// right or top to bottom as the document is drawn, by Graphviz's `dot` layout engine,
// sized from the editor's node boxes; past 1,500 nodes, where dot takes seconds, by
// layeredPositions (layered_layout.h).
#pragma once

#include <QPointF>
#include <QString>
#include <map>
#include <optional>
#include <vector>

#include "editor/document.h"

namespace netloom::editor {

// What the layout reads of a document, copied out so it can run on another thread
// while the user goes on working.
struct LayoutInput {
  struct Box {
    NodeId id;
    double width, height;
  };
  std::vector<Box> boxes;
  std::vector<std::pair<NodeId, NodeId>> edges;
  QPointF origin;         // where the drawing's top-left corner goes
  bool vertical = false;  // ranks run down the canvas (Layout.direction TOP_TO_BOTTOM)
};
// For the document's direction, or for `vertical` when given (to turn the drawing).
LayoutInput layoutInput(const GraphDocument& doc, const std::vector<NodeId>& ids,
                        std::optional<bool> vertical = std::nullopt);
// Runs the layout; touches no Qt object, so any one thread may run it at a time.
std::map<NodeId, QPointF> runLayout(const LayoutInput& in, QString* error = nullptr);

// Top-left positions for `ids` (every node when empty). The drawing of a subset keeps
// the subset's current top-left corner; wires to nodes outside it are ignored. An
// empty map with `error` set when Graphviz fails.
std::map<NodeId, QPointF> layeredLayout(const GraphDocument& doc, const std::vector<NodeId>& ids,
                                        QString* error = nullptr);

// Lays out and applies the result as one undoable "Auto-layout" step.
bool autoLayout(GraphDocument& doc, const std::vector<NodeId>& ids, QString* error = nullptr);

}  // namespace netloom::editor
