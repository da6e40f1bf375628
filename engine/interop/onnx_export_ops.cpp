// Each NetLoom op of an evaluation graph as ONNX opset 17 nodes (onnx_export_ops.h).
// An op is written only where the ONNX form computes what NetLoom computes; anything
// else is refused by name rather than exported approximately.
#ifdef NETLOOM_WITH_ONNX

#include "engine/interop/onnx_export_ops.h"

#include <cmath>
#include <numbers>

#include "engine/interop/onnx_form.h"
#include "kernels/core/geometry.h"

namespace netloom::onnxio {

Exporter::Exporter(const Graph& g, std::map<std::string, Weight> weights, onnx::GraphProto& out)
    : m_g(g), m_weights(std::move(weights)), m_out(out) {
  for (const Value& v : g.values) m_used.insert(v.name);
  for (const Node& n : g.nodes) m_used.insert(n.name);
}

std::string Exporter::valueName(ValueId v) const {
  return m_g.values[size_t(v)].name;
}

std::string Exporter::out(NodeId id) {
  const Node& n = node(id);
  ValueId v = n.outputs[0];
  if (auto it = foldInto.find(id); it != foldInto.end()) v = node(it->second).outputs[0];
  Shape s = shapeOf(v);
  if (!s.empty()) s[0] = -1;
  m_expected[valueName(v)] = s;
  return valueName(v);
}

onnx::NodeProto& Exporter::add(const std::string& op, const std::string& name,
                               const std::vector<std::string>& inputs,
                               const std::vector<std::string>& outputs) {
  onnx::NodeProto* p = m_out.add_node();
  p->set_op_type(op);
  p->set_name(name);
  m_used.insert(name);
  for (const std::string& i : inputs) p->add_input(i);
  for (const std::string& o : outputs) p->add_output(o);
  return *p;
}

std::string Exporter::fresh(const std::string& base) {
  std::string name = base;
  for (int k = 2; m_used.count(name); ++k) name = base + "_" + std::to_string(k);
  m_used.insert(name);
  return name;
}

std::string Exporter::initializer(const std::string& name, const Shape& shape,
                                  std::vector<float> values, bool exact) {
  // A parameter keeps its NetLoom name ("conv1.weight"), which no helper takes.
  std::string n = exact ? name : fresh(name);
  *m_out.add_initializer() = floatTensor(n, shape, values);
  return n;
}

std::string Exporter::ints(const std::string& name, const std::vector<int64_t>& values) {
  std::string n = fresh(name);
  *m_out.add_initializer() = int64Tensor(n, {int64_t(values.size())}, values);
  return n;
}

std::string Exporter::scalar(const std::string& name, float v) {
  std::string n = fresh(name);
  *m_out.add_initializer() = floatTensor(n, {}, {v});
  return n;
}

const Weight* Exporter::weight(const std::string& name) const {
  auto it = m_weights.find(name);
  return it == m_weights.end() ? nullptr : &it->second;
}

Error Exporter::noForm(const Node& n, const std::string& what) const {
  return makeError("node '" + n.name + "' (op " + n.op->name + "): " + what + " has no ONNX form");
}

Status Exporter::emit(NodeId id) {
  const Node& n = node(id);
  if (folded.count(id)) return {};
  const std::string& op = n.op->name;
  if (!n.op->onnxForm.empty()) return form(id);
  if (op == "Linear") return linear(id);
  if (op == "Conv2d") return conv(id, false);
  if (op == "ConvTranspose2d") return conv(id, true);
  if (op == "MatMul") return matmul(id);
  if (op == "MaxPool2d") return pool(id, false);
  if (op == "AvgPool2d") return pool(id, true);
  if (op == "BatchNorm") return batchNorm(id);
  if (op == "LayerNorm") return layerNorm(id);
  if (op == "GELU") return gelu(id);
  if (op == "Flatten" || op == "Reshape") return reshape(id);
  if (op == "Upsample") return upsample(id);
  // Ops with a one-to-one ONNX counterpart and their attributes.
  std::vector<std::string> ins;
  for (int k = 0; k < n.numDataInputs(); ++k) ins.push_back(in(n, k));
  // Dropout is the identity outside training.
  static const std::map<std::string, std::string> kSame = {
      {"ReLU", "Relu"}, {"Sigmoid", "Sigmoid"},   {"Tanh", "Tanh"},
      {"Add", "Add"},   {"Identity", "Identity"}, {"Dropout", "Identity"}};
  if (auto it = kSame.find(op); it != kSame.end()) {
    add(it->second, n.name, ins, {out(id)});
    return {};
  }
  if (op == "LeakyReLU") {
    *add("LeakyRelu", n.name, ins, {out(id)}).add_attribute() =
        attrFloat("alpha", float(n.attrs.f("negative_slope")));
    return {};
  }
  if (op == "Softmax") {
    *add("Softmax", n.name, ins, {out(id)}).add_attribute() = attrInt("axis", n.attrs.i("axis"));
    return {};
  }
  if (op == "Concat") {
    *add("Concat", n.name, ins, {out(id)}).add_attribute() = attrInt("axis", n.attrs.i("axis"));
    return {};
  }
  if (op == "GlobalAvgPool2d") {
    if (n.attrs.b("keepdim")) {
      add("GlobalAveragePool", n.name, ins, {out(id)});
      return {};
    }
    // GlobalAveragePool keeps the 1×1; Flatten drops it as NetLoom does.
    std::string pooled = fresh(n.name + "/pooled");
    add("GlobalAveragePool", fresh(n.name + "/pool"), ins, {pooled});
    *add("Flatten", n.name, {pooled}, {out(id)}).add_attribute() = attrInt("axis", 1);
    return {};
  }
  if (op == "Constant") {
    // A constant's shape is its full shape (no batch dimension): an initializer.
    const Shape& s = shapeOf(n.outputs[0]);
    *m_out.add_initializer() =
        floatTensor(valueName(n.outputs[0]), s,
                    std::vector<float>(size_t(numel(s)), float(n.attrs.f("value"))));
    return {};
  }
  if (n.op->role == OpRole::Loss || n.op->role == OpRole::Metric)
    return noForm(n, "a loss or metric inside the model's outputs");
  return noForm(n, "the op");
}

Status Exporter::foldedParams(NodeId id, Weight& w, Weight& b, bool& hasBias) {
  const Node& n = node(id);
  const Weight* wp = weight(valueName(n.inputs[1]));
  if (!wp) return makeError("node '" + n.name + "': no weight '" + valueName(n.inputs[1]) + "'");
  w = *wp;
  hasBias = n.inputs.size() > 2;
  const int64_t out = n.op->name == "ConvTranspose2d" ? shapeOf(n.outputs[0])[1] : w.shape[0];
  b = Weight{{out}, std::vector<float>(size_t(out), 0.f)};
  if (hasBias) b = *weight(valueName(n.inputs[2]));
  auto it = foldInto.find(id);
  if (it == foldInto.end()) return {};
  // y = (conv(x) + b - mean) · γ/√(var + ε) + β: scale each output channel's
  // weights by γ/√(var + ε) and shift its bias.
  const Node& bn = node(it->second);
  const size_t np = bn.inputs.size();
  const bool affine = bn.attrs.b("affine");
  const Weight* mean = weight(valueName(bn.inputs[np - 2]));
  const Weight* var = weight(valueName(bn.inputs[np - 1]));
  const Weight* gamma = affine ? weight(valueName(bn.inputs[1])) : nullptr;
  const Weight* beta = affine ? weight(valueName(bn.inputs[2])) : nullptr;
  const double eps = bn.attrs.f("eps");
  const int64_t per = int64_t(w.values.size()) / out;
  for (int64_t c = 0; c < out; ++c) {
    double scale =
        (gamma ? gamma->values[size_t(c)] : 1.0) / std::sqrt(var->values[size_t(c)] + eps);
    double shift = beta ? beta->values[size_t(c)] : 0.0;
    for (int64_t k = 0; k < per; ++k) w.values[size_t(c * per + k)] *= float(scale);
    b.values[size_t(c)] = float((b.values[size_t(c)] - mean->values[size_t(c)]) * scale + shift);
  }
  hasBias = true;
  return {};
}

Status Exporter::linear(NodeId id) {
  const Node& n = node(id);
  Weight w, b;
  bool hasBias = false;
  if (Status s = foldedParams(id, w, b, hasBias); !s) return s;
  const bool relu = n.attrs.s("activation") == "relu";
  const std::string y = out(id);
  const int64_t outF = w.shape[0], inF = w.shape[1];
  // Each step writes `y` when it is the last one, else a fresh value; the last step
  // carries the node's name, so that an importer names the layer after it.
  int steps = 1 + (relu ? 1 : 0);
  std::string cur = in(n, 0);
  auto step = [&](const std::string& op, const std::string& what,
                  std::vector<std::string> ins) -> onnx::NodeProto& {
    --steps;
    std::string to = steps == 0 ? y : fresh(n.name + "/" + what + "_out");
    onnx::NodeProto& p = add(op, steps == 0 ? n.name : fresh(n.name + "/" + what), ins, {to});
    cur = to;
    return p;
  };
  if (shapeOf(n.inputs[0]).size() == 2) {
    std::vector<std::string> ins{cur, initializer(valueName(n.inputs[1]), w.shape, w.values, true)};
    if (hasBias)
      ins.push_back(initializer(n.name + ".bias", b.shape, b.values, n.inputs.size() > 2));
    *step("Gemm", "gemm", ins).add_attribute() = attrInt("transB", 1);
  } else {
    // Gemm takes matrices only: x·Wᵀ over the last dimension is MatMul with the
    // weight stored transposed, then the bias.
    std::vector<float> t(w.values.size());
    for (int64_t o = 0; o < outF; ++o)
      for (int64_t i = 0; i < inF; ++i) t[size_t(i * outF + o)] = w.values[size_t(o * inF + i)];
    std::string wt = initializer(valueName(n.inputs[1]), {inF, outF}, std::move(t), true);
    if (hasBias) ++steps;
    step("MatMul", "matmul", {cur, wt});
    if (hasBias)
      step("Add", "bias",
           {cur, initializer(n.name + ".bias", b.shape, b.values, n.inputs.size() > 2)});
  }
  if (relu) step("Relu", "relu", {cur});
  return {};
}

Status Exporter::conv(NodeId id, bool transposed) {
  const Node& n = node(id);
  Window2d win;
  const Shape& x = shapeOf(n.inputs[0]);
  std::string err = transposed ? convTransposeWindow(n.attrs, x, win) : convWindow(n.attrs, x, win);
  if (!err.empty()) return makeError("node '" + n.name + "' (op " + n.op->name + "): " + err);
  Weight w, b;
  bool hasBias = false;
  if (Status s = foldedParams(id, w, b, hasBias); !s) return s;
  std::vector<std::string> ins{in(n, 0),
                               initializer(valueName(n.inputs[1]), w.shape, w.values, true)};
  if (hasBias) ins.push_back(initializer(n.name + ".bias", b.shape, b.values, n.inputs.size() > 2));
  onnx::NodeProto& p = add(transposed ? "ConvTranspose" : "Conv", n.name, ins, {out(id)});
  *p.add_attribute() = attrInts("kernel_shape", {win.kh, win.kw});
  *p.add_attribute() = attrInts("strides", {win.sh, win.sw});
  *p.add_attribute() = attrInts("dilations", {win.dh, win.dw});
  *p.add_attribute() = attrInt("group", n.attrs.i("groups"));
  if (transposed) {
    // NetLoom pads both ends by `padding`; output_padding adds the rows ONNX adds.
    *p.add_attribute() = attrInts("pads", {win.padTop, win.padLeft, win.padTop, win.padLeft});
    int64_t oph = 0, opw = 0;
    pair2d(n.attrs, "output_padding", 0, oph, opw);
    *p.add_attribute() = attrInts("output_padding", {oph, opw});
  } else {
    *p.add_attribute() = attrInts("pads", {win.padTop, win.padLeft, win.padBottom, win.padRight});
  }
  return {};
}

Status Exporter::matmul(NodeId id) {
  const Node& n = node(id);
  if (n.attrs.b("trans_a")) return noForm(n, "attribute trans_a=true");
  if (shapeOf(n.inputs[1]).size() != 2)
    return noForm(n, "a second operand of rank " + std::to_string(shapeOf(n.inputs[1]).size()) +
                         " (NetLoom views it as a matrix)");
  std::string b = in(n, 1);
  if (n.attrs.b("trans_b")) {
    std::string t = fresh(n.name + "/b_t");
    *add("Transpose", fresh(n.name + "/transpose"), {b}, {t}).add_attribute() =
        attrInts("perm", {1, 0});
    b = t;
  }
  add("MatMul", n.name, {in(n, 0), b}, {out(id)});
  return {};
}

Status Exporter::pool(NodeId id, bool average) {
  const Node& n = node(id);
  Window2d w;
  if (std::string err = poolWindow(n.attrs, shapeOf(n.inputs[0]), w); !err.empty())
    return makeError("node '" + n.name + "' (op " + n.op->name + "): " + err);
  const bool ceil = n.attrs.b("ceil_mode");
  // A window that ceil_mode adds past the padding is divided by the part inside the
  // padded input in NetLoom (as PyTorch); ONNX runtimes disagree on that divisor.
  if (average && ceil && (w.padBottom > w.padTop || w.padRight > w.padLeft))
    return noForm(n, "attribute ceil_mode=true with a last window past the padding");
  onnx::NodeProto& p = add(average ? "AveragePool" : "MaxPool", n.name, {in(n, 0)}, {out(id)});
  *p.add_attribute() = attrInts("kernel_shape", {w.kh, w.kw});
  *p.add_attribute() = attrInts("strides", {w.sh, w.sw});
  *p.add_attribute() = attrInts("pads", {w.padTop, w.padLeft, w.padTop, w.padLeft});
  *p.add_attribute() = attrInt("ceil_mode", ceil ? 1 : 0);
  if (average)
    *p.add_attribute() = attrInt("count_include_pad", n.attrs.b("count_include_pad") ? 1 : 0);
  return {};
}

Status Exporter::batchNorm(NodeId id) {
  const Node& n = node(id);
  const int64_t c = shapeOf(n.inputs[0])[1];
  const bool affine = n.attrs.b("affine");
  std::vector<std::string> ins{in(n, 0)};
  if (affine) {
    for (size_t k : {1, 2})
      ins.push_back(
          initializer(valueName(n.inputs[k]), {c}, weight(valueName(n.inputs[k]))->values, true));
  } else {
    ins.push_back(initializer(n.name + ".scale", {c}, std::vector<float>(size_t(c), 1.f)));
    ins.push_back(initializer(n.name + ".shift", {c}, std::vector<float>(size_t(c), 0.f)));
  }
  const size_t stats = size_t(n.numDataInputs() + n.numParams - 2);
  for (size_t k = stats; k < stats + 2; ++k)
    ins.push_back(
        initializer(valueName(n.inputs[k]), {c}, weight(valueName(n.inputs[k]))->values, true));
  onnx::NodeProto& p = add("BatchNormalization", n.name, ins, {out(id)});
  *p.add_attribute() = attrFloat("epsilon", float(n.attrs.f("eps")));
  // ONNX weighs the running statistics, PyTorch the batch.
  *p.add_attribute() = attrFloat("momentum", float(1.0 - n.attrs.f("momentum")));
  return {};
}

Status Exporter::layerNorm(NodeId id) {
  const Node& n = node(id);
  const Shape& x = shapeOf(n.inputs[0]);
  const int64_t k = n.attrs.i("normalized_dims");
  const Shape tail(x.end() - k, x.end());
  std::vector<std::string> ins{in(n, 0)};
  if (n.attrs.b("affine")) {
    for (size_t k : {1, 2})
      ins.push_back(
          initializer(valueName(n.inputs[k]), tail, weight(valueName(n.inputs[k]))->values, true));
  } else {
    ins.push_back(
        initializer(n.name + ".scale", tail, std::vector<float>(size_t(numel(tail)), 1.f)));
  }
  onnx::NodeProto& p = add("LayerNormalization", n.name, ins, {out(id)});
  *p.add_attribute() = attrInt("axis", int64_t(x.size()) - k);
  *p.add_attribute() = attrFloat("epsilon", float(n.attrs.f("eps")));
  return {};
}

Status Exporter::form(NodeId id) {
  const Node& n = node(id);
  auto forms = parseForms(*n.op);
  if (!forms) return forms.error();
  std::string why;
  const Form* f = formFor(*n.op, *forms, n.attrs, why);
  if (!f) return noForm(n, why);
  FormWriter w;
  w.param = [&n](const std::string& name) { return n.attrs.f(name); };
  w.constant = [&](const std::string& hint, float v) { return scalar(n.name + "/" + hint, v); };
  w.node = [&](const std::string& op, const std::vector<std::string>& ins,
               const std::vector<std::pair<std::string, float>>& attrs, bool root) {
    std::string y = root ? out(id) : fresh(n.name + "/" + op + "_out");
    onnx::NodeProto& p = add(op, root ? n.name : fresh(n.name + "/" + op), ins, {y});
    for (const auto& [key, v] : attrs) *p.add_attribute() = attrFloat(key, v);
    return y;
  };
  writeForm(*f, in(n, 0), w);
  return {};
}

Status Exporter::gelu(NodeId id) {
  // Opset 17 has no Gelu: written out as PyTorch writes it, so that importers
  // (NetLoom's among them) recognise the pattern.
  const Node& n = node(id);
  const std::string x = in(n, 0), y = out(id);
  auto v = [&](const char* what) { return fresh(n.name + "/" + what); };
  std::string one;
  std::string inner;
  if (n.attrs.s("approximate") == "tanh") {
    // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    std::string cube = v("cube"), scaled = v("scaled"), sum = v("sum"), arg = v("arg");
    add("Pow", v("pow"), {x, scalar(n.name + "/three", 3.f)}, {cube});
    add("Mul", v("mul_c"), {cube, scalar(n.name + "/c", 0.044715f)}, {scaled});
    add("Add", v("add_x"), {x, scaled}, {sum});
    add("Mul", v("mul_k"), {sum, scalar(n.name + "/k", float(std::sqrt(2.0 / std::numbers::pi)))},
        {arg});
    inner = v("tanh_out");
    add("Tanh", v("tanh"), {arg}, {inner});
  } else {
    // 0.5·x·(1 + erf(x/√2))
    std::string scaled = v("div_out");
    add("Div", v("div"), {x, scalar(n.name + "/sqrt2", float(std::sqrt(2.0)))}, {scaled});
    inner = v("erf_out");
    add("Erf", v("erf"), {scaled}, {inner});
  }
  std::string plus = v("add_one_out"), times = v("mul_x_out");
  add("Add", v("add_one"), {inner, scalar(n.name + "/one", 1.f)}, {plus});
  add("Mul", v("mul_x"), {x, plus}, {times});
  add("Mul", n.name, {times, scalar(n.name + "/half", 0.5f)}, {y});
  return {};
}

Status Exporter::reshape(NodeId id) {
  const Node& n = node(id);
  const Shape& y = shapeOf(n.outputs[0]);
  if (n.op->name == "Flatten" && n.attrs.i("start_dim") == 1) {
    *add("Flatten", n.name, {in(n, 0)}, {out(id)}).add_attribute() = attrInt("axis", 1);
    return {};
  }
  // 0 keeps the batch dimension, whatever its size; the rest is NetLoom's result.
  std::vector<int64_t> target{0};
  target.insert(target.end(), y.begin() + 1, y.end());
  add("Reshape", n.name, {in(n, 0), ints(n.name + "/shape", target)}, {out(id)});
  return {};
}

Status Exporter::upsample(NodeId id) {
  const Node& n = node(id);
  int64_t sh = 1, sw = 1;
  pair2d(n.attrs, "scale_factor", 2, sh, sw);
  if (n.attrs.s("mode") != "nearest")
    return noForm(n, "attribute mode='" + n.attrs.s("mode") + "'");
  // Whole factors with asymmetric coordinates and floor: output pixel i reads input
  // pixel ⌊i / s⌋, NetLoom's nearest enlargement.
  std::string scales = initializer(n.name + "/scales", {4}, {1.f, 1.f, float(sh), float(sw)});
  onnx::NodeProto& p = add("Resize", n.name, {in(n, 0), "", scales}, {out(id)});
  *p.add_attribute() = attrString("mode", "nearest");
  *p.add_attribute() = attrString("coordinate_transformation_mode", "asymmetric");
  *p.add_attribute() = attrString("nearest_mode", "floor");
  return {};
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
