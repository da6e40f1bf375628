// One mapping per ONNX op (onnx_import_map.h): the NetLoom op, its attributes, and
// its weights in PyTorch's layouts. A mapping that meets an attribute value NetLoom
// would compute differently records it and declines.
#ifdef NETLOOM_WITH_ONNX

#include <algorithm>
#include <cmath>

#include "engine/interop/onnx_import_map.h"

namespace netloom::onnxio {

namespace {

std::string shapeText(const Shape& s) {
  std::string t = "[";
  for (size_t k = 0; k < s.size(); ++k)
    t += (k ? ", " : "") + (s[k] < 0 ? std::string("?") : std::to_string(s[k]));
  return t + "]";
}

std::vector<float> transposed2d(const ConstTensor& t) {
  const int64_t r = t.shape[0], c = t.shape[1];
  std::vector<float> out(t.f.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[size_t(j * r + i)] = t.f[size_t(i * c + j)];
  return out;
}

int64_t positiveAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

}  // namespace

void Mapper::setI(proto::NodeDef& d, const std::string& k, int64_t v) {
  (*d.mutable_attrs())[k].set_i(v);
}
void Mapper::setF(proto::NodeDef& d, const std::string& k, double v) {
  (*d.mutable_attrs())[k].set_f(v);
}
void Mapper::setB(proto::NodeDef& d, const std::string& k, bool v) {
  (*d.mutable_attrs())[k].set_b(v);
}
void Mapper::setS(proto::NodeDef& d, const std::string& k, const std::string& v) {
  (*d.mutable_attrs())[k].set_s(v);
}
void Mapper::setInts(proto::NodeDef& d, const std::string& k, const std::vector<int64_t>& v) {
  auto* list = (*d.mutable_attrs())[k].mutable_ints();
  for (int64_t x : v) list->add_values(x);
}

std::string Mapper::ref(const onnx::NodeProto& n, const std::string& v) {
  if (auto it = s.refOf.find(v); it != s.refOf.end()) return it->second;
  if (!m_failed.count(v)) {
    s.problem(n, s.isConst(v) ? "its input '" + v +
                                    "' is a constant, which NetLoom takes only as a layer's weight"
                              : "its input '" + v + "' is computed by no node NetLoom has");
    m_failed.insert(v);
  }
  return "?";
}

proto::NodeDef& Mapper::add(const onnx::NodeProto& src, const std::string& op,
                            const std::vector<std::string>& inputs) {
  proto::NodeDef* d = s.model.add_nodes();
  d->set_name(s.nameFor(src));
  d->set_op(op);
  for (const std::string& in : inputs) d->add_inputs(in);
  d->set_doc("ONNX " + src.op_type() + (src.name().empty() ? "" : " '" + src.name() + "'"));
  return *d;
}

void Mapper::failed(const onnx::NodeProto& n) {
  for (const std::string& o : n.output()) m_failed.insert(o);
}

void Mapper::produce(const onnx::NodeProto& n, const proto::NodeDef& d) {
  s.refOf[n.output(0)] = d.name();
}

void Mapper::param(const std::string& node, const std::string& key, ConstTensor t, Shape shape) {
  t.shape = std::move(shape);
  s.params[node][key] = std::move(t);
}

bool Mapper::onlyAttrs(const onnx::NodeProto& n, const std::set<std::string>& known) {
  bool ok = true;
  for (const auto& a : n.attribute())
    if (!known.count(a.name())) {
      s.problem(n, "attribute '" + a.name() + "' has no NetLoom form");
      ok = false;
    }
  return ok;
}

const ConstTensor* Mapper::weightInput(const onnx::NodeProto& n, int k, const char* what) {
  if (k >= n.input_size() || n.input(k).empty()) {
    s.problem(n, std::string("it has no ") + what);
    return nullptr;
  }
  const ConstTensor* c = s.constOf(n.input(k));
  if (!c || !c->isFloat) {
    s.problem(n, std::string("its ") + what + " '" + n.input(k) +
                     (c ? "' is not a float tensor" : "' is computed while the model runs") +
                     "; NetLoom takes it only as a float initializer");
    return nullptr;
  }
  return c;
}

bool Mapper::extraOutputsUsed(const onnx::NodeProto& n) {
  for (int k = 1; k < n.output_size(); ++k)
    if (!n.output(k).empty() && s.users(n.output(k)) > 0) {
      s.problem(n, "its output " + std::to_string(k) + " ('" + n.output(k) +
                       "') is read, which NetLoom does not give");
      return true;
    }
  return false;
}

bool Mapper::symmetricPads(const onnx::NodeProto& n, std::vector<int64_t>& pads) {
  std::vector<int64_t> p = NodeAttrs(n).ints("pads", {0, 0, 0, 0});
  if (p.size() != 4 || p[0] != p[2] || p[1] != p[3]) {
    s.problem(n, "attribute pads=" + shapeText(p) + " (NetLoom pads both sides alike)");
    return false;
  }
  pads = {p[0], p[1]};
  return true;
}

bool Mapper::sameUpper(const onnx::NodeProto& n, const ConstTensor& w,
                       const std::vector<int64_t>& strides, const std::vector<int64_t>& dil) {
  // Uneven pads are NetLoom's same_padding when they are what it computes: output
  // ceil(input / stride), the odd row or column at the end.
  std::vector<int64_t> p = NodeAttrs(n).ints("pads", {0, 0, 0, 0});
  const Shape* x = s.shapeOf(n.input(0));
  if (p.size() != 4 || (p[0] == p[2] && p[1] == p[3]) || !x || x->size() != 4 ||
      strides.size() != 2 || dil.size() != 2)
    return false;
  for (int d = 0; d < 2; ++d) {
    const int64_t in = (*x)[size_t(2 + d)], st = strides[size_t(d)];
    if (in <= 0 || st <= 0) return false;
    const int64_t out = (in + st - 1) / st;
    const int64_t total = std::max<int64_t>(
        0, (out - 1) * st + (w.shape[size_t(2 + d)] - 1) * dil[size_t(d)] + 1 - in);
    if (p[size_t(d)] != total / 2 || p[size_t(d + 2)] != total - total / 2) return false;
  }
  return true;
}

bool Mapper::map(int i) {
  const onnx::NodeProto& n = s.node(i);
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx") {
    s.problem(n, "ops of domain '" + n.domain() + "' have no NetLoom form");
    return false;
  }
  NodeAttrs a(n);
  auto simple = [&](const char* netloomOp, std::set<std::string> attrs) -> proto::NodeDef* {
    if (!onlyAttrs(n, attrs)) return nullptr;
    proto::NodeDef& d = add(n, netloomOp, {ref(n, n.input(0))});
    produce(n, d);
    return &d;
  };
  if (op == "Conv") return conv(n, false);
  if (op == "ConvTranspose") return conv(n, true);
  if (op == "Gemm") return gemm(n);
  if (op == "MatMul") return matmul(n);
  if (op == "Add") return addNode(n);
  if (op == "BatchNormalization") return batchNorm(n);
  if (op == "LayerNormalization") return layerNorm(n);
  if (op == "MaxPool") return pool(n, false);
  if (op == "AveragePool") return pool(n, true);
  if (op == "GlobalAveragePool") return globalPool(i);
  if (op == "Flatten") return flatten(n);
  if (op == "Reshape") return reshape(n);
  if (op == "Softmax") return softmax(n);
  if (op == "Resize" || op == "Upsample") return resize(n);
  if (op == "Dropout") return dropout(n);
  if (op == "Concat") return concat(n);
  if (op == "Pad") return pad(n);
  if (op == "Relu") return simple("ReLU", {});
  if (op == "Sigmoid") return simple("Sigmoid", {});
  if (op == "Tanh") return simple("Tanh", {});
  if (op == "Identity") return simple("Identity", {});
  if (op == "LeakyRelu") {
    proto::NodeDef* d = simple("LeakyReLU", {"alpha"});
    if (d) setF(*d, "negative_slope", a.f("alpha", 0.01f));
    return d;
  }
  if (op == "Gelu") {
    proto::NodeDef* d = simple("GELU", {"approximate"});
    if (d) setS(*d, "approximate", a.s("approximate", "none"));
    return d;
  }
  s.problem(n, "the op has no NetLoom form");
  return false;
}

bool Mapper::conv(const onnx::NodeProto& n, bool transposed) {
  NodeAttrs a(n);
  bool ok = onlyAttrs(
      n, transposed ? std::set<std::string>{"auto_pad", "dilations", "group", "kernel_shape",
                                            "output_padding", "output_shape", "pads", "strides"}
                    : std::set<std::string>{"auto_pad", "dilations", "group", "kernel_shape",
                                            "pads", "strides"});
  const ConstTensor* w = weightInput(n, 1, "weight");
  if (!w) return false;
  if (w->shape.size() != 4) {
    s.problem(n,
              "a weight of shape " + shapeText(w->shape) + ": NetLoom convolves 2-D images only");
    return false;
  }
  const bool hasBias = n.input_size() > 2 && !n.input(2).empty();
  const ConstTensor* b = hasBias ? weightInput(n, 2, "bias") : nullptr;
  if (hasBias && !b) return false;
  const int64_t g = a.i("group", 1);
  const int64_t out = transposed ? w->shape[1] * g : w->shape[0];
  auto pair = [&](const char* name, int64_t def) {
    std::vector<int64_t> v = a.ints(name, {def, def});
    if (v.size() != 2) {
      s.problem(n, std::string("attribute ") + name + "=" + shapeText(v));
      ok = false;
    }
    return v;
  };
  const std::vector<int64_t> strides = pair("strides", 1), dil = pair("dilations", 1);
  if (a.has("kernel_shape") && a.ints("kernel_shape") != Shape{w->shape[2], w->shape[3]}) {
    s.problem(n, "attribute kernel_shape does not match the weight " + shapeText(w->shape));
    ok = false;
  }
  std::vector<int64_t> pads{0, 0};
  const std::string autoPad = a.s("auto_pad", "NOTSET");
  bool same = false;
  if (autoPad == "SAME_UPPER" && !transposed) {
    same = true;  // NetLoom's "same" puts the odd padding at the end, as SAME_UPPER
  } else if (autoPad == "NOTSET" && !transposed && sameUpper(n, *w, strides, dil)) {
    same = true;
  } else if (autoPad == "NOTSET") {
    ok = symmetricPads(n, pads) && ok;
  } else if (autoPad != "VALID") {
    s.problem(n, "attribute auto_pad=" + autoPad + " has no NetLoom form");
    ok = false;
  }
  if (transposed && a.has("output_shape")) {
    s.problem(n, "attribute output_shape has no NetLoom form (output_padding has)");
    ok = false;
  }
  if (b && b->size() != out) {
    s.problem(
        n, "a bias of shape " + shapeText(b->shape) + " for " + std::to_string(out) + " channels");
    ok = false;
  }
  std::vector<int64_t> extra;
  const std::string x = paddedInput(n, extra);
  if ((extra[0] || extra[1]) && (same || transposed)) {
    s.problem(n, "a Pad before it with auto_pad or a transposed convolution");
    ok = false;
  }
  if (!ok) return false;
  pads = {pads[0] + extra[0], pads[1] + extra[1]};
  proto::NodeDef& d = add(n, transposed ? "ConvTranspose2d" : "Conv2d", {x});
  setI(d, "out_channels", out);
  setInts(d, "kernel_size", {w->shape[2], w->shape[3]});
  setInts(d, "stride", strides);
  setInts(d, "padding", pads);
  setInts(d, "dilation", dil);
  setI(d, "groups", g);
  setB(d, "bias", b != nullptr);
  if (same) setB(d, "same_padding", true);
  if (transposed) setInts(d, "output_padding", a.ints("output_padding", {0, 0}));
  param(d.name(), "weight", *w, w->shape);
  if (b) param(d.name(), "bias", *b, {out});
  produce(n, d);
  return true;
}

bool Mapper::gemm(const onnx::NodeProto& n) {
  NodeAttrs a(n);
  bool ok = onlyAttrs(n, {"alpha", "beta", "transA", "transB"});
  if (a.i("transA", 0) != 0) {
    s.problem(n, "attribute transA=1 has no NetLoom form");
    ok = false;
  }
  const ConstTensor* bw = weightInput(n, 1, "weight (input B)");
  const bool hasBias = n.input_size() > 2 && !n.input(2).empty();
  const ConstTensor* c = hasBias ? weightInput(n, 2, "bias (input C)") : nullptr;
  if (!ok || !bw || (hasBias && !c)) return false;
  if (bw->shape.size() != 2) {
    s.problem(n, "a weight of shape " + shapeText(bw->shape));
    return false;
  }
  // Linear's weight is [out, in]: B as given with transB, else transposed.
  ConstTensor w = *bw;
  if (a.i("transB", 0) == 0) w.f = transposed2d(*bw);
  const int64_t out = a.i("transB", 0) ? bw->shape[0] : bw->shape[1];
  const int64_t in = a.i("transB", 0) ? bw->shape[1] : bw->shape[0];
  const float alpha = a.f("alpha", 1.f), beta = a.f("beta", 1.f);
  if (alpha != 1.f)
    for (float& v : w.f) v *= alpha;
  ConstTensor bias;
  if (c) {
    if (c->size() != out && c->size() != 1) {
      s.problem(n, "a bias of shape " + shapeText(c->shape) + " (NetLoom adds one per output)");
      return false;
    }
    bias.f = c->size() == 1 ? std::vector<float>(size_t(out), c->f[0]) : c->f;
    for (float& v : bias.f) v *= beta;
  }
  proto::NodeDef& d = add(n, "Linear", {ref(n, n.input(0))});
  setI(d, "out_features", out);
  setB(d, "bias", c != nullptr);
  param(d.name(), "weight", w, {out, in});
  if (c) param(d.name(), "bias", bias, {out});
  produce(n, d);
  return true;
}

bool Mapper::matmul(const onnx::NodeProto& n) {
  if (!onlyAttrs(n, {})) return false;
  const Shape* as = s.shapeOf(n.input(0));
  if (s.isConst(n.input(0)) || (as && as->size() < 2)) {
    s.problem(n, "a first operand that is a constant or a vector has no NetLoom form");
    return false;
  }
  if (const ConstTensor* b = s.constOf(n.input(1))) {
    // x·B with a constant B [in, out] is a Linear layer without bias; an Add after
    // it gives it one (addNode).
    if (b->shape.size() != 2 || !b->isFloat) {
      s.problem(n, "a constant second operand of shape " + shapeText(b->shape));
      return false;
    }
    ConstTensor w = *b;
    w.f = transposed2d(*b);
    proto::NodeDef& d = add(n, "Linear", {ref(n, n.input(0))});
    setI(d, "out_features", b->shape[1]);
    setB(d, "bias", false);
    param(d.name(), "weight", w, {b->shape[1], b->shape[0]});
    produce(n, d);
    return true;
  }
  const Shape* bs = s.shapeOf(n.input(1));
  if (!bs || bs->size() != 2) {
    s.problem(n, "a second operand of shape " + (bs ? shapeText(*bs) : std::string("unknown")) +
                     " (NetLoom multiplies by matrices)");
    return false;
  }
  proto::NodeDef& d = add(n, "MatMul", {ref(n, n.input(0)), ref(n, n.input(1))});
  produce(n, d);
  return true;
}

bool Mapper::addNode(const onnx::NodeProto& n) {
  if (!onlyAttrs(n, {})) return false;
  const bool c0 = s.isConst(n.input(0)), c1 = s.isConst(n.input(1));
  if (!c0 && !c1) {
    const Shape *x = s.shapeOf(n.input(0)), *y = s.shapeOf(n.input(1));
    bool same = !x || !y || x->size() == y->size();
    for (size_t k = 1; same && x && y && k < x->size(); ++k)
      same = (*x)[k] < 0 || (*y)[k] < 0 || (*x)[k] == (*y)[k];
    if (!same) {
      s.problem(n, "it adds shapes " + shapeText(*x) + " and " + shapeText(*y) +
                       " (NetLoom adds tensors of one shape)");
      return false;
    }
    proto::NodeDef& d = add(n, "Add", {ref(n, n.input(0)), ref(n, n.input(1))});
    produce(n, d);
    return true;
  }
  // A constant added to a layer without bias, per output channel, is that bias.
  const std::string& x = n.input(c0 ? 1 : 0);
  const ConstTensor& c = *s.constOf(n.input(c0 ? 0 : 1));
  auto it = s.refOf.find(x);
  proto::NodeDef* layer = nullptr;
  if (!c0 || !c1)
    for (auto& d : *s.model.mutable_nodes())
      if (it != s.refOf.end() && d.name() == it->second) layer = &d;
  int64_t channels = -1;
  bool perChannel = false;
  if (layer && s.users(x) == 1 && !layer->attrs().at("bias").b() && c.isFloat) {
    if (layer->op() == "Linear") {
      channels = layer->attrs().at("out_features").i();
      perChannel = !c.shape.empty() && c.shape.back() == channels && c.size() == channels;
    } else if (layer->op() == "Conv2d" || layer->op() == "ConvTranspose2d") {
      channels = layer->attrs().at("out_channels").i();
      perChannel =
          c.size() == channels && c.shape.size() >= 3 && c.shape[c.shape.size() - 3] == channels;
    }
  }
  if (!perChannel) {
    s.problem(n, "it adds a constant of shape " + shapeText(c.shape) +
                     ", which NetLoom adds only as the bias of the layer before it");
    return false;
  }
  setB(*layer, "bias", true);
  param(layer->name(), "bias", c, {channels});
  s.refOf[n.output(0)] = layer->name();
  return true;
}

bool Mapper::batchNorm(const onnx::NodeProto& n) {
  NodeAttrs a(n);
  bool ok = onlyAttrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
  if (a.i("training_mode", 0) != 0 || a.i("spatial", 1) != 1) {
    s.problem(n, "training_mode=1 or spatial=0 has no NetLoom form");
    ok = false;
  }
  ok = !extraOutputsUsed(n) && ok;
  const char* names[] = {"scale", "bias (B)", "mean", "variance"};
  const ConstTensor* t[4];
  for (int k = 0; k < 4; ++k) ok = (t[k] = weightInput(n, k + 1, names[k])) && ok;
  if (!ok) return false;
  const int64_t c = t[0]->size();
  for (const ConstTensor* p : t)
    if (p->size() != c) {
      s.problem(n, "its scale, bias, mean and variance differ in size");
      return false;
    }
  proto::NodeDef& d = add(n, "BatchNorm", {ref(n, n.input(0))});
  setI(d, "num_features", c);
  setF(d, "eps", a.f("epsilon", 1e-5f));
  // ONNX's momentum weighs the running statistics, NetLoom's (PyTorch's) the batch.
  setF(d, "momentum", 1.0 - double(a.f("momentum", 0.9f)));
  const char* keys[] = {"weight", "bias", "running_mean", "running_var"};
  for (int k = 0; k < 4; ++k) param(d.name(), keys[k], *t[k], {c});
  produce(n, d);
  return true;
}

bool Mapper::layerNorm(const onnx::NodeProto& n) {
  NodeAttrs a(n);
  bool ok = onlyAttrs(n, {"axis", "epsilon", "stash_type"}) && !extraOutputsUsed(n);
  const Shape* x = s.shapeOf(n.input(0));
  const ConstTensor* scale = weightInput(n, 1, "scale");
  const bool hasBias = n.input_size() > 2 && !n.input(2).empty();
  const ConstTensor* bias = hasBias ? weightInput(n, 2, "bias") : nullptr;
  if (!ok || !scale || (hasBias && !bias)) return false;
  if (!x) {
    s.problem(n, "the shape of its input is unknown");
    return false;
  }
  const int64_t axis = positiveAxis(a.i("axis", -1), x->size());
  Shape tail(x->begin() + std::clamp<int64_t>(axis, 0, int64_t(x->size())), x->end());
  bool known = axis >= 1;
  for (int64_t v : tail) known = known && v >= 0;
  if (!known || scale->size() != numel(tail) || (bias && bias->size() != numel(tail))) {
    s.problem(n, "attribute axis=" + std::to_string(a.i("axis", -1)) + " over " + shapeText(*x) +
                     " with a scale of shape " + shapeText(scale->shape));
    return false;
  }
  proto::NodeDef& d = add(n, "LayerNorm", {ref(n, n.input(0))});
  setI(d, "normalized_dims", int64_t(tail.size()));
  setF(d, "eps", a.f("epsilon", 1e-5f));
  param(d.name(), "weight", *scale, tail);
  ConstTensor zeros;
  zeros.f.assign(size_t(numel(tail)), 0.f);
  param(d.name(), "bias", bias ? *bias : zeros, tail);
  produce(n, d);
  return true;
}

bool Mapper::pool(const onnx::NodeProto& n, bool average) {
  NodeAttrs a(n);
  std::set<std::string> known{"auto_pad", "ceil_mode",     "dilations", "kernel_shape",
                              "pads",     "storage_order", "strides"};
  if (average) known.insert("count_include_pad");
  bool ok = onlyAttrs(n, known) && !extraOutputsUsed(n);
  const std::vector<int64_t> k = a.ints("kernel_shape");
  const std::vector<int64_t> strides = a.ints("strides", {1, 1});
  if (k.size() != 2 || strides.size() != 2) {
    s.problem(n, "a window of " + std::to_string(k.size()) + " dimensions: NetLoom pools 2-D");
    return false;
  }
  for (int64_t d : a.ints("dilations", {1, 1}))
    if (d != 1) {
      s.problem(n, "attribute dilations has no NetLoom form for pooling");
      ok = false;
      break;
    }
  if (a.i("storage_order", 0) != 0) {
    s.problem(n, "attribute storage_order=1 has no NetLoom form");
    ok = false;
  }
  std::vector<int64_t> pads{0, 0};
  const std::string autoPad = a.s("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    ok = symmetricPads(n, pads) && ok;
  } else if (autoPad != "VALID") {
    s.problem(n, "attribute auto_pad=" + autoPad + " has no NetLoom form");
    ok = false;
  }
  std::vector<int64_t> extra;
  const std::string x = average ? paddedInput(n, extra) : ref(n, n.input(0));
  bool countPad = a.i("count_include_pad", 0) != 0;
  if (average && (extra[0] || extra[1])) {
    // Explicit zeros always count; the pool's own padding must count alike.
    if ((pads[0] || pads[1]) && !countPad) {
      s.problem(n, "a Pad before it and its own pads without count_include_pad");
      return false;
    }
    countPad = true;
    pads = {pads[0] + extra[0], pads[1] + extra[1]};
  }
  if (!ok) return false;
  proto::NodeDef& d = add(n, average ? "AvgPool2d" : "MaxPool2d", {x});
  setInts(d, "kernel_size", k);
  setInts(d, "stride", strides);
  setInts(d, "padding", pads);
  setB(d, "ceil_mode", a.i("ceil_mode", 0) != 0);
  if (average) setB(d, "count_include_pad", countPad);
  produce(n, d);
  return true;
}

bool Mapper::globalPool(int i) {
  const onnx::NodeProto& n = s.node(i);
  if (!onlyAttrs(n, {})) return false;
  const Shape* x = s.shapeOf(n.input(0));
  if (x && x->size() != 4) {
    s.problem(n, "an input of shape " + shapeText(*x) + ": NetLoom pools N×C×H×W");
    return false;
  }
  // Pooling then Flatten(axis 1) is NetLoom's GlobalAvgPool2d without keepdim.
  const std::string& y = n.output(0);
  auto it = s.readers.find(y);
  if (s.users(y) == 1 && it != s.readers.end()) {
    const int j = it->second[0];
    const onnx::NodeProto& f = s.node(j);
    if (!s.done[size_t(j)] && f.op_type() == "Flatten" && f.domain().empty() &&
        NodeAttrs(f).i("axis", 1) == 1 && f.attribute_size() <= 1) {
      s.done[size_t(j)] = true;
      proto::NodeDef& d = add(f, "GlobalAvgPool2d", {ref(n, n.input(0))});
      setB(d, "keepdim", false);
      s.refOf[f.output(0)] = d.name();
      return true;
    }
  }
  proto::NodeDef& d = add(n, "GlobalAvgPool2d", {ref(n, n.input(0))});
  setB(d, "keepdim", true);
  produce(n, d);
  return true;
}

bool Mapper::flatten(const onnx::NodeProto& n) {
  if (!onlyAttrs(n, {"axis"})) return false;
  const Shape* x = s.shapeOf(n.input(0));
  const int64_t axis = positiveAxis(NodeAttrs(n).i("axis", 1), x ? x->size() : 2);
  if (axis != 1) {
    s.problem(n, "attribute axis=" + std::to_string(NodeAttrs(n).i("axis", 1)) +
                     " merges the batch dimension with others");
    return false;
  }
  proto::NodeDef& d = add(n, "Flatten", {ref(n, n.input(0))});
  produce(n, d);
  return true;
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
