// GELU: x·Φ(x), exact (erf) or the tanh approximation, as PyTorch offers both.
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerGELU(OpRegistry& r) {
  AttrDef approx = stringAttr("approximate", "none", {"none", "tanh"},
                              "'none' uses erf; 'tanh' the faster approximation");
  OpDef d = ops::unaryActivation("GELU", "Gaussian error linear unit: x·Φ(x)", "GELUGrad", false);
  d.attrs = {approx};
  d.flops = [](const InferCtx& c) { return 8 * numel(c.out[0].shape); };
  d.torch = [](const TorchCtx& c) -> Result<TorchLowering> {
    return TorchCtx::call("F.gelu", {c.arg("approximate", pyStr(c.attrs().s("approximate")),
                                           "approximate", "\"none\"")});
  };
  r.add(std::move(d));
  r.add(ops::elementwiseGrad("GELUGrad", {approx}));
}

}  // namespace netloom
