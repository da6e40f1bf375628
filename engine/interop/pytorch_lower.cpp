// Each NetLoom op as the PyTorch a person would write for it, with the semantics
// the op file states: PyTorch's layouts, padding, ceil_mode and statistics. Ops with
// no PyTorch counterpart are refused by name rather than approximated.
#include <charconv>
#include <cmath>
#include <set>

#include "engine/interop/pytorch_gen.h"
#include "kernels/core/geometry.h"

namespace netloom::pytorch {

std::string pyInt(int64_t v) {
  return std::to_string(v);
}

std::string pyFloat(double v) {
  if (std::isinf(v)) return v > 0 ? "float(\"inf\")" : "-float(\"inf\")";
  if (std::isnan(v)) return "float(\"nan\")";
  // The shortest text that reads back as the same double, as Python's repr writes it.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string pyBool(bool v) {
  return v ? "True" : "False";
}

std::string pyStr(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string pyTuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + pyInt(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

namespace {

const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return k;
}

// A pair attribute (k or [kh, kw]) as PyTorch takes it: an int when both agree.
std::string pair(const Attrs& a, const std::string& name, int64_t def) {
  int64_t h = def, w = def;
  pair2d(a, name, def, h, w);
  return h == w ? pyInt(h) : pyTuple({h, w});
}

const Shape& inShape(const Graph& g, const Node& n, int i) {
  return g.values[n.inputs[i]].desc.shape;
}

// The "$p" param a written attribute takes its value from, or empty.
std::string slotOf(const proto::NodeDef& def, const std::string& attr) {
  auto it = def.attrs().find(attr);
  if (it == def.attrs().end() || it->second.value_case() != proto::AttrValue::kS) return {};
  const std::string& s = it->second.s();
  return s.rfind('$', 0) == 0 ? s.substr(1) : std::string();
}

Arg arg(const proto::NodeDef& def, std::string key, std::string value, const std::string& attr,
        std::string dflt = {}) {
  return Arg{std::move(key),
             std::move(value),
             attr.empty() ? std::string() : slotOf(def, attr),
             std::move(dflt),
             {}};
}

// A positional argument, named for a block class that takes it as its own.
Arg pos(const proto::NodeDef& def, std::string label, std::string value, const std::string& attr) {
  Arg a = arg(def, "", std::move(value), attr);
  a.label = std::move(label);
  return a;
}

Error refuse(const Node& n, const std::string& why) {
  return makeError("node '" + n.name + "': op '" + n.op->name + "' " + why);
}

Result<Lowered> lowerConv(const Graph& g, const Node& n, const proto::NodeDef& d, bool transposed) {
  const Attrs& a = n.attrs;
  const Shape& x = inShape(g, n, 0);
  Lowered l;
  l.ctor = transposed ? "nn.ConvTranspose2d" : "nn.Conv2d";
  l.ctorArgs = {pos(d, "in_channels", pyInt(x[1]), ""),
                pos(d, "out_channels", pyInt(a.i("out_channels")), "out_channels"),
                arg(d, "kernel_size", pair(a, "kernel_size", 1), "kernel_size"),
                arg(d, "stride", pair(a, "stride", 1), "stride", "1")};
  l.expr = "{m}({0})";
  Window2d w;
  std::string err = transposed ? convTransposeWindow(a, x, w) : convWindow(a, x, w);
  if (!err.empty()) return refuse(n, err);
  if (!transposed && a.b("same_padding") && (w.padTop != w.padBottom || w.padLeft != w.padRight)) {
    // TensorFlow's "same" pads the extra row and column at the end, which a
    // convolution's own (symmetric) padding cannot: pad first, as PyTorch's
    // padding="same" does for stride 1.
    l.ctorArgs.push_back(arg(d, "padding", "0", "", "0"));
    l.expr = "{m}(F.pad({0}, {a0}))";
    l.fwdArgs = {arg(d, "", pyTuple({w.padLeft, w.padRight, w.padTop, w.padBottom}), "")};
  } else {
    std::string p = w.padTop == w.padLeft ? pyInt(w.padTop) : pyTuple({w.padTop, w.padLeft});
    l.ctorArgs.push_back(arg(d, "padding", p, a.b("same_padding") ? "" : "padding", "0"));
  }
  if (transposed)
    l.ctorArgs.push_back(
        arg(d, "output_padding", pair(a, "output_padding", 0), "output_padding", "0"));
  l.ctorArgs.push_back(arg(d, "dilation", pair(a, "dilation", 1), "dilation", "1"));
  l.ctorArgs.push_back(arg(d, "groups", pyInt(a.i("groups")), "groups", "1"));
  l.ctorArgs.push_back(arg(d, "bias", pyBool(a.b("bias")), "bias", "True"));
  return l;
}

Lowered lowerPool(const Node& n, const proto::NodeDef& d, bool average) {
  const Attrs& a = n.attrs;
  Lowered l;
  l.call = average ? "F.avg_pool2d" : "F.max_pool2d";
  // An empty stride is the kernel size, as PyTorch's None is.
  std::string stride = a.ints("stride").empty() ? "None" : pair(a, "stride", 1);
  l.fwdArgs = {arg(d, "", pair(a, "kernel_size", 1), "kernel_size"),
               arg(d, "stride", stride, "stride", "None"),
               arg(d, "padding", pair(a, "padding", 0), "padding", "0"),
               arg(d, "ceil_mode", pyBool(a.b("ceil_mode")), "ceil_mode", "False")};
  if (average)
    l.fwdArgs.push_back(
        arg(d, "count_include_pad", pyBool(a.b("count_include_pad")), "count_include_pad", "True"));
  return l;
}

Result<Lowered> lowerBatchNorm(const Graph& g, const Node& n, const proto::NodeDef& d) {
  const Attrs& a = n.attrs;
  const Shape& x = inShape(g, n, 0);
  Lowered l;
  // NetLoom's momentum is PyTorch's: the batch's weight in the running statistics.
  size_t rank = x.size();
  l.ctor = rank <= 3 ? "nn.BatchNorm1d" : rank == 4 ? "nn.BatchNorm2d" : "nn.BatchNorm3d";
  l.expr = "{m}({0})";
  if (rank > 5) {
    // PyTorch's modules stop at five dimensions; the statistics are per channel over
    // everything else either way, so the positions are flattened into one.
    l.ctor = "nn.BatchNorm1d";
    l.expr = "{m}({0}.flatten(2)).view_as({0})";
  }
  l.ctorArgs = {pos(d, "num_features", pyInt(x[1]), ""),
                arg(d, "eps", pyFloat(a.f("eps")), "eps", "1e-05"),
                arg(d, "momentum", pyFloat(a.f("momentum")), "momentum", "0.1"),
                arg(d, "affine", pyBool(a.b("affine")), "affine", "True")};
  return l;
}

}  // namespace

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_') || c >= 0x80) return false;
  return !keywords().count(s);
}

std::string sanitize(const std::string& name) {
  if (isIdentifier(name)) return name;
  std::string s;
  for (unsigned char c : name) s += (c < 0x80 && (std::isalnum(c) || c == '_')) ? char(c) : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  if (keywords().count(s)) s += "_";
  return s;
}

Result<Lowered> lowerNode(const Graph& g, const Node& n, const proto::NodeDef& d) {
  const std::string& op = n.op->name;
  const Attrs& a = n.attrs;
  Lowered l;
  auto fn = [&](std::string call) {
    l.call = std::move(call);
    return l;
  };
  if (!n.op->torchForm.empty()) {
    // Declared as data: the function, the attributes as its keywords.
    for (const AttrDef& at : n.op->attrs) {
      const double* def = std::get_if<double>(&at.def);
      l.fwdArgs.push_back(
          arg(d, at.name, pyFloat(a.f(at.name)), at.name, def ? pyFloat(*def) : std::string()));
    }
    return fn(n.op->torchForm);
  }
  if (op == "Linear") {
    l.ctor = "nn.Linear";
    l.ctorArgs = {pos(d, "in_features", pyInt(inShape(g, n, 0).back()), ""),
                  pos(d, "out_features", pyInt(a.i("out_features")), "out_features"),
                  arg(d, "bias", pyBool(a.b("bias")), "bias", "True")};
    l.expr = a.s("activation") == "relu" ? "F.relu({m}({0}))" : "{m}({0})";
  } else if (op == "Conv2d" || op == "ConvTranspose2d") {
    auto c = lowerConv(g, n, d, op == "ConvTranspose2d");
    if (!c) return c.error();
    l = std::move(*c);
  } else if (op == "BatchNorm") {
    auto c = lowerBatchNorm(g, n, d);
    if (!c) return c.error();
    l = std::move(*c);
  } else if (op == "LayerNorm") {
    const Shape& x = inShape(g, n, 0);
    Shape tail(x.end() - a.i("normalized_dims"), x.end());
    l.ctor = "nn.LayerNorm";
    l.ctorArgs = {pos(d, "normalized_shape", tail.size() == 1 ? pyInt(tail[0]) : pyTuple(tail), ""),
                  arg(d, "eps", pyFloat(a.f("eps")), "eps", "1e-05"),
                  arg(d, "elementwise_affine", pyBool(a.b("affine")), "affine", "True")};
    l.expr = "{m}({0})";
  } else if (op == "MaxPool2d" || op == "AvgPool2d") {
    l = lowerPool(n, d, op == "AvgPool2d");
  } else if (op == "GlobalAvgPool2d") {
    l.fwdArgs = {arg(d, "dim", "(2, 3)", ""),
                 arg(d, "keepdim", pyBool(a.b("keepdim")), "keepdim", "False")};
    return fn("torch.mean");
  } else if (op == "ReLU") {
    return fn("F.relu");
  } else if (op == "LeakyReLU") {
    l.fwdArgs = {
        arg(d, "negative_slope", pyFloat(a.f("negative_slope")), "negative_slope", "0.01")};
    return fn("F.leaky_relu");
  } else if (op == "GELU") {
    l.fwdArgs = {arg(d, "approximate", pyStr(a.s("approximate")), "approximate", "\"none\"")};
    return fn("F.gelu");
  } else if (op == "Sigmoid") {
    return fn("torch.sigmoid");
  } else if (op == "Tanh") {
    return fn("torch.tanh");
  } else if (op == "Softmax") {
    l.fwdArgs = {arg(d, "dim", pyInt(a.i("axis")), "axis")};
    return fn("torch.softmax");
  } else if (op == "Dropout") {
    // NetLoom's masks come from its own counter-based streams; PyTorch draws its own,
    // with the same probability and the same 1/(1-p) scaling.
    l.fwdArgs = {arg(d, "p", pyFloat(a.f("p")), "p"), arg(d, "training", "self.training", "")};
    return fn("F.dropout");
  } else if (op == "Flatten") {
    l.fwdArgs = {arg(d, "", pyInt(a.i("start_dim")), "start_dim")};
    return fn("torch.flatten");
  } else if (op == "Reshape") {
    // The shape is per sample: the batch dimension stays in front.
    l.expr = "{0}.reshape({0}.shape[0], *{a0})";
    l.fwdArgs = {arg(d, "", pyTuple(a.ints("shape")), "shape")};
  } else if (op == "Add") {
    l.expr = "{0} + {1}";
  } else if (op == "Concat") {
    l.expr = "torch.cat([{*}], dim={a0})";
    l.fwdArgs = {arg(d, "", pyInt(a.i("axis")), "axis")};
  } else if (op == "Identity") {
    l.expr = "{0}";
  } else if (op == "Upsample") {
    // Nearest neighbour by whole factors is a repeat of every row and column, exactly.
    int64_t sh = 1, sw = 1;
    pair2d(a, "scale_factor", 2, sh, sw);
    l.expr = "{0}.repeat_interleave({a0}, dim=2).repeat_interleave({a1}, dim=3)";
    l.fwdArgs = {arg(d, "", pyInt(sh), ""), arg(d, "", pyInt(sw), "")};
  } else if (op == "MatMul") {
    // Both operands are viewed as rows × last dimension, as the op defines them.
    bool ta = a.b("trans_a"), tb = a.b("trans_b");
    std::string lhs = ta ? "{0}.reshape(-1, {0}.shape[-1]).t()" : "{0}";
    std::string rhs = tb ? "{1}.reshape(-1, {1}.shape[-1]).t()" : "{1}.reshape(-1, {1}.shape[-1])";
    l.expr = "torch.matmul(" + lhs + ", " + rhs + ")";
  } else if (op == "Constant") {
    l.expr = "torch.full({a0}, {a1})";
    l.fwdArgs = {arg(d, "", pyTuple(a.ints("shape")), "shape"),
                 arg(d, "", pyFloat(a.f("value")), "value")};
  } else {
    return refuse(n, "has no PyTorch form in the export");
  }
  if (a.has("init") && a.s("init") != "default") l.init = a.s("init");
  if (n.op->params)
    for (const std::string& p : n.op->params(a)) l.paramNames.push_back(p);
  if (n.op->buffers)
    for (const std::string& p : n.op->buffers(a)) l.paramNames.push_back(p);
  return l;
}

}  // namespace netloom::pytorch
