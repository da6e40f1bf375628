// What ONNX export and import share inside netloom_interop (built with libonnx only):
// tensors to and from TensorProto, attribute readers and writers, and the checker
// every model passes before it is written or read.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/onnx_lowering.h"
#include "engine/util/status.h"
#include "kernels/core/tensor.h"

namespace netloom::onnxio {

inline constexpr int64_t kOpset = 17;
inline constexpr int64_t kIrVersion = 8;
// The name of the dynamic batch dimension of every exported input and output.
inline constexpr const char* kBatchDim = "batch";

// A float tensor as an initializer: little-endian raw_data.
onnx::TensorProto floatTensor(const std::string& name, const Shape& shape,
                              const std::vector<float>& values);
onnx::TensorProto int64Tensor(const std::string& name, const Shape& shape,
                              const std::vector<int64_t>& values);

// A constant tensor's values, read from raw_data or the typed fields. Floats and
// doubles come back as floats, every integer type (and bool) as int64.
using ConstTensor = OnnxConst;  // engine/graph/onnx_lowering.h
// Errors name the tensor and what it holds that cannot be read (external data, an
// element type with no float or integer reading, a size that does not match).
Result<ConstTensor> readTensor(const onnx::TensorProto& t);

// Attribute writers.
onnx::AttributeProto attrInt(const std::string& name, int64_t v);
onnx::AttributeProto attrFloat(const std::string& name, float v);
onnx::AttributeProto attrInts(const std::string& name, const std::vector<int64_t>& v);
onnx::AttributeProto attrString(const std::string& name, const std::string& v);

// A node's attributes by name, with readers that take a default.
class NodeAttrs {
 public:
  explicit NodeAttrs(const onnx::NodeProto& n);
  bool has(const std::string& name) const { return m_by.count(name) != 0; }
  int64_t i(const std::string& name, int64_t def) const;
  float f(const std::string& name, float def) const;
  std::string s(const std::string& name, const std::string& def) const;
  std::vector<int64_t> ints(const std::string& name, std::vector<int64_t> def = {}) const;
  const onnx::AttributeProto* get(const std::string& name) const;
  // Every attribute name the node carries, for refusing those a mapping does not read.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, const onnx::AttributeProto*> m_by;
};

// libonnx's full check: the model checker, then strict shape inference with type
// checks (what onnx.checker.check_model(m, full_check=True) does). The message
// names `what` and the checker's complaint.
Status checkModel(const onnx::ModelProto& model, const std::string& what);

// A value's shape as shape inference or the model states it: -1 for a dimension
// that is symbolic or unknown; nullopt when the value has no tensor shape at all.
std::optional<Shape> shapeOf(const onnx::ValueInfoProto& v);
// Every value's shape in `g` (inputs, outputs, value_info, initializers).
std::map<std::string, Shape> shapesOf(const onnx::GraphProto& g);

// A tensor value type (float, or another element type) of the given shape, where -1
// stands for the batch dimension.
void setTensorType(onnx::ValueInfoProto& v, int32_t elemType, const Shape& shape);

}  // namespace netloom::onnxio
