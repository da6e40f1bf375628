// The ops declared in engine/ops/elementwise/, registered from their declarations
// (elementwise_op.h): each becomes an activation and its "Grad" backward, dx from
// (dy, x), with its attributes, cost and interop forms.
#include "elementwise_ops.gen.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerDeclaredElementwise(OpRegistry& r) {
  ew::ForEach<ew::All>::run([&r]<class Op>(size_t) {
    std::vector<AttrDef> attrs;
    for (const ew::Param& p : Op::kParams)
      attrs.push_back(floatAttr(p.name, p.def, p.min, p.max, p.doc));
    const std::string grad = std::string(Op::kName) + "Grad";
    OpDef d = ops::unaryActivation(Op::kName, Op::kDoc, grad, false);
    d.attrs = attrs;
    d.onnxForm = Op::kOnnx;
    d.torchForm = Op::kTorch;
    d.flops = [](const InferCtx& c) { return int64_t(Op::kFlops) * numel(c.out[0].shape); };
    r.add(std::move(d));
    r.add(ops::elementwiseGrad(grad, attrs));
  });
}

}  // namespace netloom
