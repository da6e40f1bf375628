// What a trained or planned model says without training: --explain's plans and fit,
// and predictions from saved weights.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/compiler/pipeline.h"
#include "engine/compiler/sbp_plan.h"
#include "engine/graph/blocks.h"
#include "engine/io/safetensors.h"
#include "engine/runtime/feeder.h"
#include "engine/train/checkpoint.h"
#include "engine/train/heads.h"
#include "engine/train/run_setup.h"
#include "kernels/core/checked.h"

namespace netloom {

namespace {

// The largest batch whose training and evaluation plans, with the parameters and
// optimizer state, fit in `available` bytes of the device (0 when not even one
// sample does), found by planning memory at growing batch sizes without allocating.
Result<int64_t> largestBatchThatFits(const Setup& s, int64_t available) {
  // A batch is never larger than the training set, so the search ends there.
  const int64_t kCeiling = std::max<int64_t>(1, s.data.train.size());
  auto fits = [&](int64_t batch) -> Result<bool> {
    ParamStore scratch(*s.device);
    int64_t need = 0;
    for (CompileOptions o : {s.trainOpts, s.evalOpts}) {
      o.batch = batch;
      o.planOnly = true;
      auto p = compile(s.project.model(), o, scratch);
      // Past some batch a kernel may decline (a library's size limit): that batch does
      // not fit either. At batch 1 the error is the model's, and said.
      if (!p && batch > 1) return false;
      if (!p) return p.error();
      need = saturatingAdd(need, (*p)->arenaBytes);
      if (o.training) need = saturatingAdd(need, (*p)->persistentBytes);
    }
    return need <= available;
  };
  int64_t lo = 0, hi = 1;  // lo fits (or is 0), hi is being tried
  while (lo < kCeiling) {
    hi = std::min(hi, kCeiling);
    auto f = fits(hi);
    if (!f) return f.error();
    if (!*f) break;
    lo = hi;
    hi *= 2;
  }
  if (lo == kCeiling) return lo;
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    auto f = fits(mid);
    if (!f) return f.error();
    (*f ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

Result<std::string> explainTraining(const proto::Project& project, const TrainOptions& opts) {
  auto setup = prepare(project, opts);
  if (!setup) return setup.error();
  ParamStore store(*setup->device);
  ProgramCache train(setup->project, setup->trainOpts, store),
      eval(setup->project, setup->evalOpts, store);
  int64_t batch = std::min(setup->batch, setup->data.train.size());
  auto tp = train.get(batch);
  if (!tp) return tp.error();
  auto ep = eval.get(batch);
  if (!ep) return ep.error();
  const MemoryBudget& budget = *setup->trainOpts.budget;
  int64_t planned = (*tp)->arenaBytes + (*ep)->arenaBytes + (*tp)->persistentBytes;
  int64_t available = budget.remaining() + planned;
  auto largest = largestBatchThatFits(*setup, available);
  if (!largest) return largest.error();
  std::string fit = "fit on " + setup->device->id().toString() + ": batch " +
                    std::to_string(batch) + " plans " + formatBytes(planned) +
                    " (parameters and optimizer state " + formatBytes((*tp)->persistentBytes) +
                    ", training arena " + formatBytes((*tp)->arenaBytes) + ", evaluation arena " +
                    formatBytes((*ep)->arenaBytes) + ") of " + formatBytes(available) +
                    " the run may use (" + budget.limitText() + "); the largest batch that fits: " +
                    (*largest > 0 ? std::to_string(*largest) : std::string("none")) +
                    (*largest > 0 && *largest >= setup->data.train.size()
                         ? " (all the training samples; a batch is never larger)"
                         : std::string()) +
                    "\n";
  std::string parallel;
  if (opts.comm && opts.comm->size() > 1) {  // how the forward graph spreads over the ranks
    auto flat = inlineBlocks(setup->project.model());
    if (!flat) return flat.error();
    // Under tensor parallelism the plan the run compiles (one tensor group at its
    // share of the batch, splitting weights), else how all ranks could spread it.
    const CompileOptions& c = setup->trainOpts;
    const int parts = c.tensorComm ? c.tensorComm->size() : opts.comm->size();
    auto g = buildGraph(*flat, c.stageComm ? batch : batch * parts);
    if (!g) return g.error();
    std::vector<SbpHint> hints = c.sbpHints;
    if (!c.tensorComm) {  // the project's hints, then --sbp's (a node given twice takes the later)
      for (const proto::SbpHint& h : setup->project.train().distributed().sbp())
        hints.push_back({h.node(), h.signature()});
      hints.insert(hints.end(), opts.sbpHints.begin(), opts.sbpHints.end());
    }
    auto plan = c.stageComm
                    ? Result<SbpPlan>(SbpPlan{})
                    : planSbp(*g, parts,
                              SbpPlanOptions{hints,
                                             c.tensorComm != nullptr,
                                             false,
                                             {},
                                             c.tensorComm ? c.tensorComm->link() : LinkCost{}});
    if (!plan) return plan.error();
    if (!c.stageComm) parallel = plan->explain(*g);
    if (c.stageComm) {  // a pipeline: its stages instead of a plan of splits
      auto stages = pipelineStages(*g, c.stageComm->size(), c.stagePlacements);
      if (!stages) return stages.error();
      parallel = explainStages(*g, *stages, c.microBatches);
    }
  } else if (!opts.sbpHints.empty()) {
    return makeError("--sbp spreads nodes over ranks: give --ranks N too");
  }
  return (*tp)->explain() + "\n" + (*ep)->explain() + "\n" + fit + parallel;
}

Result<Predictions> predict(const proto::Project& project, const TrainOptions& opts,
                            const std::string& weightsPath, const Dataset* samples) {
  auto setup = prepare(project, opts);
  if (!setup) return setup.error();
  Setup& s = *setup;
  Predictions out;
  auto output = predictionOutput(s.project);
  if (!output) return output.error();
  out.output = *output;
  out.samples = samples ? *samples : s.data.test;
  if (out.samples.size() == 0) return makeError("there are no samples to predict");
  CompileOptions eo = s.evalOpts;
  eo.keep.push_back(out.output);
  ParamStore store(*s.device);
  ProgramCache cache(s.project, eo, store);
  auto first = cache.get(std::min<int64_t>(s.batch, out.samples.size()));
  if (!first) return first.error();
  if (Status st = loadModelWeights(store, weightsPath); !st) return st.error();
  if (Status st = checkDataFits(**first, out.samples, "evaluated"); !st) return st.error();
  BatchLoader::Options lo;
  lo.batchSize = s.batch;
  lo.shuffle = false;
  BatchLoader loader(out.samples, s.data.norm, lo);
  Batch b;
  StepContext ctx;
  ctx.training = false;
  ctx.seed = s.seed;
  while (loader.next(b)) {
    auto prog = cache.get(b.size);
    if (!prog) return prog.error();
    feed(**prog, b);
    (*prog)->run(ctx);
    const Graph& g = (*prog)->graph;
    ValueId v = g.findValue(out.output);
    const TensorRef& logits = (*prog)->refs[v];
    if (logits.shape.size() != 2) return makeError("'" + out.output + "' is not batch × classes");
    out.classes = int32_t(logits.shape[1]);
    std::vector<float> values = (*prog)->read(v);
    for (int64_t i = 0; i < b.size; ++i) {
      const float* row = values.data() + i * out.classes;
      float top = *std::max_element(row, row + out.classes);
      double sum = 0;
      for (int32_t c = 0; c < out.classes; ++c) sum += std::exp(double(row[c] - top));
      for (int32_t c = 0; c < out.classes; ++c)
        out.probs.push_back(float(std::exp(double(row[c] - top)) / sum));
    }
  }
  if (!loader.status()) return loader.status().error();
  return out;
}

}  // namespace netloom
