// The writer behind each op's ONNX form (onnx_export_ops.h). An op is written only
// where its declared form computes what NetLoom computes; anything else is refused
// by name rather than exported approximately.
#ifdef NETLOOM_WITH_ONNX

#include "engine/interop/onnx_export_ops.h"

#include <cmath>

#include "engine/interop/onnx_form.h"

namespace netloom::onnxio {

Exporter::Exporter(const Graph& g, std::map<std::string, Weight> weights, onnx::GraphProto& out)
    : m_g(g), m_weights(std::move(weights)), m_out(out) {
  for (const Value& v : g.values) m_used.insert(v.name);
  for (const Node& n : g.nodes) m_used.insert(n.name);
}

std::string Exporter::output() {
  ValueId v = node().outputs[0];
  if (auto it = foldInto.find(m_cur); it != foldInto.end())
    v = m_g.nodes[size_t(it->second)].outputs[0];
  Shape s = shape(v);
  if (!s.empty()) s[0] = -1;
  m_expected[name(v)] = s;
  return name(v);
}

void Exporter::add(const std::string& op, const std::string& name,
                   const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                   const std::vector<OnnxAttr>& attrs) {
  onnx::NodeProto* p = m_out.add_node();
  p->set_op_type(op);
  p->set_name(name);
  m_used.insert(name);
  for (const std::string& i : inputs) p->add_input(i);
  for (const std::string& o : outputs) p->add_output(o);
  for (const OnnxAttr& a : attrs)
    *p->add_attribute() = std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) return attrInt(a.name, v);
          if constexpr (std::is_same_v<T, float>) return attrFloat(a.name, v);
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) return attrInts(a.name, v);
          if constexpr (std::is_same_v<T, std::string>) return attrString(a.name, v);
        },
        a.value);
}

std::string Exporter::unused(const std::string& base) {
  std::string name = base;
  for (int k = 2; m_used.count(name); ++k) name = base + "_" + std::to_string(k);
  m_used.insert(name);
  return name;
}

std::string Exporter::fresh(const std::string& what) {
  return unused(node().name + "/" + what);
}

std::string Exporter::initializer(const std::string& name, const Shape& shape,
                                  std::vector<float> values, bool exact) {
  // A parameter keeps its NetLoom name ("conv1.weight"), which no helper takes; one
  // that two nodes share (model.shared) is written once.
  if (exact) {
    auto it = m_exact.find(name);
    if (it != m_exact.end() && it->second == shape) return name;
    if (it == m_exact.end()) m_exact[name] = shape;
  }
  std::string n = exact && m_exact[name] == shape ? name : unused(name);
  *m_out.add_initializer() = floatTensor(n, shape, values);
  return n;
}

std::string Exporter::ints(const std::string& name, const std::vector<int64_t>& values) {
  std::string n = unused(name);
  *m_out.add_initializer() = int64Tensor(n, {int64_t(values.size())}, values);
  return n;
}

std::string Exporter::scalar(const std::string& name, float v) {
  std::string n = unused(name);
  *m_out.add_initializer() = floatTensor(n, {}, {v});
  return n;
}

const Weight* Exporter::weight(ValueId v) const {
  auto it = m_weights.find(name(v));
  return it == m_weights.end() ? nullptr : &it->second;
}

Status Exporter::emit(NodeId id) {
  m_cur = id;
  if (folded.count(id)) return {};
  const OpDef& op = *node().op;
  if (!op.onnxForm.empty()) return form();
  if (op.onnxExport) return op.onnxExport(*this);
  if (op.role == OpRole::Loss || op.role == OpRole::Metric)
    return noForm("a loss or metric inside the model's outputs");
  return noForm("the op");
}

Status Exporter::layerParams(int64_t channels, Weight& w, Weight& b, bool& hasBias) {
  const Node& n = node();
  const Weight* wp = weight(n.inputs[1]);
  if (!wp) return error("no weight '" + name(n.inputs[1]) + "'");
  w = *wp;
  hasBias = n.inputs.size() > 2;
  b = Weight{{channels}, std::vector<float>(size_t(channels), 0.f)};
  if (hasBias) b = *weight(n.inputs[2]);
  auto it = foldInto.find(m_cur);
  if (it == foldInto.end()) return {};
  // y = (conv(x) + b - mean) · γ/√(var + ε) + β: scale each output channel's
  // weights by γ/√(var + ε) and shift its bias.
  const Node& bn = m_g.nodes[size_t(it->second)];
  const size_t np = bn.inputs.size();
  const bool affine = bn.attrs.b("affine");
  const Weight* mean = weight(bn.inputs[np - 2]);
  const Weight* var = weight(bn.inputs[np - 1]);
  const Weight* gamma = affine ? weight(bn.inputs[1]) : nullptr;
  const Weight* beta = affine ? weight(bn.inputs[2]) : nullptr;
  const double eps = bn.attrs.f("eps");
  const int64_t per = int64_t(w.values.size()) / channels;
  for (int64_t c = 0; c < channels; ++c) {
    double scale =
        (gamma ? gamma->values[size_t(c)] : 1.0) / std::sqrt(var->values[size_t(c)] + eps);
    double shift = beta ? beta->values[size_t(c)] : 0.0;
    for (int64_t k = 0; k < per; ++k) w.values[size_t(c * per + k)] *= float(scale);
    b.values[size_t(c)] = float((b.values[size_t(c)] - mean->values[size_t(c)]) * scale + shift);
  }
  hasBias = true;
  return {};
}

Status Exporter::form() {
  const Node& n = node();
  auto forms = parseForms(*n.op);
  if (!forms) return forms.error();
  std::string why;
  const Form* f = formFor(*n.op, *forms, n.attrs, why);
  if (!f) return noForm(why);
  FormWriter w;
  w.param = [&n](const std::string& name) { return n.attrs.f(name); };
  w.constant = [&](const std::string& hint, float v) { return scalar(n.name + "/" + hint, v); };
  w.node = [&](const std::string& op, const std::vector<std::string>& ins,
               const std::vector<std::pair<std::string, float>>& attrs, bool root) {
    std::string y = root ? output() : fresh(op + "_out");
    std::vector<OnnxAttr> a;
    for (const auto& [key, v] : attrs) a.push_back({key, v});
    add(op, root ? n.name : fresh(op), ins, {y}, a);
    return y;
  };
  writeForm(*f, input(0), w);
  return {};
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
