// What Conv2d and ConvTranspose2d share: attributes, shape rule, initialiser and the
// shape of their backward ops.
#pragma once

#include "engine/graph/onnx_lowering.h"
#include "engine/graph/torch_lowering.h"
#include "engine/ops/op_helpers.h"

namespace netloom::ops {

std::vector<AttrDef> convAttrs(bool transposed);
bool inferConv(InferCtx& c, bool transposed);
void initConv(const Attrs& a, const std::vector<TensorRef>& p, Rng& rng);
OpDef convGradOp(std::string name, std::string doc, bool transposed);
// nn.Conv2d or nn.ConvTranspose2d, with NetLoom's padding as PyTorch's.
Result<TorchLowering> convTorch(const TorchCtx& c, bool transposed);
// ONNX Conv or ConvTranspose, both ways (conv_onnx.cpp); a zero Pad before a
// convolution or average pooling, read as that op's padding.
Status convOnnx(OnnxExportCtx& c, bool transposed);
bool convFromOnnx(OnnxImportCtx& c, bool transposed);
bool padFromOnnx(OnnxImportCtx& c);

}  // namespace netloom::ops
