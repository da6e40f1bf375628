// Conv2d and ConvTranspose2d as ONNX Conv and ConvTranspose (conv_common.h), and the
// zero Pad that PyTorch writes before a convolution or an average pooling, which
// becomes that op's own padding.
#include "engine/graph/onnx_lowering.h"
#include "engine/ops/conv_common.h"
#include "kernels/core/geometry.h"

namespace netloom::ops {

Status convOnnx(OnnxExportCtx& c, bool transposed) {
  Window2d win;
  const Attrs& a = c.attrs();
  const Shape& x = c.inShape(0);
  std::string err = transposed ? convTransposeWindow(a, x, win) : convWindow(a, x, win);
  if (!err.empty()) return c.error(err);
  OnnxWeight w, b;
  bool hasBias = false;
  const int64_t channels = transposed ? c.outShape()[1] : c.inShape(1)[0];
  if (Status s = c.layerParams(channels, w, b, hasBias); !s) return s;
  const Node& n = c.node();
  std::vector<std::string> ins{c.input(0),
                               c.initializer(c.name(n.inputs[1]), w.shape, w.values, true)};
  if (hasBias)
    ins.push_back(c.initializer(n.name + ".bias", b.shape, b.values, n.inputs.size() > 2));
  std::vector<OnnxAttr> attrs{{"kernel_shape", std::vector<int64_t>{win.kh, win.kw}},
                              {"strides", std::vector<int64_t>{win.sh, win.sw}},
                              {"dilations", std::vector<int64_t>{win.dh, win.dw}},
                              {"group", a.i("groups")}};
  if (transposed) {
    // NetLoom pads both ends by `padding`; output_padding adds the rows ONNX adds.
    int64_t oph = 0, opw = 0;
    pair2d(a, "output_padding", 0, oph, opw);
    attrs.push_back(
        {"pads", std::vector<int64_t>{win.padTop, win.padLeft, win.padTop, win.padLeft}});
    attrs.push_back({"output_padding", std::vector<int64_t>{oph, opw}});
  } else {
    attrs.push_back(
        {"pads", std::vector<int64_t>{win.padTop, win.padLeft, win.padBottom, win.padRight}});
  }
  c.add(transposed ? "ConvTranspose" : "Conv", n.name, ins, {c.output()}, attrs);
  return {};
}

namespace {

// Uneven pads are NetLoom's same_padding when they are what it computes: output
// ceil(input / stride), the odd row or column at the end.
bool sameUpper(OnnxImportCtx& c, const OnnxConst& w, const std::vector<int64_t>& strides,
               const std::vector<int64_t>& dil) {
  std::vector<int64_t> p = c.n().ints("pads", {0, 0, 0, 0});
  const Shape* x = c.shapeOf(c.n().input(0));
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

// NetLoom's padding from auto_pad and pads: `same` for SAME_UPPER (or pads that say
// it), else symmetric pads.
bool convPadding(OnnxImportCtx& c, const OnnxConst& w, bool transposed,
                 const std::vector<int64_t>& strides, const std::vector<int64_t>& dil,
                 std::vector<int64_t>& pads, bool& same) {
  const std::string autoPad = c.n().s("auto_pad", "NOTSET");
  same = false;
  pads = {0, 0};
  if (autoPad == "SAME_UPPER" && !transposed) {
    same = true;  // NetLoom's "same" puts the odd padding at the end, as SAME_UPPER
  } else if (autoPad == "NOTSET" && !transposed && sameUpper(c, w, strides, dil)) {
    same = true;
  } else if (autoPad == "NOTSET") {
    return c.symmetricPads(pads);
  } else if (autoPad != "VALID") {
    c.problem("attribute auto_pad=" + autoPad + " has no NetLoom form");
    return false;
  }
  return true;
}

// A 2-element window attribute, or a recorded problem.
std::vector<int64_t> pairAttr(OnnxImportCtx& c, const char* name, int64_t def, bool& ok) {
  std::vector<int64_t> v = c.n().ints(name, {def, def});
  if (v.size() != 2) {
    c.problem(std::string("attribute ") + name + "=" + onnxShapeText(v));
    ok = false;
  }
  return v;
}

}  // namespace

bool convFromOnnx(OnnxImportCtx& c, bool transposed) {
  const OnnxNode& n = c.n();
  std::set<std::string> known{"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};
  if (transposed) known.insert({"output_padding", "output_shape"});
  bool ok = c.onlyAttrs(known);
  const OnnxConst* w = c.weightInput(1, "weight");
  if (!w) return false;
  if (w->shape.size() != 4) {
    c.problem("a weight of shape " + onnxShapeText(w->shape) +
              ": NetLoom convolves 2-D images only");
    return false;
  }
  const bool hasBias = !n.input(2).empty();
  const OnnxConst* b = hasBias ? c.weightInput(2, "bias") : nullptr;
  if (hasBias && !b) return false;
  const int64_t g = n.i("group", 1);
  const int64_t out = transposed ? w->shape[1] * g : w->shape[0];
  const std::vector<int64_t> strides = pairAttr(c, "strides", 1, ok);
  const std::vector<int64_t> dil = pairAttr(c, "dilations", 1, ok);
  if (n.has("kernel_shape") && n.ints("kernel_shape") != Shape{w->shape[2], w->shape[3]}) {
    c.problem("attribute kernel_shape does not match the weight " + onnxShapeText(w->shape));
    ok = false;
  }
  std::vector<int64_t> pads;
  bool same = false;
  ok = convPadding(c, *w, transposed, strides, dil, pads, same) && ok;
  if (transposed && n.has("output_shape")) {
    c.problem("attribute output_shape has no NetLoom form (output_padding has)");
    ok = false;
  }
  if (b && b->size() != out) {
    c.problem("a bias of shape " + onnxShapeText(b->shape) + " for " + std::to_string(out) +
              " channels");
    ok = false;
  }
  std::vector<int64_t> extra;
  const std::string x = c.paddedInput(extra);
  if ((extra[0] || extra[1]) && (same || transposed)) {
    c.problem("a Pad before it with auto_pad or a transposed convolution");
    ok = false;
  }
  if (!ok) return false;
  Attrs a;
  a.set("out_channels", out);
  a.set("kernel_size", std::vector<int64_t>{w->shape[2], w->shape[3]});
  a.set("stride", strides);
  a.set("padding", std::vector<int64_t>{pads[0] + extra[0], pads[1] + extra[1]});
  a.set("dilation", dil);
  a.set("groups", g);
  a.set("bias", b != nullptr);
  if (same) a.set("same_padding", true);
  if (transposed) a.set("output_padding", n.ints("output_padding", {0, 0}));
  const std::string d = c.add(transposed ? "ConvTranspose2d" : "Conv2d", {x}, a);
  c.param(d, "weight", *w, w->shape);
  if (b) c.param(d, "bias", *b, {out});
  c.produce(d);
  return true;
}

bool padFromOnnx(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  if (!c.onlyAttrs({"mode", "pads", "value"})) return false;
  std::vector<int64_t> p = n.ints("pads");
  double value = n.f("value", 0.f);
  const OnnxConst* pc = n.input(1).empty() ? nullptr : c.constOf(n.input(1));
  const OnnxConst* vc = n.input(2).empty() ? nullptr : c.constOf(n.input(2));
  if (pc && !pc->isFloat) p = pc->i;
  if (vc && vc->size() == 1) value = vc->at(0);
  const bool known = (n.inputs.size() < 2 || pc) && (n.input(2).empty() || vc);
  if (n.s("mode", "constant") != "constant" || value != 0 || !known || n.inputs.size() > 3) {
    c.problem("only padding with zeros by amounts known before the model runs has a NetLoom form");
    return false;
  }
  bool zero = true;
  for (int64_t v : p) zero = zero && v == 0;
  if (zero) {  // PyTorch writes an empty Pad before AveragePool
    c.produce(c.in(0));
    return true;
  }
  // Zeros around H×W before a convolution or an average pooling that counts them:
  // that op's own padding.
  const std::string& y = n.outputs[0];
  const bool spatial = p.size() == 8 && p[0] == 0 && p[1] == 0 && p[4] == 0 && p[5] == 0 &&
                       p[2] == p[6] && p[3] == p[7] && p[2] >= 0 && p[3] >= 0;
  const OnnxNode* r = spatial && c.users(y) == 1 ? c.soleReader(y) : nullptr;
  if (r && r->input(0) == y && (r->opType == "Conv" || r->opType == "AveragePool")) {
    c.setPad(y, {n.inputs[0], p[2], p[3]});
    return true;
  }
  c.problem(
      "padding other than zeros around height and width before a convolution or average "
      "pooling has no NetLoom form");
  return false;
}

}  // namespace netloom::ops
