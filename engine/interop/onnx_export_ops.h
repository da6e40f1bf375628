// Inside ONNX export: the writer each op's declared ONNX form writes through
// (OnnxExportCtx, engine/graph/onnx_lowering.h). onnx_export.cpp decides which nodes
// are exported and with which weights; onnx_export_ops.cpp writes them.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/graph/onnx_lowering.h"
#include "engine/interop/onnx_common.h"

namespace netloom::onnxio {

using Weight = OnnxWeight;

class Exporter : public OnnxExportCtx {
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

  // OnnxExportCtx, for node `m_cur`.
  const Node& node() const override { return m_g.nodes[size_t(m_cur)]; }
  const Shape& shape(ValueId v) const override { return m_g.values[size_t(v)].desc.shape; }
  DType dtype(ValueId v) const override { return m_g.values[size_t(v)].desc.dtype; }
  std::string name(ValueId v) const override { return m_g.values[size_t(v)].name; }
  std::string output() override;
  std::string fresh(const std::string& what) override;
  void add(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
           const std::vector<std::string>& outputs, const std::vector<OnnxAttr>& attrs) override;
  std::string initializer(const std::string& name, const Shape& shape, std::vector<float> values,
                          bool exact) override;
  std::string ints(const std::string& name, const std::vector<int64_t>& values) override;
  std::string scalar(const std::string& name, float v) override;
  const Weight* weight(ValueId v) const override;
  Status layerParams(int64_t channels, Weight& w, Weight& b, bool& hasBias) override;

 private:
  // A name no graph value or node takes yet, now taken.
  std::string unused(const std::string& base);
  // An op that declares its ONNX form as data (onnx_form.h).
  Status form();

  const Graph& m_g;
  std::map<std::string, Weight> m_weights;
  onnx::GraphProto& m_out;
  std::map<std::string, Shape> m_exact;  // parameters written under their own names
  std::map<std::string, Shape> m_expected;
  std::set<std::string> m_used;
  NodeId m_cur = 0;
};

}  // namespace netloom::onnxio
