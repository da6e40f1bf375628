// MaxPool2d and AvgPool2d: windows over N×C×H×W with stride (the kernel size by
// default), padding and ceil_mode as in PyTorch. Their gradients read the forward
// input: max pooling routes dy to each window's first maximum, average pooling
// spreads it evenly.
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

OpDef pool(const std::string& name, bool average) {
  OpDef d;
  d.name = name;
  d.category = "Pooling";
  d.doc = average ? "Average over each window of N×C×H×W" : "Maximum over each window of N×C×H×W";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "N × C × H' × W'"}};
  d.attrs = poolAttrs(average);
  d.infer = inferPool;
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
