// MSELoss: mean of (prediction - target)² over all elements. Its gradient with
// respect to the target is the same rule with the arguments swapped.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerMSELoss(OpRegistry& r) {
  OpDef d;
  d.name = "MSELoss";
  d.category = "Losses";
  d.role = OpRole::Loss;
  d.doc = "Mean squared error between prediction and target";
  d.inputs = {{"prediction", "any shape"}, {"target", "same number of elements"}};
  d.outputs = {{"loss", "scalar"}};
  d.infer = [](InferCtx& c) {
    if (!ops::requireFloat(c, 0)) return false;
    if (c.in[1].dtype != DType::F32)
      return c.fail("expects a float32 target (set the label Input's dtype to float32)", 1);
    if (numel(c.in[0].shape) != numel(c.in[1].shape))
      return c.fail("target " + shapeToString(c.in[1].shape) + " does not match prediction " +
                        shapeToString(c.in[0].shape),
                    1);
    c.out[0] = TensorDesc{{}, DType::F32, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    b.addGrad(0, b.emit("MSELossGrad", {b.outGrad(0), b.input(0), b.input(1)}));
    if (b.needsGrad(1)) b.addGrad(1, b.emit("MSELossGrad", {b.outGrad(0), b.input(1), b.input(0)}));
  };
  d.flops = [](const InferCtx& c) { return 2 * numel(c.in[0].shape); };
  r.add(std::move(d));

  OpDef g;
  g.name = "MSELossGrad";
  g.category = "Internal";
  g.role = OpRole::Internal;
  g.doc = "2·(p - t)/n · dloss";
  g.inputs = {{"dloss", "scalar"}, {"prediction", "any"}, {"target", "same elements"}};
  g.outputs = {{"dprediction", "prediction's shape"}};
  g.infer = [](InferCtx& c) {
    c.out[0] = c.in[1];
    return true;
  };
  r.add(std::move(g));
}

}  // namespace netloom
