// Inside ONNX export: how each NetLoom op of the evaluation graph becomes ONNX nodes
// and initializers. onnx_export.cpp decides which nodes are exported and with which
// weights; onnx_export_ops.cpp writes them.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/interop/onnx_common.h"

namespace netloom::onnxio {

// A weight as the export writes it: PyTorch's layout, as floats.
struct Weight {
  Shape shape;
  std::vector<float> values;
};

class Exporter {
 public:
  Exporter(const Graph& g, std::map<std::string, Weight> weights, onnx::GraphProto& out);

  // BatchNorm nodes folded into the convolution or linear that feeds them: producer
  // node -> BatchNorm node. Set before emitting.
  std::map<NodeId, NodeId> foldInto;
  std::set<NodeId> folded;  // the BatchNorm nodes that vanish

  // Writes node `id`; an op or attribute with no ONNX form is an error naming the node.
  Status emit(NodeId id);

  // Every ONNX value written for a NetLoom value, with the shape NetLoom infers for
  // it (the batch dimension as -1), for comparing with ONNX's shape inference.
  const std::map<std::string, Shape>& expected() const { return m_expected; }
  // The ONNX name of NetLoom value `v`.
  std::string valueName(ValueId v) const;

 private:
  const Node& node(NodeId id) const { return m_g.nodes[size_t(id)]; }
  const Shape& shapeOf(ValueId v) const { return m_g.values[size_t(v)].desc.shape; }
  std::string in(const Node& n, int k) const { return valueName(n.inputs[size_t(k)]); }
  // The name node `id`'s output 0 is written under: a folded BatchNorm's output
  // takes the place of the convolution's.
  std::string out(NodeId id);
  onnx::NodeProto& add(const std::string& op, const std::string& name,
                       const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs);
  // A fresh name for a helper value or node, never one the graph uses.
  std::string fresh(const std::string& base);
  std::string initializer(const std::string& name, const Shape& shape, std::vector<float> values,
                          bool exact = false);
  std::string ints(const std::string& name, const std::vector<int64_t>& values);
  std::string scalar(const std::string& name, float v);
  const Weight* weight(const std::string& name) const;
  Error noForm(const Node& n, const std::string& what) const;

  // An op that declares its ONNX form as data (onnx_form.h).
  Status form(NodeId id);
  Status linear(NodeId id);
  Status conv(NodeId id, bool transposed);
  Status matmul(NodeId id);
  Status pool(NodeId id, bool average);
  Status batchNorm(NodeId id);
  Status layerNorm(NodeId id);
  Status gelu(NodeId id);
  Status reshape(NodeId id);
  Status upsample(NodeId id);
  // The weight and bias of a convolution or linear, with a following BatchNorm folded in.
  Status foldedParams(NodeId id, Weight& w, Weight& b, bool& hasBias);

  const Graph& m_g;
  std::map<std::string, Weight> m_weights;
  onnx::GraphProto& m_out;
  std::map<std::string, Shape> m_expected;
  std::set<std::string> m_used;
};

}  // namespace netloom::onnxio
