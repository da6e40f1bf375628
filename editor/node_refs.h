// Small helpers on node definitions that the document's source files share (not
// part of the editor's interface).
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "editor/document.h"
#include "engine/graph/graph.h"

namespace netloom::editor {

// "node" or "node:port" -> (node, port); an empty or malformed reference yields no node.
inline std::pair<std::string, int> splitRef(const std::string& ref) {
  return splitInputRef(ref);
}
inline std::string joinRef(const std::string& node, int port) {
  return joinInputRef(node, port);
}

// Unconnected trailing inputs are simply absent in the file.
inline void trimInputs(proto::NodeDef& def) {
  while (def.inputs_size() && def.inputs(def.inputs_size() - 1).empty())
    def.mutable_inputs()->RemoveLast();
}

inline void setInput(proto::NodeDef& def, int port, const std::string& ref) {
  while (def.inputs_size() <= port) def.add_inputs();
  def.set_inputs(port, ref);
  trimInputs(def);
}

inline bool sameNode(const DocNode& a, const DocNode& b) {
  return a.pos == b.pos && a.def.SerializeAsString() == b.def.SerializeAsString();
}

}  // namespace netloom::editor
