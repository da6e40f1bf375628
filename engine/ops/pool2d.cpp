// MaxPool2d and AvgPool2d: windows over N×C×H×W with stride (the kernel size by
// default), padding and ceil_mode as in PyTorch. Their gradients read the forward
// input: max pooling routes dy to each window's first maximum, average pooling
// spreads it evenly.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"
#include "kernels/core/geometry.h"

namespace netloom {

namespace {

std::vector<AttrDef> poolAttrs(bool average) {
  std::vector<AttrDef> a = {
      intsAttr("kernel_size", {2}, 1, 1024, "window size: k or [kh, kw]", true),
      intsAttr("stride", {}, 1, 1024, "step between windows; empty: the kernel size"),
      intsAttr("padding", {0}, 0, 512, "implicit padding on each side (at most half the kernel)"),
      boolAttr("ceil_mode", false, "round the output size up instead of down"),
  };
  if (average)
    a.push_back(boolAttr("count_include_pad", true, "divide by the full window, padding included"));
  return a;
}

bool inferPool(InferCtx& c) {
  if (!ops::requireFloat(c, 0)) return false;
  Window2d w;
  if (std::string err = poolWindow(c.attrs, c.in[0].shape, w); !err.empty()) return c.fail(err, 0);
  c.out[0] = TensorDesc{{w.n, w.c, w.oh, w.ow}, DType::F32, {}};
  return true;
}

Status poolOnnx(OnnxExportCtx& c, bool average) {
  Window2d w;
  if (std::string err = poolWindow(c.attrs(), c.inShape(0), w); !err.empty()) return c.error(err);
  const bool ceil = c.attrs().b("ceil_mode");
  // A window that ceil_mode adds past the padding is divided by the part inside the
  // padded input in NetLoom (as PyTorch); ONNX runtimes disagree on that divisor.
  if (average && ceil && (w.padBottom > w.padTop || w.padRight > w.padLeft))
    return c.noForm("attribute ceil_mode=true with a last window past the padding");
  std::vector<OnnxAttr> attrs{
      {"kernel_shape", std::vector<int64_t>{w.kh, w.kw}},
      {"strides", std::vector<int64_t>{w.sh, w.sw}},
      {"pads", std::vector<int64_t>{w.padTop, w.padLeft, w.padTop, w.padLeft}},
      {"ceil_mode", int64_t(ceil ? 1 : 0)}};
  if (average) attrs.push_back({"count_include_pad", int64_t(c.attrs().b("count_include_pad"))});
  c.add(average ? "AveragePool" : "MaxPool", c.node().name, {c.input(0)}, {c.output()}, attrs);
  return {};
}

// The window, strides and padding of an ONNX pooling: 2-D, no dilation, pads
// symmetric or none (auto_pad VALID).
bool poolWindowFromOnnx(OnnxImportCtx& c, std::vector<int64_t>& pads) {
  const OnnxNode& n = c.n();
  bool ok = true;
  for (int64_t d : n.ints("dilations", {1, 1}))
    if (d != 1) {
      c.problem("attribute dilations has no NetLoom form for pooling");
      ok = false;
      break;
    }
  if (n.i("storage_order", 0) != 0) {
    c.problem("attribute storage_order=1 has no NetLoom form");
    ok = false;
  }
  pads = {0, 0};
  const std::string autoPad = n.s("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    ok = c.symmetricPads(pads) && ok;
  } else if (autoPad != "VALID") {
    c.problem("attribute auto_pad=" + autoPad + " has no NetLoom form");
    ok = false;
  }
  return ok;
}

bool poolFromOnnx(OnnxImportCtx& c, bool average) {
  const OnnxNode& n = c.n();
  std::set<std::string> known{"auto_pad", "ceil_mode",     "dilations", "kernel_shape",
                              "pads",     "storage_order", "strides"};
  if (average) known.insert("count_include_pad");
  bool ok = c.onlyAttrs(known) && !c.extraOutputsUsed();
  const std::vector<int64_t> k = n.ints("kernel_shape");
  const std::vector<int64_t> strides = n.ints("strides", {1, 1});
  if (k.size() != 2 || strides.size() != 2) {
    c.problem("a window of " + std::to_string(k.size()) + " dimensions: NetLoom pools 2-D");
    return false;
  }
  std::vector<int64_t> pads;
  ok = poolWindowFromOnnx(c, pads) && ok;
  std::vector<int64_t> extra{0, 0};
  const std::string x = average ? c.paddedInput(extra) : c.in(0);
  bool countPad = n.i("count_include_pad", 0) != 0;
  if (average && (extra[0] || extra[1])) {
    // Explicit zeros always count; the pool's own padding must count alike.
    if ((pads[0] || pads[1]) && !countPad) {
      c.problem("a Pad before it and its own pads without count_include_pad");
      return false;
    }
    countPad = true;
    pads = {pads[0] + extra[0], pads[1] + extra[1]};
  }
  if (!ok) return false;
  Attrs a;
  a.set("kernel_size", k);
  a.set("stride", strides);
  a.set("padding", pads);
  a.set("ceil_mode", n.i("ceil_mode", 0) != 0);
  if (average) a.set("count_include_pad", countPad);
  c.produce(c.add(average ? "AvgPool2d" : "MaxPool2d", {x}, a));
  return true;
}

OpDef pool(const std::string& name, bool average) {
  OpDef d;
  d.name = name;
  d.halfFollows = true;
  d.category = "Pooling";
  d.doc = average ? "Average over each window of N×C×H×W" : "Maximum over each window of N×C×H×W";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "N × C × H' × W'"}};
  d.attrs = poolAttrs(average);
  d.infer = inferPool;
  d.sbp = [](const SbpCtx& c) { return splitOutsideAxes(c, {2, 3}); };  // by batch or channel
  d.layoutPorts = LayoutPorts{{0}, {0}, {}, false};
  std::string gradOp = name + "Grad";
  d.grad = [gradOp](GradBuilder& b) {
    b.addGrad(0, b.emit(gradOp, {b.outGrad(0), b.input(0)}, b.attrs()));
  };
  d.flops = [](const InferCtx& c) {
    int64_t kh = 1, kw = 1;
    pair2d(c.attrs, "kernel_size", 1, kh, kw);
    return saturatingMul(numel(c.out[0].shape), kh * kw);
  };
  d.torch = [average](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    // An empty stride is the kernel size, as PyTorch's None is.
    std::string stride = a.ints("stride").empty() ? "None" : c.pair("stride", 1);
    TorchLowering l =
        TorchCtx::call(average ? "F.avg_pool2d" : "F.max_pool2d",
                       {c.arg("", c.pair("kernel_size", 1), "kernel_size"),
                        c.arg("stride", stride, "stride", "None"),
                        c.arg("padding", c.pair("padding", 0), "padding", "0"),
                        c.arg("ceil_mode", pyBool(a.b("ceil_mode")), "ceil_mode", "False")});
    if (average)
      l.fwdArgs.push_back(c.arg("count_include_pad", pyBool(a.b("count_include_pad")),
                                "count_include_pad", "True"));
    return l;
  };
  d.onnxExport = [average](OnnxExportCtx& c) { return poolOnnx(c, average); };
  d.onnxImport[average ? "AveragePool" : "MaxPool"] = [average](OnnxImportCtx& c) {
    return poolFromOnnx(c, average);
  };
  return d;
}

OpDef poolGrad(const std::string& name, bool average) {
  OpDef g;
  g.name = name + "Grad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d input of " + name;
  g.inputs = {{"dy", "gradient of the output"}, {"x", "forward input"}};
  g.outputs = {{"dx", "gradient of the input"}};
  g.attrs = poolAttrs(average);
  g.attrs[0].required = false;
  // Max pooling's backward reads x; average pooling's reads only its shape.
  g.layoutPorts = average ? LayoutPorts{{0}, {0}, {1}, false} : LayoutPorts{{0, 1}, {0}, {}, false};
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  return g;
}

}  // namespace

void registerPool2d(OpRegistry& r) {
  r.add(pool("MaxPool2d", false));
  r.add(poolGrad("MaxPool2d", false));
  r.add(pool("AvgPool2d", true));
  r.add(poolGrad("AvgPool2d", true));
}

}  // namespace netloom
