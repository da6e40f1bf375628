// Inside ONNX import: the mapper that writes NetLoom nodes for ONNX nodes. Patterns
// live in onnx_import_ops.cpp, one mapping per ONNX op in onnx_import_layers.cpp.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/interop/onnx_import.h"

namespace netloom::onnxio {

class Mapper {
 public:
  explicit Mapper(ImportState& state) : s(state) {}

  // GELU written out as element-wise nodes from `head` on: the nodes it takes, its
  // input and output, and the approximation ("none" or "tanh").
  std::optional<std::string> matchGelu(int head, std::vector<int>& region, std::string& x,
                                       std::string& out);
  // Maps node `i`; false when it cannot (the problem is recorded).
  bool map(int i);
  // Marks the outputs of a node that could not be mapped, so that its readers are
  // not reported again for reading them.
  void failed(const onnx::NodeProto& n);

  // The NetLoom reference for ONNX value `v` that node `n` reads.
  std::string ref(const onnx::NodeProto& n, const std::string& v);
  proto::NodeDef& add(const onnx::NodeProto& src, const std::string& op,
                      const std::vector<std::string>& inputs);
  static void setI(proto::NodeDef& d, const std::string& k, int64_t v);
  static void setF(proto::NodeDef& d, const std::string& k, double v);
  static void setB(proto::NodeDef& d, const std::string& k, bool v);
  static void setS(proto::NodeDef& d, const std::string& k, const std::string& v);
  static void setInts(proto::NodeDef& d, const std::string& k, const std::vector<int64_t>& v);

 private:
  // Refuses attributes outside `known`; false (and recorded) when there are any.
  bool onlyAttrs(const onnx::NodeProto& n, const std::set<std::string>& known);
  // A constant float input, or a recorded problem naming it.
  const ConstTensor* weightInput(const onnx::NodeProto& n, int k, const char* what);
  // Whether output k > 0 of `n` is read (an optional output NetLoom does not give).
  bool extraOutputsUsed(const onnx::NodeProto& n);
  void param(const std::string& node, const std::string& key, ConstTensor t, Shape shape);
  // The output of `n` as NetLoom node `d`.
  void produce(const onnx::NodeProto& n, const proto::NodeDef& d);
  // Symmetric pads [top, left, bottom, right] as NetLoom's [ph, pw].
  bool symmetricPads(const onnx::NodeProto& n, std::vector<int64_t>& pads);
  bool sameUpper(const onnx::NodeProto& n, const ConstTensor& w,
                 const std::vector<int64_t>& strides, const std::vector<int64_t>& dil);

  bool conv(const onnx::NodeProto& n, bool transposed);
  bool gemm(const onnx::NodeProto& n);
  bool matmul(const onnx::NodeProto& n);
  bool addNode(const onnx::NodeProto& n);
  bool batchNorm(const onnx::NodeProto& n);
  bool layerNorm(const onnx::NodeProto& n);
  bool pool(const onnx::NodeProto& n, bool average);
  bool globalPool(int i);
  bool flatten(const onnx::NodeProto& n);
  bool reshape(const onnx::NodeProto& n);
  bool softmax(const onnx::NodeProto& n);
  bool resize(const onnx::NodeProto& n);
  bool dropout(const onnx::NodeProto& n);
  bool concat(const onnx::NodeProto& n);
  bool pad(const onnx::NodeProto& n);
  // A convolution's or average pooling's input, through a zero Pad before it: the
  // value it reads and the padding [ph, pw] the Pad added.
  std::string paddedInput(const onnx::NodeProto& n, std::vector<int64_t>& extra);

  ImportState& s;
  std::set<std::string> m_failed;
  struct PadBefore {
    std::string input;
    int64_t ph = 0, pw = 0;
  };
  std::map<std::string, PadBefore> m_pads;  // Pad output -> what it pads, for its one reader
};

}  // namespace netloom::onnxio
