// Small helpers on node definitions that the document's source files share (not
// part of the editor's interface).
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "editor/document.h"

namespace netloom::editor {

// "node" or "node:port" -> (node, port); an empty or malformed reference yields no node.
inline std::pair<std::string, int> splitRef(const std::string& ref) {
  auto colon = ref.rfind(':');
  if (colon == std::string::npos) return {ref, 0};
  std::string port = ref.substr(colon + 1);
  if (port.empty() || !std::all_of(port.begin(), port.end(), ::isdigit)) return {ref, 0};
  return {ref.substr(0, colon), std::stoi(port)};
}

inline std::string joinRef(const std::string& node, int port) {
  return port == 0 ? node : node + ":" + std::to_string(port);
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
