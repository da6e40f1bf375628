// Inside ONNX import: the mapper that writes NetLoom nodes for ONNX nodes. Each op
// file declares the ONNX ops it maps (OpDef::onnxImport) and writes through this
// mapper's OnnxImportCtx; patterns of several nodes are found in onnx_import_ops.cpp.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/onnx_lowering.h"
#include "engine/interop/onnx_import.h"

namespace netloom::onnxio {

// One ONNX node as op files read it.
OnnxNode readNode(const onnx::NodeProto& n);

class Mapper : public OnnxImportCtx {
 public:
  explicit Mapper(ImportState& state);

  // An element-wise op written out as arithmetic from node `head` on (OnnxPointwise):
  // the nodes it takes, its input and output, and the attributes of the variant it
  // computes.
  std::optional<Attrs> matchPointwise(int head, const OnnxPointwise& p, std::vector<int>& region,
                                      std::string& x, std::string& out);
  // Maps node `i` by the op file that declares its ONNX op; false when it cannot
  // (the problem is recorded).
  bool map(int i);
  // Makes node `i` the one being mapped.
  void begin(int i);
  // Marks the outputs of the node being mapped, which could not be, so that its
  // readers are not reported again for reading them.
  void failed();

  // OnnxImportCtx.
  const OnnxNode& node() const override { return m_node; }
  int64_t opset() const override { return s.opset; }
  const OnnxConst* constOf(const std::string& v) const override { return s.constOf(v); }
  const Shape* shapeOf(const std::string& v) const override { return s.shapeOf(v); }
  int users(const std::string& v) const override { return s.users(v); }
  const OnnxNode* soleReader(const std::string& v) const override;
  void take(const OnnxNode& reader) override;
  std::string ref(const std::string& v) override;
  std::string add(const std::string& op, const std::vector<std::string>& inputs,
                  const Attrs& attrs) override;
  bool producer(const std::string& v, std::string& node, std::string& op,
                Attrs& attrs) const override;
  void setAttr(const std::string& node, const std::string& key, AttrVal v) override;
  void param(const std::string& node, const std::string& key, OnnxConst t, Shape shape) override;
  void alias(const std::string& v, const std::string& ref) override { s.refOf[v] = ref; }
  void problem(const std::string& what) override { s.problem(s.node(m_index), what); }
  void setPad(const std::string& v, Pad p) override { m_pads[v] = std::move(p); }
  const Pad* padBefore(const std::string& v) const override;

 private:
  proto::NodeDef* made(const std::string& name) const;

  ImportState& s;
  // The ONNX op type -> the mapping an op file declares for it.
  std::map<std::string, const std::function<bool(OnnxImportCtx&)>*> m_imports;
  int m_index = 0;  // the node being mapped (or taken into the mapping)
  OnnxNode m_node;
  mutable OnnxNode m_reader;
  mutable int m_readerIndex = -1;
  std::set<std::string> m_failed;
  std::map<std::string, Pad> m_pads;  // Pad output -> what it pads, for its one reader
};

}  // namespace netloom::onnxio
