// The handle an op's gradient rule (OpDef::grad) writes its backward nodes through.
// The autodiff pass (engine/compiler/autodiff.cpp) makes one per forward node.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/graph/graph.h"

namespace netloom {

class GradBuilder {
 public:
  GradBuilder(Graph& g, NodeId node, std::map<ValueId, ValueId>& grads);

  const Attrs& attrs() const { return m_node.attrs; }
  ValueId input(int i) const { return m_node.inputs[i]; }  // data inputs, then parameters
  ValueId output(int i) const { return m_node.outputs[i]; }
  ValueId outGrad(int i = 0) const;  // kNoValue when none reached it
  bool needsGrad(int i) const;
  const TensorDesc& desc(ValueId v) const { return m_graph.values[v].desc; }
  int numInputs() const { return static_cast<int>(m_node.inputs.size()); }

  // Appends a backward node of `op` and returns its outputs (shapes inferred).
  std::vector<ValueId> emitN(const std::string& op, std::vector<ValueId> inputs, Attrs attrs = {});
  ValueId emit(const std::string& op, std::vector<ValueId> inputs, Attrs attrs = {}) {
    auto outs = emitN(op, std::move(inputs), std::move(attrs));
    return outs.empty() ? kNoValue : outs[0];
  }
  // Adds `grad` to the gradient of input `i` (summing with what is already there).
  void addGrad(int i, ValueId grad);

  const std::string& error() const { return m_error; }

 private:
  Graph& m_graph;
  Node m_node;  // a copy: emitting nodes may reallocate the node list
  std::map<ValueId, ValueId>& m_grads;
  std::string m_error;
};

}  // namespace netloom
