// Add: element-wise sum of two tensors of the same shape (residual connections).
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// A constant added per output channel to the layer before it, where that layer has
// no bias and nothing else reads it, is the layer's bias: a layer of
// `out_features` (channels last) or `out_channels` (channels at dimension 1, N×C×H×W).
bool importBias(OnnxImportCtx& c, const std::string& x, const OnnxConst& k) {
  std::string layer, op;
  Attrs a;
  int64_t channels = -1;
  bool perChannel = false;
  if (c.producer(x, layer, op, a) && c.users(x) == 1 && a.has("bias") && !a.b("bias") &&
      k.isFloat) {
    if (a.has("out_features")) {
      channels = a.i("out_features");
      perChannel = !k.shape.empty() && k.shape.back() == channels && k.size() == channels;
    } else if (a.has("out_channels")) {
      channels = a.i("out_channels");
      perChannel =
          k.size() == channels && k.shape.size() >= 3 && k.shape[k.shape.size() - 3] == channels;
    }
  }
  if (!perChannel) {
    c.problem("it adds a constant of shape " + onnxShapeText(k.shape) +
              ", which NetLoom adds only as the bias of the layer before it");
    return false;
  }
  c.setAttr(layer, "bias", true);
  c.param(layer, "bias", k, {channels});
  c.produce(layer);
  return true;
}

bool importAdd(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  if (!c.onlyAttrs({})) return false;
  const bool c0 = c.isConst(n.input(0)), c1 = c.isConst(n.input(1));
  if (c0 || c1) {
    if (c0 && c1) {
      c.problem("it adds two constants, which NetLoom computes only as a layer's weight");
      return false;
    }
    return importBias(c, n.input(c0 ? 1 : 0), *c.constOf(n.input(c0 ? 0 : 1)));
  }
  const Shape *x = c.shapeOf(n.input(0)), *y = c.shapeOf(n.input(1));
  bool same = !x || !y || x->size() == y->size();
  for (size_t k = 1; same && x && y && k < x->size(); ++k)
    same = (*x)[k] < 0 || (*y)[k] < 0 || (*x)[k] == (*y)[k];
  if (!same) {
    c.problem("it adds shapes " + onnxShapeText(*x) + " and " + onnxShapeText(*y) +
              " (NetLoom adds tensors of one shape)");
    return false;
  }
  c.produce(c.add("Add", {c.in(0), c.in(1)}));
  return true;
}

}  // namespace

void registerAdd(OpRegistry& r) {
  OpDef d;
  d.name = "Add";
  d.halfFollows = true;
  d.category = "Merge";
  d.doc = "Element-wise sum of two tensors of the same shape";
  d.inputs = {{"a", "first tensor"}, {"b", "second tensor, same shape as a"}};
  d.outputs = {{"y", "a + b"}};
  d.attrs = {stringAttr("activation", "none", {"none", "relu"},
                        "activation applied to the sum in the same loop (set by fusion)")};
  d.attrs.back().internal = true;
  d.inplaceable = true;
  d.elementwise = true;
  d.sbp = [](const SbpCtx& c) { return elementwiseSignatures(c, true); };  // a sum of summands
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0) || !ops::requireFloat(c, 1)) return false;
    if (c.in[0].shape != c.in[1].shape)
      return c.fail("shape " + shapeToString(c.in[1].shape) + " does not match input 'a' shape " +
                        shapeToString(c.in[0].shape),
                    1);
    return ops::sameAsInput(c);
  };
  d.grad = [](GradBuilder& b) {
    ValueId dy = b.outGrad(0);
    if (b.attrs().s("activation") == "relu") dy = b.emit("ReLUGrad", {dy, b.output(0)});
    b.addGrad(0, dy);
    b.addGrad(1, dy);
  };
  d.flops = [](const InferCtx& c) { return numel(c.out[0].shape); };
  d.torch = [](const TorchCtx&) -> Result<TorchLowering> { return TorchCtx::expr("{0} + {1}"); };
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    c.same("Add");
    return {};
  };
  d.onnxImport["Add"] = importAdd;
  r.add(std::move(d));
}

}  // namespace netloom
