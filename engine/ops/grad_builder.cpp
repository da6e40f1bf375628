#include "engine/ops/grad_builder.h"

#include "engine/ops/internal_ops.h"

namespace netloom {

GradBuilder::GradBuilder(Graph& g, NodeId node, std::map<ValueId, ValueId>& grads)
    : m_graph(g), m_node(g.nodes[node]), m_grads(grads) {}

ValueId GradBuilder::outGrad(int i) const {
  auto it = m_grads.find(m_node.outputs[i]);
  return it == m_grads.end() ? kNoValue : it->second;
}

bool GradBuilder::needsGrad(int i) const {
  return m_graph.values[m_node.inputs[i]].requiresGrad;
}

std::vector<ValueId> GradBuilder::emitN(const std::string& opName, std::vector<ValueId> inputs,
                                        Attrs attrs) {
  const OpDef* op = OpRegistry::instance().find(opName);
  if (!op) {
    m_error = "internal: no op '" + opName + "'";
    return {};
  }
  auto resolved = resolveAttrs(*op, attrs);
  Node n;
  n.name = m_node.name + "/grad/" + opName + std::to_string(m_graph.nodes.size());
  n.op = op;
  n.attrs = resolved ? *resolved : attrs;
  n.inputs = std::move(inputs);
  n.backward = true;
  n.origin = m_node.name;
  auto id = m_graph.addNode(std::move(n));
  if (!id) {
    m_error = id.error().message;
    return {};
  }
  return m_graph.nodes[*id].outputs;
}

void GradBuilder::addGrad(int i, ValueId grad) {
  if (grad == kNoValue || !needsGrad(i)) return;
  ValueId target = m_node.inputs[i];
  auto it = m_grads.find(target);
  if (it == m_grads.end()) {
    m_grads[target] = grad;
  } else {
    it->second = emit(internal_ops::kAdd, {it->second, grad});
  }
}

}  // namespace netloom
