// Conv2d over N×C×H×W with stride, padding (or "same"), dilation and groups; the
// weight is [out, in/groups, kh, kw] as in PyTorch. Backward: the input gradient
// is a transposed convolution of dy, the weight gradient correlates dy with x, the
// bias gradient sums dy over everything but channels.
#include <cmath>

#include "engine/ops/conv_common.h"
#include "engine/ops/init.h"
#include "kernels/core/geometry.h"

namespace netloom {
namespace ops {

std::vector<AttrDef> convAttrs(bool transposed) {
  std::vector<AttrDef> a = {
      intAttr("out_channels", 1, 1, 1 << 20, "number of output channels"),
      intsAttr("kernel_size", {3}, 1, 1024, "window size: k or [kh, kw]", true),
      intsAttr("stride", {1}, 1, 1024, "step between windows: s or [sh, sw]"),
      intsAttr("padding", {0}, 0, 1024, "zero padding on each side: p or [ph, pw]"),
      intsAttr("dilation", {1}, 1, 1024, "spacing between kernel taps"),
      intAttr("groups", 1, 1, 1 << 20, "channel groups; in and out channels must divide by it"),
      boolAttr("bias", true, "add a learned bias per output channel"),
      initAttr(),
  };
  a[0].required = true;
  if (transposed)
    a.push_back(intsAttr("output_padding", {0}, 0, 1024,
                         "extra rows/columns on the bottom/right of the output"));
  else
    a.push_back(boolAttr("same_padding", false,
                         "pad so the output is ceil(input / stride) (overrides 'padding')"));
  return a;
}

// Shared by Conv2d and ConvTranspose2d: channel and group checks, parameters.
bool inferConv(InferCtx& c, bool transposed) {
  if (!requireFloat(c, 0)) return false;
  Window2d w;
  std::string err = transposed ? convTransposeWindow(c.attrs, c.in[0].shape, w)
                               : convWindow(c.attrs, c.in[0].shape, w);
  if (!err.empty()) return c.fail(err, 0);
  int64_t groups = c.attrs.i("groups"), out = c.attrs.i("out_channels");
  if (w.c % groups != 0)
    return c.fail("attribute 'groups' (" + std::to_string(groups) + ") does not divide the " +
                      std::to_string(w.c) + " input channels",
                  0);
  if (out % groups != 0)
    return c.fail("attribute 'groups' (" + std::to_string(groups) +
                  ") does not divide out_channels (" + std::to_string(out) + ")");
  c.params[0] = transposed ? TensorDesc{{w.c, out / groups, w.kh, w.kw}, DType::F32, {}}
                           : TensorDesc{{out, w.c / groups, w.kh, w.kw}, DType::F32, {}};
  if (c.params.size() > 1) c.params[1] = TensorDesc{{out}, DType::F32, {}};
  c.out[0] = TensorDesc{{w.n, out, w.oh, w.ow}, DType::F32, {}};
  return true;
}

void initConv(const Attrs& a, const std::vector<TensorRef>& p, Rng& rng) {
  const Shape& s = p[0].shape;
  int64_t field = s[2] * s[3];
  // PyTorch computes fans from dims 1 and 0 of the stored weight, for both kinds.
  int64_t fanIn = s[1] * field, fanOut = s[0] * field;
  initWeight(a.s("init"), p[0], fanIn, fanOut, rng);
  if (p.size() > 1) fillUniform(p[1], 1.0 / std::sqrt(double(fanIn)), rng);
}

OpDef convGradOp(std::string name, std::string doc, bool transposed) {
  OpDef g;
  g.name = std::move(name);
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = std::move(doc);
  g.inputs = {
      {"dy", "gradient of the output"}, {"x", "forward input"}, {"weight", "forward weight"}};
  g.outputs = {{"grad", "gradient"}};
  g.attrs = convAttrs(transposed);
  g.attrs[0].required = false;
  g.attrs[1].required = false;
  // The gradient has the shape of what it differentiates: x, or the weight.
  bool weight = g.name.ends_with("GradWeight");
  int like = weight ? 2 : 1;
  g.packableWeight = 2;
  g.weightGradient = weight;
  // dy and x may be blocked; GradInput reads x for its shape only.
  g.layoutPorts = weight ? LayoutPorts{{0, 1}, {}, {}, true} : LayoutPorts{{0}, {0}, {1}, true};
  g.infer = [like](InferCtx& c) {
    c.out[0] = c.in[like];
    return true;
  };
  // As many multiply-adds as the forward: each pairs one weight with one input element
  // per output element of the forward (dy's for Conv2d, x's for ConvTranspose2d).
  g.flops = [transposed](const InferCtx& c) {
    const Shape& w = c.in[2].shape;
    const Shape& outer = c.in[transposed ? 1 : 0].shape;
    return saturatingMul(saturatingMul(2 * numel(outer), w[1]), w[2] * w[3]);
  };
  return g;
}

Result<TorchLowering> convTorch(const TorchCtx& c, bool transposed) {
  const Attrs& a = c.attrs();
  const Shape& x = c.inShape(0);
  TorchLowering l =
      TorchCtx::module(transposed ? "nn.ConvTranspose2d" : "nn.Conv2d",
                       {c.pos("in_channels", pyInt(x[1]), ""),
                        c.pos("out_channels", pyInt(a.i("out_channels")), "out_channels"),
                        c.arg("kernel_size", c.pair("kernel_size", 1), "kernel_size"),
                        c.arg("stride", c.pair("stride", 1), "stride", "1")});
  Window2d w;
  std::string err = transposed ? convTransposeWindow(a, x, w) : convWindow(a, x, w);
  if (!err.empty()) return c.refuse(err);
  if (!transposed && a.b("same_padding") && (w.padTop != w.padBottom || w.padLeft != w.padRight)) {
    // TensorFlow's "same" pads the extra row and column at the end, which a
    // convolution's own (symmetric) padding cannot: pad first, as PyTorch's
    // padding="same" does for stride 1.
    l.ctorArgs.push_back(c.arg("padding", "0", "", "0"));
    l.expr = "{m}(F.pad({0}, {a0}))";
    l.fwdArgs = {c.arg("", pyTuple({w.padLeft, w.padRight, w.padTop, w.padBottom}), "")};
  } else {
    std::string p = w.padTop == w.padLeft ? pyInt(w.padTop) : pyTuple({w.padTop, w.padLeft});
    l.ctorArgs.push_back(c.arg("padding", p, a.b("same_padding") ? "" : "padding", "0"));
  }
  if (transposed)
    l.ctorArgs.push_back(
        c.arg("output_padding", c.pair("output_padding", 0), "output_padding", "0"));
  l.ctorArgs.push_back(c.arg("dilation", c.pair("dilation", 1), "dilation", "1"));
  l.ctorArgs.push_back(c.arg("groups", pyInt(a.i("groups")), "groups", "1"));
  l.ctorArgs.push_back(c.arg("bias", pyBool(a.b("bias")), "bias", "True"));
  return l;
}

}  // namespace ops

using namespace ops;

namespace {

// By the batch; with one group also column parallel (the output channels split) and
// row parallel (the input channels split, the output partial). A spatial split would
// need each part's neighbouring rows (a halo), which no boxing moves.
std::vector<SbpSignature> conv2dSbp(const SbpCtx& c) {
  return weightedSumSignatures(c, {0}, 1, c.attrs.i("groups") == 1);
}

}  // namespace

void registerConv2d(OpRegistry& r) {
  OpDef d;
  d.name = "Conv2d";
  d.autocast = true;
  d.category = "Layers";
  d.doc = "2-D convolution over N×C×H×W";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "N × out_channels × H' × W'"}};
  d.attrs = convAttrs(false);
  d.params = [](const Attrs& a) {
    return a.b("bias") ? std::vector<std::string>{"weight", "bias"}
                       : std::vector<std::string>{"weight"};
  };
  d.infer = [](InferCtx& c) { return inferConv(c, false); };
  d.sbp = conv2dSbp;
  d.localAttrs = [](Attrs& a, const std::vector<Shape>&, const std::vector<Shape>& out, int) {
    a.set("out_channels", out[0][1]);  // a column-parallel part's channels
  };
  d.packableWeight = 1;
  d.foldsChannelAffine = [](const Shape&) { return true; };
  d.layoutPorts = LayoutPorts{{0}, {0}, {}, true};
  d.grad = [](GradBuilder& b) {
    ValueId dy = b.outGrad(0);
    if (b.needsGrad(0))
      b.addGrad(0, b.emit("Conv2dGradInput", {dy, b.input(0), b.input(1)}, b.attrs()));
    b.addGrad(1, b.emit("Conv2dGradWeight", {dy, b.input(0), b.input(1)}, b.attrs()));
    if (b.numInputs() > 2) b.addGrad(2, b.emit("ReduceChannels", {dy}));
  };
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng& rng) { initConv(a, p, rng); };
  d.flops = [](const InferCtx& c) {
    const Shape& w = c.params[0].shape;
    return saturatingMul(saturatingMul(2 * numel(c.out[0].shape), w[1]), w[2] * w[3]);
  };
  d.torch = [](const TorchCtx& c) { return convTorch(c, false); };
  d.onnxExport = [](OnnxExportCtx& c) { return convOnnx(c, false); };
  d.onnxImport["Conv"] = [](OnnxImportCtx& c) { return convFromOnnx(c, false); };
  d.onnxImport["Pad"] = padFromOnnx;
  r.add(std::move(d));
  r.add(convGradOp("Conv2dGradInput", "d loss / d input of Conv2d", false));
  r.add(convGradOp("Conv2dGradWeight", "d loss / d weight of Conv2d", false));

  OpDef rc;
  rc.name = "ReduceChannels";
  rc.category = "Internal";
  rc.role = OpRole::Internal;
  rc.doc = "Sums N × C × … over every dimension but C";
  rc.inputs = {{"x", "N × C × …"}};
  rc.outputs = {{"y", "C"}};
  rc.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{c.in[0].shape[1]}, DType::F32, {}};
    return true;
  };
  rc.layoutPorts = LayoutPorts{{0}, {}, {}, false};
  r.add(std::move(rc));
}

}  // namespace netloom
