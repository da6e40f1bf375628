#include "engine/ops/all_ops.h"

#include "engine/graph/op.h"

namespace netloom {

void registerAllOps(OpRegistry& r) {
  registerInput(r);
  registerConstant(r);
  registerAutocast(r);
  registerCollectives(r);
  registerBoxing(r);
  registerZero(r);
  registerPipeline(r);
  registerLinear(r);
  registerMatMul(r);
  registerReLU(r);
  registerLeakyReLU(r);
  registerGELU(r);
  registerSigmoid(r);
  registerTanh(r);
  registerDeclaredElementwise(r);
  registerSoftmax(r);
  registerDropout(r);
  registerPointwise(r);
  registerFlatten(r);
  registerReshape(r);
  registerAdd(r);
  registerConcat(r);
  registerIdentity(r);
  registerSoftmaxCrossEntropy(r);
  registerMSELoss(r);
  registerBCELoss(r);
  registerAccuracy(r);
  registerTopKAccuracy(r);
  registerConv2d(r);
  registerConvTranspose2d(r);
  registerPool2d(r);
  registerGlobalAvgPool2d(r);
  registerBatchNorm(r);
  registerLayerNorm(r);
  registerUpsample(r);
  registerSgdUpdate(r);
  registerAdamUpdate(r);
  registerReorder(r);
  registerSumSquares(r);
  registerTranspose(r);
  registerBatchMatMul(r);
  registerEmbedding(r);
  registerPositionEmbedding(r);
  registerRotaryEmbedding(r);
  registerRMSNorm(r);
  registerAttention(r);
  registerKvCache(r);
}

}  // namespace netloom
