#include "engine/ops/internal_ops.h"

#include <cstdio>
#include <cstdlib>

namespace netloom::internal_ops {
namespace {

// A registry without the op is a build that left its op file out: nothing can compile.
const OpDef& lookup(const char* name) {
  const OpDef* d = OpRegistry::instance().find(name);
  if (!d) {
    std::fprintf(stderr, "netloom: internal op %s is not registered\n", name);
    std::abort();
  }
  return *d;
}

}  // namespace

const OpDef& constant() {
  static const OpDef& d = lookup(kConstant);
  return d;
}
const OpDef& roundHalf() {
  static const OpDef& d = lookup(kRoundHalf);
  return d;
}
const OpDef& castBf16() {
  static const OpDef& d = lookup(kCastBf16);
  return d;
}
const OpDef& lossSeed() {
  static const OpDef& d = lookup(kLossSeed);
  return d;
}
const OpDef& lossScaleSeed() {
  static const OpDef& d = lookup(kLossScaleSeed);
  return d;
}
const OpDef& lossScaleCheck() {
  static const OpDef& d = lookup(kLossScaleCheck);
  return d;
}
const OpDef& sumSquares() {
  static const OpDef& d = lookup(kSumSquares);
  return d;
}
const OpDef& histogram() {
  static const OpDef& d = lookup(kHistogram);
  return d;
}
const OpDef& bucketStart() {
  static const OpDef& d = lookup(kBucketStart);
  return d;
}
const OpDef& bucketWait() {
  static const OpDef& d = lookup(kBucketWait);
  return d;
}
const OpDef& reorder() {
  static const OpDef& d = lookup(kReorder);
  return d;
}
const OpDef& pointwise() {
  static const OpDef& d = lookup(kPointwise);
  return d;
}
const OpDef& sgdUpdate() {
  static const OpDef& d = lookup(kSgdUpdate);
  return d;
}
const OpDef& adamUpdate() {
  static const OpDef& d = lookup(kAdamUpdate);
  return d;
}
const OpDef& add() {
  static const OpDef& d = lookup(kAdd);
  return d;
}

const OpDef& boxing() {
  static const OpDef& d = lookup(kBoxing);
  return d;
}
const OpDef& zeroScatter() {
  static const OpDef& d = lookup(kZeroScatter);
  return d;
}
const OpDef& zeroUpdate() {
  static const OpDef& d = lookup(kZeroUpdate);
  return d;
}
const OpDef& pipeSend() {
  static const OpDef& d = lookup(kPipeSend);
  return d;
}
const OpDef& pipeRecv() {
  static const OpDef& d = lookup(kPipeRecv);
  return d;
}
const OpDef& microBatch() {
  static const OpDef& d = lookup(kMicroBatch);
  return d;
}
const OpDef& microMean() {
  static const OpDef& d = lookup(kMicroMean);
  return d;
}
const OpDef& pipeTie() {
  static const OpDef& d = lookup(kPipeTie);
  return d;
}

}  // namespace netloom::internal_ops
