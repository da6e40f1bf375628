// ConvTranspose2d: the gradient of a convolution with respect to its input, used as
// a layer (decoders, upsampling). Weight [in, out/groups, kh, kw] as in PyTorch.
// Backward: the input gradient is a plain convolution of dy.
#include "engine/ops/conv_common.h"

namespace netloom {

using namespace ops;

void registerConvTranspose2d(OpRegistry& r) {
  OpDef d;
  d.name = "ConvTranspose2d";
  d.autocast = true;
  d.category = "Layers";
  d.doc = "2-D transposed convolution (learned upsampling) over N×C×H×W";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "N × out_channels × H' × W'"}};
  d.attrs = convAttrs(true);
  d.params = [](const Attrs& a) {
    return a.b("bias") ? std::vector<std::string>{"weight", "bias"}
                       : std::vector<std::string>{"weight"};
  };
  d.infer = [](InferCtx& c) { return inferConv(c, true); };
  d.packableWeight = 1;
  d.layoutPorts = LayoutPorts{{0}, {0}, {}, true};
  d.grad = [](GradBuilder& b) {
    ValueId dy = b.outGrad(0);
    if (b.needsGrad(0))
      b.addGrad(0, b.emit("ConvTranspose2dGradInput", {dy, b.input(0), b.input(1)}, b.attrs()));
    b.addGrad(1, b.emit("ConvTranspose2dGradWeight", {dy, b.input(0), b.input(1)}, b.attrs()));
    if (b.numInputs() > 2) b.addGrad(2, b.emit("ReduceChannels", {dy}));
  };
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng& rng) { initConv(a, p, rng); };
  d.flops = [](const InferCtx& c) {
    const Shape& w = c.params[0].shape;
    return saturatingMul(saturatingMul(2 * numel(c.in[0].shape), w[1]), w[2] * w[3]);
  };
  d.torch = [](const TorchCtx& c) { return convTorch(c, true); };
  d.onnxExport = [](OnnxExportCtx& c) { return convOnnx(c, true); };
  d.onnxImport["ConvTranspose"] = [](OnnxImportCtx& c) { return convFromOnnx(c, true); };
  r.add(std::move(d));
  r.add(convGradOp("ConvTranspose2dGradInput", "d loss / d input of ConvTranspose2d", true));
  r.add(convGradOp("ConvTranspose2dGradWeight", "d loss / d weight of ConvTranspose2d", true));
}

}  // namespace netloom
