// The CPU's arithmetic inside the parallel kernels (collectives.h's ParallelMath):
// loops over host memory, with the update rules every backend shares.
#include "kernels/core/collectives.h"
#include "kernels/core/functors.h"

namespace netloom {

namespace {

void stepShardOnHost(void*, const ShardStep& s) {
  const KernelIO& io = *s.io;
  if (io.guard && *io.guard == 0.f) return;  // a step that was not finite changes nothing
  float unscale = 1.f;
  if (s.lossScale) {
    if (s.lossScale[fn::LossScale::kSkipNow] != 0.f) return;
    unscale = 1.f / s.lossScale[fn::LossScale::kUsed];
  }
  for (int64_t i = 0; i < s.n; ++i) s.g[i] *= unscale;
  if (s.adam) {
    fn::AdamStep step = fn::AdamStep::make(s.beta1, s.beta2, s.eps, s.weightDecay, s.decoupled,
                                           io.ctx->lr, io.ctx->step);
    for (int64_t i = 0; i < s.n; ++i) step(s.p[i], s.g[i], s.m[i], s.v[i]);
    return;
  }
  fn::SgdStep step{float(io.ctx->lr), s.momentum, s.weightDecay, s.nesterov};
  for (int64_t i = 0; i < s.n; ++i) s.m ? step(s.p[i], s.g[i], s.m[i]) : step(s.p[i], s.g[i]);
}

}  // namespace

ParallelMath hostParallelMath() {
  ParallelMath m;
  m.meanOfScalars = [](void*, const TensorRef* in, size_t count, float* out, double*) {
    double sum = 0;
    for (size_t k = 0; k < count; ++k) sum += *in[k].f32();
    *out = float(sum / double(count));
  };
  m.scaleScalar = [](void*, const float* in, float* out, float factor) { *out = *in * factor; };
  m.sumBlocks = [](void*, const float* blocks, int count, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = fn::sumOfBlocks(blocks, count, n, i);
  };
  m.stepShard = stepShardOnHost;
  return m;
}

}  // namespace netloom
