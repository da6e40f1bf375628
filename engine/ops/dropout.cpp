// Dropout: in training, zeroes each element with probability p and scales the rest
// by 1/(1-p); in evaluation, the identity. The mask is a pure function of (seed,
// step, node, index), so the backward pass regenerates it instead of storing it:
// the gradient is Dropout applied to dy with the same attributes.
#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

// Kept as Dropout so that the imported model trains as it was meant to; outside
// training it is the identity, as in the ONNX model.
bool dropoutFromOnnx(OnnxImportCtx& c) {
  const OnnxNode& n = c.n();
  bool ok = c.onlyAttrs({"seed", "ratio", "is_test"}) && !c.extraOutputsUsed();
  double p = n.f("ratio", 0.5f);
  if (!n.input(1).empty()) {
    const OnnxConst* r = c.constOf(n.input(1));
    if (!r || r->size() != 1) {
      c.problem("its ratio is computed while the model runs");
      ok = false;
    } else {
      p = r->at(0);
    }
  }
  if (!n.input(2).empty()) {
    const OnnxConst* t = c.constOf(n.input(2));
    if (!t || t->size() != 1 || t->at(0) != 0) {
      c.problem("training_mode is on or computed while the model runs");
      ok = false;
    }
  }
  if (!ok) return false;
  Attrs a;
  a.set("p", p);
  c.produce(c.add("Dropout", {c.in(0)}, a));
  return true;
}

}  // namespace

void registerDropout(OpRegistry& r) {
  OpDef d;
  d.name = "Dropout";
  d.halfFollows = true;
  d.category = "Layers";
  d.doc = "Randomly zeroes elements while training (inverted dropout)";
  d.inputs = {{"x", "input tensor"}};
  d.outputs = {{"y", "same shape"}};
  d.attrs = {floatAttr("p", 0.5, 0.0, 0.99, "probability of zeroing an element")};
  d.inplaceable = true;
  d.elementwise = true;
  d.infer = [](InferCtx& c) { return ops::requireFloat(c, 0) && ops::sameAsInput(c); };
  d.grad = [](GradBuilder& b) { b.addGrad(0, b.emit("Dropout", {b.outGrad(0)}, b.attrs())); };
  // NetLoom's masks come from its own counter-based streams; PyTorch draws its own,
  // with the same probability and the same 1/(1-p) scaling.
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("F.dropout", {c.arg("p", pyFloat(c.attrs().f("p")), "p"),
                                        c.arg("training", "self.training", "")});
  };
  // ONNX Dropout outside training (no training_mode input) is the identity; its
  // ratio carries p, so that the model comes back as it was drawn.
  d.onnxExport = [](OnnxExportCtx& c) -> Status {
    const std::string& name = c.node().name;
    c.add("Dropout", name, {c.input(0), c.scalar(name + "/ratio", float(c.attrs().f("p")))},
          {c.output()});
    return {};
  };
  d.onnxImport["Dropout"] = dropoutFromOnnx;
  r.add(std::move(d));
}

}  // namespace netloom
