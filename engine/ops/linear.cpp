// Linear: y = x·Wᵀ + b over the last dimension, W laid out [out, in] as in PyTorch.
// Backward: dx = dy·W, dW = dyᵀ·x, db = column sums of dy.
#include <cmath>

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/init.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// Gemm over matrices; MatMul by the weight stored transposed, then the bias, over
// more dimensions; a ReLU the layer applies after it. The last node carries the
// node's name, so that an importer names the layer after it.
Status exportLinear(OnnxExportCtx& c) {
  const Node& n = c.node();
  OnnxWeight w, b;
  bool hasBias = false;
  if (Status s = c.layerParams(c.inShape(1)[0], w, b, hasBias); !s) return s;
  const bool relu = c.attrs().s("activation") == "relu";
  const std::string y = c.output();
  const int64_t outF = w.shape[0], inF = w.shape[1];
  // Each step writes `y` when it is the last one, else a fresh value.
  int steps = 1 + (relu ? 1 : 0);
  std::string cur = c.input(0);
  auto step = [&](const std::string& op, const std::string& what, std::vector<std::string> ins,
                  std::vector<OnnxAttr> attrs = {}) {
    --steps;
    std::string to = steps == 0 ? y : c.fresh(what + "_out");
    c.add(op, steps == 0 ? n.name : c.fresh(what), ins, {to}, attrs);
    cur = to;
  };
  auto bias = [&] {
    return c.initializer(n.name + ".bias", b.shape, b.values, n.inputs.size() > 2);
  };
  if (c.inShape(0).size() == 2) {
    std::vector<std::string> ins{cur, c.initializer(c.name(n.inputs[1]), w.shape, w.values, true)};
    if (hasBias) ins.push_back(bias());
    step("Gemm", "gemm", ins, {{"transB", int64_t(1)}});
  } else {
    std::vector<float> t(w.values.size());
    for (int64_t o = 0; o < outF; ++o)
      for (int64_t i = 0; i < inF; ++i) t[size_t(i * outF + o)] = w.values[size_t(o * inF + i)];
    std::string wt = c.initializer(c.name(n.inputs[1]), {inF, outF}, std::move(t), true);
    if (hasBias) ++steps;
    step("MatMul", "matmul", {cur, wt});
    if (hasBias) step("Add", "bias", {cur, bias()});
  }
  if (relu) step("Relu", "relu", {cur});
  return {};
}

// Gemm with a constant B: Linear's weight is [out, in], B as given with transB,
// else transposed; alpha and beta scale the weight and the bias.
bool importGemm(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  bool ok = c.onlyAttrs({"alpha", "beta", "transA", "transB"});
  if (n.i("transA", 0) != 0) {
    c.problem("attribute transA=1 has no NetLoom form");
    ok = false;
  }
  const OnnxConst* bw = c.weightInput(1, "weight (input B)");
  const bool hasBias = !n.input(2).empty();
  const OnnxConst* bc = hasBias ? c.weightInput(2, "bias (input C)") : nullptr;
  if (!ok || !bw || (hasBias && !bc)) return false;
  if (bw->shape.size() != 2) {
    c.problem("a weight of shape " + onnxShapeText(bw->shape));
    return false;
  }
  const bool tb = n.i("transB", 0) != 0;
  OnnxConst w = *bw;
  if (!tb) w.f = transposed2d(*bw);
  const int64_t out = tb ? bw->shape[0] : bw->shape[1], in = tb ? bw->shape[1] : bw->shape[0];
  const float alpha = n.f("alpha", 1.f), beta = n.f("beta", 1.f);
  if (alpha != 1.f)
    for (float& v : w.f) v *= alpha;
  OnnxConst bias;
  if (bc) {
    if (bc->size() != out && bc->size() != 1) {
      c.problem("a bias of shape " + onnxShapeText(bc->shape) + " (NetLoom adds one per output)");
      return false;
    }
    bias.f = bc->size() == 1 ? std::vector<float>(size_t(out), bc->f[0]) : bc->f;
    for (float& v : bias.f) v *= beta;
  }
  Attrs a;
  a.set("out_features", out);
  a.set("bias", bc != nullptr);
  const std::string d = c.add("Linear", {c.in(0)}, a);
  c.param(d, "weight", w, {out, in});
  if (bc) c.param(d, "bias", bias, {out});
  c.produce(d);
  return true;
}

// Data parallel (x split on a leading axis), column parallel (W split by output rows:
// y split on its last axis) and row parallel (x and W split on the inputs: y partial,
// the bias added on one rank only, as a partial summand).
std::vector<SbpSignature> linearSbp(const SbpCtx& c) {
  const int last = int(c.in[0].size()) - 1;
  std::vector<int> leading;
  for (int axis = 0; axis < last; ++axis) leading.push_back(axis);
  return weightedSumSignatures(c, leading, last, true);
}

// A rank's part of a column-parallel layer has that part of the outputs.
void linearLocalAttrs(Attrs& a, const std::vector<Shape>&, const std::vector<Shape>& out, int) {
  a.set("out_features", out[0].back());
}

}  // namespace

void registerLinear(OpRegistry& r) {
  OpDef d;
  d.name = "Linear";
  d.autocast = true;
  d.foldsChannelAffine = [](const Shape& y) { return y.size() == 2; };
  d.category = "Layers";
  d.doc = "Fully connected layer: y = x·Wᵀ + b over the last dimension";
  d.inputs = {{"x", "… × in_features"}};
  d.outputs = {{"y", "… × out_features"}};
  d.attrs = {
      intAttr("out_features", 1, 1, 1 << 24, "number of output features"),
      boolAttr("bias", true, "add a learned bias"),
      initAttr(),
      stringAttr("activation", "none", {"none", "relu"},
                 "activation applied in the same kernel (set by fusion)"),
  };
  d.attrs[0].required = true;
  d.params = [](const Attrs& a) {
    return a.b("bias") ? std::vector<std::string>{"weight", "bias"}
                       : std::vector<std::string>{"weight"};
  };
  d.sbp = linearSbp;
  d.localAttrs = linearLocalAttrs;
  d.infer = [](InferCtx& c) {
    // bf16 where mixed precision stores the operands in 16 bits (CastBf16).
    if (c.in[0].dtype != DType::BF16 && !ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() < 2)
      return c.fail("expects at least batch × features, got " + shapeToString(x), 0);
    int64_t in = x.back(), out = c.attrs.i("out_features");
    c.params[0] = TensorDesc{{out, in}, DType::F32, {}};
    if (c.params.size() > 1) c.params[1] = TensorDesc{{out}, DType::F32, {}};
    Shape y = x;
    y.back() = out;
    c.out[0] = TensorDesc{y, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    ValueId dy = b.outGrad(0);
    if (b.attrs().s("activation") == "relu") dy = b.emit("ReLUGrad", {dy, b.output(0)});
    Attrs ta;
    ta.set("trans_a", true);
    if (b.needsGrad(0)) b.addGrad(0, b.emit("MatMul", {dy, b.input(1)}));
    b.addGrad(1, b.emit("MatMul", {dy, b.input(0)}, ta));
    if (b.numInputs() > 2) b.addGrad(2, b.emit("ReduceRows", {dy}));
  };
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng& rng) {
    int64_t fanIn = p[0].shape[1], fanOut = p[0].shape[0];
    initWeight(a.s("init"), p[0], fanIn, fanOut, rng);
    // PyTorch's default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    if (p.size() > 1) fillUniform(p[1], 1.0 / std::sqrt(double(fanIn)), rng);
  };
  d.flops = [](const InferCtx& c) {
    return saturatingMul(2 * numel(c.out[0].shape), c.in[0].shape.back());
  };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    return TorchCtx::module("nn.Linear",
                            {c.pos("in_features", pyInt(c.inShape(0).back()), ""),
                             c.pos("out_features", pyInt(a.i("out_features")), "out_features"),
                             c.arg("bias", pyBool(a.b("bias")), "bias", "True")},
                            a.s("activation") == "relu" ? "F.relu({m}({0}))" : "{m}({0})");
  };
  d.onnxExport = exportLinear;
  d.onnxImport["Gemm"] = importGemm;
  r.add(std::move(d));

  OpDef rows;
  rows.name = "ReduceRows";
  rows.category = "Internal";
  rows.role = OpRole::Internal;
  rows.doc = "Sums all leading dimensions: … × n -> n";
  rows.inputs = {{"x", "… × n"}};
  rows.outputs = {{"y", "n"}};
  rows.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{{c.in[0].shape.back()}, DType::F32, {}};
    return true;
  };
  r.add(std::move(rows));
}

}  // namespace netloom
