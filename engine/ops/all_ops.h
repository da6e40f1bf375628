// The explicit list of op registrations: one function per op file.
#pragma once

namespace netloom {

class OpRegistry;

void registerAllOps(OpRegistry& r);

void registerInput(OpRegistry& r);
void registerConstant(OpRegistry& r);
// Every op of engine/ops/elementwise/, from its declaration (elementwise.cpp).
void registerDeclaredElementwise(OpRegistry& r);
void registerAutocast(OpRegistry& r);
void registerCollectives(OpRegistry& r);
void registerBoxing(OpRegistry& r);
void registerZero(OpRegistry& r);
void registerPipeline(OpRegistry& r);
void registerLinear(OpRegistry& r);
void registerMatMul(OpRegistry& r);
void registerReLU(OpRegistry& r);
void registerLeakyReLU(OpRegistry& r);
void registerGELU(OpRegistry& r);
void registerSigmoid(OpRegistry& r);
void registerTanh(OpRegistry& r);
void registerSoftmax(OpRegistry& r);
void registerDropout(OpRegistry& r);
void registerPointwise(OpRegistry& r);
void registerFlatten(OpRegistry& r);
void registerReshape(OpRegistry& r);
void registerAdd(OpRegistry& r);
void registerConcat(OpRegistry& r);
void registerIdentity(OpRegistry& r);
void registerSoftmaxCrossEntropy(OpRegistry& r);
void registerMSELoss(OpRegistry& r);
void registerBCELoss(OpRegistry& r);
void registerAccuracy(OpRegistry& r);
void registerTopKAccuracy(OpRegistry& r);
void registerConv2d(OpRegistry& r);
void registerConvTranspose2d(OpRegistry& r);
void registerPool2d(OpRegistry& r);
void registerGlobalAvgPool2d(OpRegistry& r);
void registerBatchNorm(OpRegistry& r);
void registerLayerNorm(OpRegistry& r);
void registerUpsample(OpRegistry& r);
void registerSgdUpdate(OpRegistry& r);
void registerAdamUpdate(OpRegistry& r);
void registerReorder(OpRegistry& r);
void registerSumSquares(OpRegistry& r);
// Sequences and attention.
void registerTranspose(OpRegistry& r);
void registerBatchMatMul(OpRegistry& r);  // with SumTo, its gradient's reduction
void registerEmbedding(OpRegistry& r);
void registerPositionEmbedding(OpRegistry& r);
void registerRotaryEmbedding(OpRegistry& r);
void registerRMSNorm(OpRegistry& r);
void registerAttention(OpRegistry& r);
void registerKvCache(OpRegistry& r);  // generation: CachedAttention, positions at a step

}  // namespace netloom
