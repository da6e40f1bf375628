// "gradient buckets": each rank's loss gradient is weighted by its share of the
// global batch, and the gradients are summed across the ranks in buckets before
// anything reads them (insertGradientBuckets, engine/compiler/gradient_buckets.cpp).
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"

namespace netloom {
namespace {

class GradientBuckets : public Pass {
 public:
  const char* name() const override { return "gradient buckets"; }
  bool applies(const PassContext& c) const override {
    return c.updates() && c.opts.comm && c.opts.comm->size() > 1;
  }
  Result<std::string> run(PassContext& c) override {
    if (!c.scaled() && c.seed >= 0) {  // fp16's seed is the loss scale's (the optimizer pass)
      Node& seed = c.g.nodes[size_t(c.seed)];
      seed.op = &internal_ops::lossSeed();
      seed.attrs = Attrs{};
    }
    for (const GradientBucket& b :
         insertGradientBuckets(c.g, c.grads, c.opts.firstBucketBytes, c.opts.bucketBytes))
      c.prog.buckets.push_back({b.name, b.params.size(), b.bytes});
    return counted(c.prog.buckets.size(), "bucket") + " summed across " +
           std::to_string(c.opts.comm->size()) + " ranks";
  }
};

}  // namespace

std::unique_ptr<Pass> gradientBucketsPass() {
  return std::make_unique<GradientBuckets>();
}

}  // namespace netloom
