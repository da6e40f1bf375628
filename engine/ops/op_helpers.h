// Small pieces op files share: common shape rules and the element-wise op shape.
#pragma once

#include "engine/graph/op.h"
#include "engine/ops/grad_builder.h"
#include "kernels/core/checked.h"

namespace netloom::ops {

// Output 0 takes input 0's shape and type.
bool sameAsInput(InferCtx& c);
// Requires a float input on port `port`.
bool requireFloat(InferCtx& c, int port);
// Requires a scalar-per-sample label: int32 of shape [batch].
bool requireLabels(InferCtx& c, int port, int64_t batch);
// Requires int32 labels of shape `want` (a sequence's batch × tokens).
bool requireLabels(InferCtx& c, int port, const Shape& want);

// An element-wise activation y = f(x) whose gradient op takes (dy, x) or (dy, y).
OpDef unaryActivation(std::string name, std::string doc, std::string gradOp, bool gradFromOutput);
// The matching backward op: dx = g(dy, x-or-y), registered as internal.
OpDef unaryGrad(std::string name, std::vector<AttrDef> attrs = {});
// The backward of an element-wise activation: dx from dy and x (or y) at each position.
OpDef elementwiseGrad(std::string name, std::vector<AttrDef> attrs = {});

// An op the compiler inserts (category "Internal", never in the palette).
OpDef internalOp(std::string name, std::string doc, OpRole role = OpRole::Internal);

// Scores against labels: batch × classes and int32 labels of shape [batch] -> scalar.
bool inferClassMetric(InferCtx& c);

// The gradient of a pure reshape: the output gradient reshaped back to the input.
void reshapeGradBack(GradBuilder& b);

// The gradient of BatchNorm and LayerNorm: one backward op reading (dy, x, the two
// saved statistics[, weight]) and giving the input, weight and bias gradients. With
// `reluOutput` (a ReLU fused into the op's output), dy first goes through ReLU's
// gradient at that output.
void normalizationGrad(GradBuilder& b, const std::string& gradOp, bool reluOutput = false);

// Normalises a possibly negative axis for a tensor of `rank`; -1 when out of range.
int normAxis(int64_t axis, size_t rank);

}  // namespace netloom::ops
