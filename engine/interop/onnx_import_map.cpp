// The mapper behind each op file's ONNX import (onnx_import_map.h): it reads ONNX
// nodes for the op files and writes the NetLoom nodes and weights they ask for.
#ifdef NETLOOM_WITH_ONNX

#include "engine/interop/onnx_import_map.h"

#include <type_traits>

namespace netloom::onnxio {

namespace {

void setAttrValue(proto::AttrValue& out, const AttrVal& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) out.set_i(x);
        if constexpr (std::is_same_v<T, double>) out.set_f(x);
        if constexpr (std::is_same_v<T, std::string>) out.set_s(x);
        if constexpr (std::is_same_v<T, bool>) out.set_b(x);
        if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          for (int64_t e : x) out.mutable_ints()->add_values(e);
        if constexpr (std::is_same_v<T, std::vector<double>>)
          for (double e : x) out.mutable_floats()->add_values(e);
      },
      v);
}

Attrs attrsOf(const proto::NodeDef& d) {
  Attrs a;
  for (const auto& [key, v] : d.attrs()) {
    switch (v.value_case()) {
      case proto::AttrValue::kI: a.set(key, v.i()); break;
      case proto::AttrValue::kF: a.set(key, v.f()); break;
      case proto::AttrValue::kS: a.set(key, v.s()); break;
      case proto::AttrValue::kB: a.set(key, v.b()); break;
      case proto::AttrValue::kInts:
        a.set(key, std::vector<int64_t>(v.ints().values().begin(), v.ints().values().end()));
        break;
      case proto::AttrValue::kFloats:
        a.set(key, std::vector<double>(v.floats().values().begin(), v.floats().values().end()));
        break;
      default: break;
    }
  }
  return a;
}

}  // namespace

OnnxNode readNode(const onnx::NodeProto& n) {
  OnnxNode o;
  o.opType = n.op_type();
  o.domain = n.domain();
  o.name = n.name();
  o.inputs.assign(n.input().begin(), n.input().end());
  o.outputs.assign(n.output().begin(), n.output().end());
  for (const onnx::AttributeProto& a : n.attribute()) {
    OnnxAttrValue& v = o.attrs[a.name()];
    v.i = a.i();
    v.f = a.f();
    v.s = a.s();
    v.ints.assign(a.ints().begin(), a.ints().end());
    v.floats.assign(a.floats().begin(), a.floats().end());
  }
  return o;
}

Mapper::Mapper(ImportState& state) : s(state) {
  for (const OpDef* op : OpRegistry::instance().all())
    for (const auto& [type, fn] : op->onnxImport) m_imports.emplace(type, &fn);
}

void Mapper::begin(int i) {
  m_index = i;
  m_node = readNode(s.node(i));
}

bool Mapper::map(int i) {
  begin(i);
  const onnx::NodeProto& n = s.node(i);
  if (!n.domain().empty() && n.domain() != "ai.onnx") {
    problem("ops of domain '" + n.domain() + "' have no NetLoom form");
    return false;
  }
  auto it = m_imports.find(n.op_type());
  if (it == m_imports.end()) {
    problem("the op has no NetLoom form");
    return false;
  }
  return (*it->second)(*this);
}

void Mapper::failed() {
  for (const std::string& o : m_node.outputs) m_failed.insert(o);
}

std::string Mapper::ref(const std::string& v) {
  if (auto it = s.refOf.find(v); it != s.refOf.end()) return it->second;
  if (!m_failed.count(v)) {
    problem(s.isConst(v) ? "its input '" + v +
                               "' is a constant, which NetLoom takes only as a layer's weight"
                         : "its input '" + v + "' is computed by no node NetLoom has");
    m_failed.insert(v);
  }
  return "?";
}

std::string Mapper::add(const std::string& op, const std::vector<std::string>& inputs,
                        const Attrs& attrs) {
  const onnx::NodeProto& src = s.node(m_index);
  proto::NodeDef* d = s.model.add_nodes();
  d->set_name(s.nameFor(src));
  d->set_op(op);
  for (const std::string& in : inputs) d->add_inputs(in);
  for (const auto& [key, v] : attrs.values()) setAttrValue((*d->mutable_attrs())[key], v);
  d->set_doc("ONNX " + src.op_type() + (src.name().empty() ? "" : " '" + src.name() + "'"));
  return d->name();
}

const OnnxNode* Mapper::soleReader(const std::string& v) const {
  auto it = s.readers.find(v);
  if (it == s.readers.end() || it->second.size() != 1 || s.done[size_t(it->second[0])])
    return nullptr;
  m_readerIndex = it->second[0];
  m_reader = readNode(s.node(m_readerIndex));
  return &m_reader;
}

void Mapper::take(const OnnxNode& reader) {
  (void)reader;  // the node soleReader last gave
  s.done[size_t(m_readerIndex)] = true;
  m_index = m_readerIndex;
  m_node = m_reader;
}

proto::NodeDef* Mapper::made(const std::string& name) const {
  for (proto::NodeDef& d : *s.model.mutable_nodes())
    if (d.name() == name) return &d;
  return nullptr;
}

bool Mapper::producer(const std::string& v, std::string& node, std::string& op,
                      Attrs& attrs) const {
  auto it = s.refOf.find(v);
  const proto::NodeDef* d = it == s.refOf.end() ? nullptr : made(it->second);
  if (!d) return false;
  node = d->name();
  op = d->op();
  attrs = attrsOf(*d);
  return true;
}

void Mapper::setAttr(const std::string& node, const std::string& key, AttrVal v) {
  if (proto::NodeDef* d = made(node)) {
    (*d->mutable_attrs())[key].Clear();
    setAttrValue((*d->mutable_attrs())[key], v);
  }
}

void Mapper::param(const std::string& node, const std::string& key, OnnxConst t, Shape shape) {
  t.shape = std::move(shape);
  s.params[node][key] = std::move(t);
}

const OnnxImportCtx::Pad* Mapper::padBefore(const std::string& v) const {
  auto it = m_pads.find(v);
  return it == m_pads.end() ? nullptr : &it->second;
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
