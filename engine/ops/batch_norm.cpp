// BatchNorm over N×C×… (1-D and 2-D alike): in training, normalises with the batch's
// per-channel mean and biased variance and updates the running statistics
// (running = (1 - momentum)·running + momentum·batch, the variance unbiased), as
// PyTorch does; in evaluation, uses the running statistics. The batch statistics are
// hidden outputs the backward pass reads.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/init.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

std::vector<AttrDef> batchNormAttrs() {
  std::vector<AttrDef> attrs = {
      intAttr("num_features", 0, 0, 1 << 24, "expected channels; 0 takes them from the input"),
      floatAttr("eps", 1e-5, 0.0, 1.0, "added to the variance"),
      floatAttr("momentum", 0.1, 0.0, 1.0, "weight of the batch in the running statistics"),
      boolAttr("affine", true, "learn a per-channel scale and shift"),
      boolAttr("sync", false,
               "with several ranks, normalise over the whole global batch (SyncBatchNorm); "
               "else each rank over its own share, as PyTorch's DDP does"),
      stringAttr("activation", "none", {"none", "relu"},
                 "activation applied to the output in the same kernel (set by fusion)"),
  };
  attrs.back().internal = true;
  return attrs;
}

// BatchNormalization on the running statistics; without affine, a scale of ones
// and a shift of zeros.
Status batchNormOnnx(OnnxExportCtx& c) {
  const Node& n = c.node();
  const int64_t ch = c.inShape(0)[1];
  std::vector<std::string> ins{c.input(0)};
  if (c.attrs().b("affine")) {
    for (int k : {1, 2}) {
      auto p = c.param(k, {ch});
      if (!p) return p.error();
      ins.push_back(*p);
    }
  } else {
    ins.push_back(c.initializer(n.name + ".scale", {ch}, std::vector<float>(size_t(ch), 1.f)));
    ins.push_back(c.initializer(n.name + ".shift", {ch}, std::vector<float>(size_t(ch), 0.f)));
  }
  const int stats = n.numDataInputs() + n.numParams - 2;
  for (int k = stats; k < stats + 2; ++k) {
    auto p = c.param(k, {ch});
    if (!p) return p.error();
    ins.push_back(*p);
  }
  // ONNX weighs the running statistics, PyTorch the batch.
  c.add(
      "BatchNormalization", n.name, ins, {c.output()},
      {{"epsilon", float(c.attrs().f("eps"))}, {"momentum", float(1.0 - c.attrs().f("momentum"))}});
  return {};
}

bool batchNormFromOnnx(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  bool ok = c.onlyAttrs({"epsilon", "momentum", "training_mode", "spatial"});
  if (n.i("training_mode", 0) != 0 || n.i("spatial", 1) != 1) {
    c.problem("training_mode=1 or spatial=0 has no NetLoom form");
    ok = false;
  }
  ok = !c.extraOutputsUsed() && ok;
  const char* names[] = {"scale", "bias (B)", "mean", "variance"};
  const OnnxConst* t[4];
  for (size_t k = 0; k < 4; ++k) ok = (t[k] = c.weightInput(k + 1, names[k])) && ok;
  if (!ok) return false;
  const int64_t ch = t[0]->size();
  for (const OnnxConst* p : t)
    if (p->size() != ch) {
      c.problem("its scale, bias, mean and variance differ in size");
      return false;
    }
  Attrs a;
  a.set("num_features", ch);
  a.set("eps", double(n.f("epsilon", 1e-5f)));
  // ONNX's momentum weighs the running statistics, NetLoom's (PyTorch's) the batch.
  a.set("momentum", 1.0 - double(n.f("momentum", 0.9f)));
  const std::string d = c.add("BatchNorm", {c.in(0)}, a);
  const char* keys[] = {"weight", "bias", "running_mean", "running_var"};
  for (int k = 0; k < 4; ++k) c.param(d, keys[k], *t[k], {ch});
  c.produce(d);
  return true;
}

// Split by the channels (each channel's statistics are its own), the parameters,
// running statistics and batch statistics alike. Not by the batch: each part's
// statistics would be its own share's, not the batch's.
std::vector<SbpSignature> batchNormSbp(const SbpCtx& c) {
  const Sbp B = Sbp::broadcast(), S0 = Sbp::split(0);
  std::vector<SbpSignature> out{{{B}, std::vector<Sbp>(c.params.size(), B), {B, B, B}}};
  out.push_back({{Sbp::split(1)}, std::vector<Sbp>(c.params.size(), S0), {Sbp::split(1), S0, S0}});
  return out;
}

OpDef batchNorm(const std::vector<AttrDef>& attrs) {
  OpDef d;
  d.name = "BatchNorm";
  d.halfFollows = true;
  d.foldsInto = "FoldBatchNorm";
  d.layoutPorts = LayoutPorts{{0}, {0}, {}, false};
  d.category = "Normalization";
  d.doc = "Normalises each channel over the batch (and positions)";
  d.inputs = {{"x", "N × C × …"}};
  d.outputs = {{"y", "same shape"},
               {"batch_mean", "per-channel mean", false, true},
               {"batch_var", "per-channel biased variance", false, true}};
  d.attrs = attrs;
  d.params = [](const Attrs& a) {
    return a.b("affine") ? std::vector<std::string>{"weight", "bias"} : std::vector<std::string>{};
  };
  d.buffers = [](const Attrs&) { return std::vector<std::string>{"running_mean", "running_var"}; };
  d.sbp = batchNormSbp;
  d.localAttrs = [](Attrs& a, const std::vector<Shape>&, const std::vector<Shape>& out, int) {
    if (a.i("num_features") != 0) a.set("num_features", out[0][1]);
  };
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    const Shape& x = c.in[0].shape;
    if (x.size() < 2)
      return c.fail("expects N × C or N × C × … (rank 2 or more), got rank " +
                        std::to_string(x.size()) + " (" + shapeToString(x) + ")",
                    0);
    int64_t ch = x[1], want = c.attrs.i("num_features");
    if (want != 0 && want != ch)
      return c.fail("attribute 'num_features' is " + std::to_string(want) + " but the input has " +
                        std::to_string(ch) + " channels (" + shapeToString(x) + ")",
                    0);
    for (auto& p : c.params) p = TensorDesc{{ch}, DType::F32, {}};
    c.out[0] = c.in[0];
    c.out[1] = c.out[2] = TensorDesc{{ch}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    ops::normalizationGrad(b, "BatchNormGrad", b.attrs().s("activation") == "relu");
  };
  d.init = [](const Attrs& a, const std::vector<TensorRef>& p, Rng&) {
    size_t k = 0;
    if (a.b("affine")) {
      fillConstant(p[k++], 1.0f);
      fillConstant(p[k++], 0.0f);
    }
    fillConstant(p[k++], 0.0f);  // running_mean
    fillConstant(p[k++], 1.0f);  // running_var
  };
  d.flops = [](const InferCtx& c) { return 4 * numel(c.in[0].shape); };
  d.onnxExport = batchNormOnnx;
  d.onnxImport["BatchNormalization"] = batchNormFromOnnx;
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    const Attrs& a = c.attrs();
    const Shape& x = c.inShape(0);
    // NetLoom's momentum is PyTorch's: the batch's weight in the running statistics.
    const size_t rank = x.size();
    TorchLowering l = TorchCtx::module(
        rank <= 3   ? "nn.BatchNorm1d"
        : rank == 4 ? "nn.BatchNorm2d"
                    : "nn.BatchNorm3d",
        {c.pos("num_features", pyInt(x[1]), ""), c.arg("eps", pyFloat(a.f("eps")), "eps", "1e-05"),
         c.arg("momentum", pyFloat(a.f("momentum")), "momentum", "0.1"),
         c.arg("affine", pyBool(a.b("affine")), "affine", "True")});
    if (rank > 5) {
      // PyTorch's modules stop at five dimensions; the statistics are per channel over
      // everything else either way, so the positions are flattened into one.
      l.ctor = "nn.BatchNorm1d";
      l.expr = "{m}({0}.flatten(2)).view_as({0})";
    }
    return l;
  };
  return d;
}

OpDef batchNormGrad(const std::vector<AttrDef>& attrs) {
  OpDef g;
  g.name = "BatchNormGrad";
  g.layoutPorts = LayoutPorts{{0, 1}, {0}, {}, false};
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "d loss / d input, weight and bias of BatchNorm (training mode)";
  g.inputs = {{"dy", "gradient of the output"},
              {"x", "forward input"},
              {"batch_mean", "forward batch mean"},
              {"batch_var", "forward batch variance"},
              {"weight", "scale, when affine", true}};
  g.outputs = {{"dx", "gradient of the input"}, {"dweight", "C"}, {"dbias", "C"}};
  g.attrs = attrs;
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    c.out[1] = c.out[2] = c.in[2];
    return true;
  };
  return g;
}

// A layer's weight and bias with the evaluation-mode BatchNorm after it folded in.
OpDef foldBatchNorm(const std::vector<AttrDef>& attrs) {
  OpDef f;
  f.name = "FoldBatchNorm";
  f.category = "Internal";
  f.role = OpRole::Internal;
  f.doc = "A layer's weight and bias with the evaluation-mode BatchNorm after it folded in";
  f.inputs = {
      {"weight", "the layer's weight, channel c in row c"},
      {"running_mean", "C"},
      {"running_var", "C"},
      {"rest", "the layer's bias when 'bias'; BatchNorm's weight and bias when 'affine'", true}};
  f.outputs = {{"weight", "folded weight"}, {"bias", "folded bias, C"}};
  f.attrs = {attrs[1], attrs[3], boolAttr("bias", false, "the layer has a bias")};
  f.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{c.in[0].shape, DType::F32, {}};
    c.out[1] = TensorDesc{{c.in[0].shape[0]}, DType::F32, {}};
    return true;
  };
  return f;
}

}  // namespace

void registerBatchNorm(OpRegistry& r) {
  const std::vector<AttrDef> attrs = batchNormAttrs();
  r.add(batchNorm(attrs));
  r.add(batchNormGrad(attrs));
  r.add(foldBatchNorm(attrs));
}

}  // namespace netloom
