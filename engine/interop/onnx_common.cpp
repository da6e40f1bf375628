// ONNX tensors, attributes and checks shared by export and import (onnx_common.h).
#ifdef NETLOOM_WITH_ONNX

#include "engine/interop/onnx_common.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>

namespace netloom::onnxio {

namespace {

// ONNX stores raw_data little-endian whatever the host; reverse each element where
// the host is not.
template <class T>
std::string toLittleEndian(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  if constexpr (std::endian::native == std::endian::big)
    for (size_t k = 0; k < values.size(); ++k)
      std::reverse(bytes.begin() + k * sizeof(T), bytes.begin() + (k + 1) * sizeof(T));
  return bytes;
}

template <class T>
std::vector<T> fromLittleEndian(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::string copy = bytes;
  if constexpr (std::endian::native == std::endian::big)
    for (size_t k = 0; k < out.size(); ++k)
      std::reverse(copy.begin() + k * sizeof(T), copy.begin() + (k + 1) * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), copy.data(), out.size() * sizeof(T));
  return out;
}

template <class From, class To>
std::vector<To> convert(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

}  // namespace

onnx::TensorProto floatTensor(const std::string& name, const Shape& shape,
                              const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t.add_dims(d);
  t.set_raw_data(toLittleEndian(values));
  return t;
}

onnx::TensorProto int64Tensor(const std::string& name, const Shape& shape,
                              const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : shape) t.add_dims(d);
  t.set_raw_data(toLittleEndian(values));
  return t;
}

Result<ConstTensor> readTensor(const onnx::TensorProto& t) {
  const std::string what = "tensor '" + t.name() + "'";
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return makeError(what + " keeps its data in an external file, which is not read");
  ConstTensor c;
  for (int64_t d : t.dims()) {
    if (d < 0) return makeError(what + " has a negative dimension");
    c.shape.push_back(d);
  }
  const int64_t n = numel(c.shape);
  const bool raw = t.has_raw_data();
  using TP = onnx::TensorProto;
  switch (t.data_type()) {
    case TP::FLOAT:
      c.f = raw ? fromLittleEndian<float>(t.raw_data())
                : std::vector<float>(t.float_data().begin(), t.float_data().end());
      break;
    case TP::DOUBLE:
      c.f = raw ? convert<double, float>(fromLittleEndian<double>(t.raw_data()))
                : convert<double, float>({t.double_data().begin(), t.double_data().end()});
      break;
    case TP::INT64:
      c.isFloat = false;
      c.i = raw ? fromLittleEndian<int64_t>(t.raw_data())
                : std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end());
      break;
    case TP::INT32:
    case TP::INT16:
    case TP::INT8:
    case TP::UINT8:
    case TP::UINT16:
    case TP::BOOL:
      c.isFloat = false;
      if (!raw) {
        c.i = convert<int32_t, int64_t>({t.int32_data().begin(), t.int32_data().end()});
      } else if (t.data_type() == TP::INT32) {
        c.i = convert<int32_t, int64_t>(fromLittleEndian<int32_t>(t.raw_data()));
      } else if (t.data_type() == TP::INT16) {
        c.i = convert<int16_t, int64_t>(fromLittleEndian<int16_t>(t.raw_data()));
      } else if (t.data_type() == TP::UINT16) {
        c.i = convert<uint16_t, int64_t>(fromLittleEndian<uint16_t>(t.raw_data()));
      } else if (t.data_type() == TP::INT8) {
        c.i = convert<int8_t, int64_t>(fromLittleEndian<int8_t>(t.raw_data()));
      } else {
        c.i = convert<uint8_t, int64_t>(fromLittleEndian<uint8_t>(t.raw_data()));
      }
      break;
    default:
      return makeError(what + " has element type " + TP::DataType_Name(t.data_type()) +
                       ", which has no NetLoom form");
  }
  if (c.size() != n)
    return makeError(what + " holds " + std::to_string(c.size()) + " values for shape " +
                     shapeToString(c.shape));
  return c;
}

onnx::AttributeProto attrInt(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

onnx::AttributeProto attrFloat(const std::string& name, float v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

onnx::AttributeProto attrInts(const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

onnx::AttributeProto attrString(const std::string& name, const std::string& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

NodeAttrs::NodeAttrs(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) m_by[a.name()] = &a;
}

const onnx::AttributeProto* NodeAttrs::get(const std::string& name) const {
  auto it = m_by.find(name);
  return it == m_by.end() ? nullptr : it->second;
}

int64_t NodeAttrs::i(const std::string& name, int64_t def) const {
  const auto* a = get(name);
  return a ? a->i() : def;
}

float NodeAttrs::f(const std::string& name, float def) const {
  const auto* a = get(name);
  return a ? a->f() : def;
}

std::string NodeAttrs::s(const std::string& name, const std::string& def) const {
  const auto* a = get(name);
  return a ? a->s() : def;
}

std::vector<int64_t> NodeAttrs::ints(const std::string& name, std::vector<int64_t> def) const {
  const auto* a = get(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
}

std::vector<std::string> NodeAttrs::names() const {
  std::vector<std::string> out;
  for (const auto& [name, a] : m_by) out.push_back(name);
  return out;
}

Status checkModel(const onnx::ModelProto& model, const std::string& what) {
  try {
    onnx::checker::check_model(model);
    // Inference works on a copy: it adds value_info, which the caller may not want.
    onnx::ModelProto copy = model;
    onnx::ShapeInferenceOptions strict(/*check_type=*/true, /*strict_mode=*/1);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    return makeError(what + ": the ONNX checker refuses it: " + e.what());
  }
  return {};
}

std::optional<Shape> shapeOf(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return std::nullopt;
  Shape s;
  for (const auto& d : v.type().tensor_type().shape().dim())
    s.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return s;
}

std::map<std::string, Shape> shapesOf(const onnx::GraphProto& g) {
  std::map<std::string, Shape> out;
  for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
    for (const auto& v : *list)
      if (auto s = shapeOf(v)) out[v.name()] = *s;
  for (const auto& t : g.initializer()) out[t.name()] = Shape(t.dims().begin(), t.dims().end());
  return out;
}

void setTensorType(onnx::ValueInfoProto& v, int32_t elemType, const Shape& shape) {
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto* sh = tt->mutable_shape();
  for (int64_t d : shape) {
    auto* dim = sh->add_dim();
    if (d < 0)
      dim->set_dim_param(kBatchDim);
    else
      dim->set_dim_value(d);
  }
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
