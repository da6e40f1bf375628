// The ops the compiler inserts, as typed handles: a pass writes
// `n.op = &internal_ops::reorder()`, never a name. Each op file registers its op under
// the name given here, and each handle looks its op up once.
#pragma once

#include "engine/graph/op.h"

namespace netloom::internal_ops {

inline constexpr const char* kConstant = "Constant";
inline constexpr const char* kRoundHalf = "RoundHalf";
inline constexpr const char* kCastBf16 = "CastBf16";
inline constexpr const char* kLossSeed = "LossSeed";
inline constexpr const char* kLossScaleSeed = "LossScaleSeed";
inline constexpr const char* kLossScaleCheck = "LossScaleCheck";
inline constexpr const char* kSumSquares = "SumSquares";
inline constexpr const char* kHistogram = "Histogram";
inline constexpr const char* kBucketStart = "BucketStart";
inline constexpr const char* kBucketWait = "BucketWait";
inline constexpr const char* kReorder = "Reorder";
inline constexpr const char* kPointwise = "Pointwise";
inline constexpr const char* kSgdUpdate = "SgdUpdate";
inline constexpr const char* kAdamUpdate = "AdamUpdate";
inline constexpr const char* kAdd = "Add";
inline constexpr const char* kBoxing = "Boxing";
inline constexpr const char* kZeroScatter = "ZeroScatter";
inline constexpr const char* kZeroUpdate = "ZeroUpdate";
inline constexpr const char* kPipeSend = "PipeSend";
inline constexpr const char* kPipeRecv = "PipeRecv";
inline constexpr const char* kMicroBatch = "MicroBatch";
inline constexpr const char* kMicroMean = "MicroMean";
inline constexpr const char* kMicroMeanGrad = "MicroMeanGrad";
inline constexpr const char* kPipeTie = "PipeTie";

const OpDef& constant();        // a filled tensor (autodiff's loss-gradient seed)
const OpDef& roundHalf();       // autocast's rounding to bf16 or fp16
const OpDef& castBf16();        // the same rounding to bf16, into bf16 storage
const OpDef& lossSeed();        // the loss gradient weighted by the rank's share of the batch
const OpDef& lossScaleSeed();   // fp16's loss gradient: the loss scale
const OpDef& lossScaleCheck();  // fp16's check of the scaled gradients
const OpDef& sumSquares();      // Σ x² of a gradient
const OpDef& histogram();       // a gradient's histogram
const OpDef& bucketStart();     // starts summing a bucket of gradients across the ranks
const OpDef& bucketWait();      // waits for a bucket's sum
const OpDef& reorder();         // a layout conversion
const OpDef& pointwise();       // a chain of element-wise ops in one loop
const OpDef& sgdUpdate();       // an SGD update
const OpDef& adamUpdate();      // an Adam or AdamW update
const OpDef& add();             // a sum of two tensors (gradients reaching a value twice)
const OpDef& boxing();          // a value moved between SBP layouts (tensor parallelism)
const OpDef& zeroScatter();     // ZeRO-2: a bucket of gradients summed, one shard kept
const OpDef& zeroUpdate();      // ZeRO: a shard of a bucket updated, the parameters gathered
const OpDef& pipeSend();        // a value sent to a later pipeline stage
const OpDef& pipeRecv();        // a value received from another pipeline stage
const OpDef& microBatch();      // one micro-batch of a batch
const OpDef& microMean();       // the mean of per-micro-batch scalars
const OpDef& pipeTie();         // a tied weight's gradient summed over its stages

}  // namespace netloom::internal_ops
