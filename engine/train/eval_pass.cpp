#include "engine/train/eval_pass.h"

#include "engine/runtime/feeder.h"

namespace netloom {

Result<Totals> evaluate(ProgramCache& cache, const Dataset& data, const Normalizer& norm,
                        int64_t batch, uint64_t seed, Communicator* comm,
                        const std::vector<std::string>& metrics) {
  Totals t;
  BatchLoader::Options lo;
  lo.batchSize = batch;
  lo.shuffle = false;
  // Under tensor or pipeline parallelism the ranks of a group read the same samples,
  // each group its share, and one rank of the group counts them.
  Communicator* readers = cache.splitsModel() ? cache.dataComm() : comm;
  const bool counts = cache.counts();
  if (readers) {
    lo.rank = readers->rank();
    lo.ranks = readers->size();
    lo.dropShort = false;
  }
  BatchLoader loader(data, norm, lo);
  Batch b;
  StepContext ctx;
  ctx.training = false;
  ctx.seed = seed;
  while (loader.next(b)) {
    auto prog = cache.get(b.size);
    if (!prog) return prog.error();
    feed(**prog, b);
    (*prog)->run(ctx);
    if (counts) t.add(**prog, b.size);
  }
  if (Status st = loader.status(); !st) return st.error();
  if (comm && comm->size() > 1) {
    std::vector<double> sums{t.loss};
    for (const std::string& m : metrics) sums.push_back(t.metrics[m]);
    sums.push_back(double(t.samples));
    comm->allreduce(sums.data(), int64_t(sums.size()));
    t.loss = sums[0];
    for (size_t k = 0; k < metrics.size(); ++k) t.metrics[metrics[k]] = sums[1 + k];
    t.samples = int64_t(sums.back());
  }
  return t;
}

}  // namespace netloom
