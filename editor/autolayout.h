// Auto-layout: a layered left-to-right drawing of the graph (or of some of its
// nodes) by Graphviz's `dot` layout engine, sized from the editor's node boxes.
#pragma once

#include <QPointF>
#include <QString>
#include <map>
#include <vector>

#include "editor/document.h"

namespace netloom::editor {

// Top-left positions for `ids` (every node when empty). The drawing of a subset keeps
// the subset's current top-left corner; wires to nodes outside it are ignored. An
// empty map with `error` set when Graphviz fails.
std::map<NodeId, QPointF> layeredLayout(const GraphDocument& doc, const std::vector<NodeId>& ids,
                                        QString* error = nullptr);

// Lays out and applies the result as one undoable "Auto-layout" step.
bool autoLayout(GraphDocument& doc, const std::vector<NodeId>& ids, QString* error = nullptr);

}  // namespace netloom::editor
