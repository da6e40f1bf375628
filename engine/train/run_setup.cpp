// What a run resolves before it starts (run_setup.h): the project's settings checked
// against the options, the device opened, the data loaded and checked against the
// model's inputs.
#include "engine/train/run_setup.h"

#include <omp.h>

#include <cmath>
#include <filesystem>

#include "engine/parallel/communicator.h"
#include "engine/train/heads.h"
#include "engine/train/project_check.h"
#include "engine/util/memory_budget.h"
#include "kernels/core/checked.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom {

Status checkDataFits(const Program& prog, const Dataset& data, const std::string& split) {
  if (data.size() == 0) return {};
  for (const auto& [field, v] : prog.graph.inputsByField) {
    const Value& val = prog.graph.values[v];
    const Node& node = prog.graph.nodes[val.producer];
    Shape sample(val.desc.shape.begin() + 1, val.desc.shape.end());
    if (field != "x" && field != "label")
      return makeError("node '" + node.name + "' (Input): the dataset has no field '" + field +
                       "' (it provides 'x' and 'label')");
    if (field == "x" && numel(sample) != data.featuresPerSample())
      return makeError("node '" + node.name + "' (Input): shape " + shapeToString(sample) +
                       " does not match the dataset's samples (" + shapeToString(data.sampleShape) +
                       ")");
    if (field == "label" && data.isText() && sample != Shape{data.context})
      return makeError("node '" + node.name + "' (Input): a text's labels are the next token at " +
                       "each of its " + std::to_string(data.context) + " positions, shape " +
                       shapeToString({data.context}) + "; " + shapeToString(sample) + " was given");
    if (field == "label" && !data.isText() && !sample.empty() && numel(sample) != 1)
      return makeError("node '" + node.name + "' (Input): labels are one value per sample, shape " +
                       shapeToString(sample) + " was given");
  }
  // Class labels feed an index-taking loss or metric: each must be a class the
  // model has, or the loss reads past its logits (a model with no cross-entropy
  // takes the data's own classes).
  const TensorRef* label = prog.input("label");
  if (!label || label->dtype != DType::I32) return {};
  int32_t classes = data.classes;
  for (const Node& n : prog.graph.nodes)
    if (n.op->definesClasses) classes = int32_t(prog.graph.values[n.inputs[0]].desc.shape.back());
  if (data.isText()) {
    if (int64_t(data.vocab.size()) > int64_t(classes))
      return makeError("the text of '" + data.textFile + "' has " +
                       std::to_string(data.vocab.size()) +
                       " tokens in its vocabulary, but the "
                       "model scores " +
                       std::to_string(classes) + " classes: give the layer before the loss " +
                       std::to_string(data.vocab.size()) + " outputs");
    return {};
  }
  return checkClassLabels(data, classes, split);
}

namespace {

// The run's numbers over the project's: batch, epochs, threads, seed, device, finite
// checks and precision.
Status resolveSettings(Setup& s, const TrainOptions& opts) {
  const proto::TrainDef& t = s.project.train();
  s.batch = opts.batchSize > 0 ? opts.batchSize : (t.batch_size() > 0 ? t.batch_size() : 32);
  s.epochs = opts.epochs > 0 ? opts.epochs : (t.epochs() > 0 ? t.epochs() : 1);
  s.threads =
      opts.threads > 0 ? opts.threads : (t.threads() > 0 ? t.threads() : omp_get_num_procs());
  s.seed = opts.seed ? *opts.seed : t.seed();
  DeviceId id;
  if (!t.device().empty())
    if (std::string bad = parseDeviceId(t.device(), id); !bad.empty())
      return makeError("train.device: " + bad);
  std::string unavailable;
  s.device = opts.device ? opts.device : openDevice(id, unavailable);
  if (!s.device) return makeRefusal("train.device: " + unavailable);
  if (t.check_finite_every() < -1)
    return makeError(
        "train.check_finite_every must be -1 (never), 0 (every step) or a step "
        "count, got " +
        std::to_string(t.check_finite_every()));
  s.checkEvery = t.check_finite_every() == -1 ? 0 : std::max(1, t.check_finite_every());
  auto precision = parsePrecision(!opts.precision.empty() ? opts.precision : t.precision());
  if (!precision)
    return makeError(opts.precision.empty() ? precision.error().message
                                            : "--precision: '" + opts.precision +
                                                  "' is not a precision (fp32, bf16, fp16)");
  s.trainOpts.precision = *precision;  // evaluation computes as training does
  cpu::configureThreads(s.threads);
  return {};
}

// The data, loaded within this process's memory budget.
Status loadSetupData(Setup& s, const TrainOptions& opts) {
  s.budget = MemoryBudget::forThisProcess(opts.memoryLimit, "--memory-limit");
  // Parameters, optimizer state and arenas live on the device: a GPU's memory is
  // planned apart from the host's, which keeps the data and the batches.
  s.trainOpts.budget = s.device->hostAddressable() ? s.budget : MemoryBudget::forDevice(*s.device);
  resolveImageShape(*s.project.mutable_data(), s.project.model());
  auto data = loadData(s.project.data(), opts.projectDir, s.seed, s.budget);
  if (!data) return data.error();
  s.data = std::move(*data);
  s.warnings.insert(s.warnings.end(), s.data.warnings.begin(), s.data.warnings.end());
  // Classes named by the images' folders name the evaluation views' rows too.
  if (s.project.data().class_names().empty())
    for (const std::string& name : s.data.classNames)
      s.project.mutable_data()->add_class_names(name);
  if (s.data.train.size() == 0) return makeError("the training set is empty");
  return {};
}

// A metric the run watches (keep_best, early stopping), checked against the splits
// it reads; none where `spec` is empty.
Result<std::optional<MetricWatch>> watch(const Setup& s, const std::string& spec,
                                         proto::MetricMode mode, double delta,
                                         const std::string& field) {
  if (spec.empty()) return std::optional<MetricWatch>{};
  auto w = MetricWatch::parse(spec, mode, delta, field);
  if (!w) return w.error();
  if (w->needsValidation() && s.data.val.size() == 0)
    return makeError(field + " '" + spec +
                     "' needs a validation split: set data.validation_fraction");
  if (w->needsTest() && s.data.test.size() == 0)
    return makeError(field + " '" + spec + "' needs a test set");
  return std::optional<MetricWatch>(*w);
}

Status resolveWatches(Setup& s, const TrainOptions& opts) {
  const proto::TrainDef& t = s.project.train();
  const auto& ck = t.checkpoint();
  auto best = watch(s, ck.keep_best(), ck.mode(), 0.0, "train.checkpoint.keep_best");
  if (!best) return best.error();
  s.best = *best;
  const auto& es = t.early_stopping();
  auto early = watch(s, es.metric(), es.mode(), es.min_delta(), "train.early_stopping.metric");
  if (!early) return early.error();
  s.early = *early;
  s.checkpointDir = !opts.checkpointDir.empty()
                        ? opts.checkpointDir
                        : (std::filesystem::path(opts.projectDir) / "checkpoints").string();
  return {};
}

// Tensor parallelism: the groups the launcher made, and the hints, the project's
// first (a node given twice takes the later).
Status resolveTensorParallel(CompileOptions& c, const proto::Distributed& dist,
                             const TrainOptions& opts) {
  const int tp = opts.tensorParallel > 0 ? opts.tensorParallel : dist.tensor_parallel();
  const int ranks = opts.comm ? opts.comm->size() : 1;
  if (tp <= 1 || ranks <= 1) return {};
  const std::string field =
      opts.tensorParallel > 0 ? "--tensor-parallel" : "train.distributed.tensor_parallel";
  if (ranks % tp != 0)
    return makeError(field + " " + std::to_string(tp) + " does not divide the " +
                     std::to_string(ranks) + " ranks");
  if (!opts.tensorComm || opts.tensorComm->size() != tp)
    return makeError(field + " " + std::to_string(tp) + ": the ranks were started without " +
                     "tensor groups of that size");
  c.tensorComm = opts.tensorComm;
  c.dataComm = opts.dataComm;
  c.overlap = opts.overlap;
  // The plan's cost model: every rank of the group measures at this point, once.
  if (!c.tensorComm->link().measured) measureLink(*c.tensorComm);
  for (const proto::SbpHint& h : dist.sbp()) c.sbpHints.push_back({h.node(), h.signature()});
  c.sbpHints.insert(c.sbpHints.end(), opts.sbpHints.begin(), opts.sbpHints.end());
  return {};
}

// Pipeline parallelism: the groups the launcher made and the micro-batches.
Status resolvePipeline(CompileOptions& c, const proto::Distributed& dist,
                       const TrainOptions& opts) {
  const int pp = opts.pipelineStages > 0 ? opts.pipelineStages : dist.pipeline_stages();
  const int ranks = opts.comm ? opts.comm->size() : 1;
  if (pp <= 1 || ranks <= 1) return {};
  const std::string field =
      opts.pipelineStages > 0 ? "--pipeline-stages" : "train.distributed.pipeline_stages";
  if (c.tensorComm)
    return makeError(field + " with tensor parallelism: choose one of them, for now");
  if (ranks % pp != 0)
    return makeError(field + " " + std::to_string(pp) + " does not divide the " +
                     std::to_string(ranks) + " ranks");
  if (!opts.stageComm || opts.stageComm->size() != pp)
    return makeError(field + " " + std::to_string(pp) + ": the ranks were started without " +
                     "pipeline groups of that size");
  c.stageComm = opts.stageComm;
  c.dataComm = opts.dataComm;
  for (const proto::StageHint& h : dist.stages()) c.stagePlacements[h.node()] = h.stage();
  c.microBatches = opts.microBatches > 0      ? opts.microBatches
                   : dist.micro_batches() > 0 ? dist.micro_batches()
                                              : 2 * pp;
  return {};
}

// ZeRO's stage, where the run has ranks to shard over.
Status resolveZero(CompileOptions& c, const proto::Distributed& dist, const TrainOptions& opts,
                   Precision precision) {
  const int zero = opts.zero >= 0 ? opts.zero : dist.zero();
  const std::string field =
      (opts.zero >= 0 ? "--zero " : "train.distributed.zero ") + std::to_string(zero);
  if (zero < 0 || zero > 2) return makeError(field + ": ZeRO's stages are 0, 1 and 2");
  if (zero == 0 || !c.comm) return {};
  if (c.tensorComm || c.stageComm)
    return makeError(field +
                     " with tensor or pipeline parallelism: ZeRO shards data-parallel "
                     "ranks only, for now; set one of them");
  if (precision == Precision::F16)
    return makeError(field + " with fp16: its loss scaling reads whole gradients; use bf16");
  if (zero == 2 && c.gradientNorms)
    return makeError(field +
                     " keeps no rank's summed gradients whole to take norms of; "
                     "leave out --gradient-norms or use ZeRO-1");
  c.zero = zero;
  return {};
}

// How the training and evaluation programs are compiled.
Status resolveCompileOptions(Setup& s, const TrainOptions& opts) {
  const proto::TrainDef& t = s.project.train();
  CompileOptions& c = s.trainOpts;
  c.blockedLayouts = !opts.plainLayouts;
  c.fuse = opts.fuse;
  c.disabledPasses = opts.disabledPasses;
  c.graphs = opts.graphs;
  c.training = true;
  c.optimizer = t.optimizer();
  c.loss = t.loss();
  c.metrics = {t.metrics().begin(), t.metrics().end()};
  c.seed = s.seed;
  const proto::Distributed& dist = t.distributed();
  if (!(dist.first_bucket_mb() >= 0) || !(dist.bucket_mb() >= 0) ||
      !std::isfinite(dist.first_bucket_mb() + dist.bucket_mb()))
    return makeError("train.distributed.first_bucket_mb and bucket_mb must be sizes in MiB");
  if (dist.first_bucket_mb() > 0) c.firstBucketBytes = int64_t(dist.first_bucket_mb() * 1048576);
  if (dist.bucket_mb() > 0) c.bucketBytes = int64_t(dist.bucket_mb() * 1048576);
  c.batchField =
      (opts.batchSize > 0 ? "--batch-size " : "train.batch_size ") + std::to_string(s.batch);
  if (Status st = resolveTensorParallel(c, dist, opts); !st) return st;
  if (Status st = resolvePipeline(c, dist, opts); !st) return st;
  s.evalOpts = c;
  s.evalOpts.wholeBatchPerRank = true;  // each tensor group's ranks read the same samples
  c.comm = opts.comm && opts.comm->size() > 1 ? opts.comm : nullptr;
  c.gradientNorms = opts.reportNorms;
  if (Status st = resolveZero(c, dist, opts, c.precision); !st) return st;
  s.evalOpts.training = false;
  s.evalOpts.evaluation = true;  // run with StepContext::training false only
  return {};
}

}  // namespace

Result<Setup> prepare(const proto::Project& project, const TrainOptions& opts) {
  Setup s;
  // A batch size given on the command line stands in for the project's, checked or not.
  proto::Project checked = project;
  if (opts.batchSize > 0) checked.mutable_train()->set_batch_size(opts.batchSize);
  if (Status st = checkProject(checked, &s.warnings); !st) return st.error();
  if (auto loss = lossNode(project); !loss) return loss.error();
  if (project.train().loss().empty())
    return makeError("train.loss is not set: name the node whose value training minimises ('" +
                     *lossNode(project) + "' is the model's only loss node)");
  s.project = project;
  if (opts.trainLimit >= 0) s.project.mutable_data()->set_train_limit(opts.trainLimit);
  if (opts.testLimit >= 0) s.project.mutable_data()->set_test_limit(opts.testLimit);
  for (auto step : {resolveSettings, loadSetupData, resolveWatches, resolveCompileOptions})
    if (Status st = step(s, opts); !st) return st.error();
  return s;
}

namespace {

// The batch sizes an epoch over `n` samples uses: a full batch, and a short last one.
std::vector<int64_t> epochBatches(int64_t n, int64_t batch) {
  if (n <= 0) return {};
  if (n <= batch) return {n};
  if (n % batch == 0) return {batch};
  return {batch, n % batch};
}

}  // namespace

Status planRun(const Setup& s, ProgramCache& train, ProgramCache& eval) {
  for (int64_t b : epochBatches(s.data.train.size(), s.batch))
    if (auto p = train.get(b); !p) return p.error();
  for (const Dataset* d : {&s.data.val, &s.data.test})
    for (int64_t b : epochBatches(d->size(), s.batch))
      if (auto p = eval.get(b); !p) return p.error();
  // A loader holds up to `prefetch` ready batches, the one it is assembling and the one
  // the step reads: features, an int32 label and a float label per sample. The
  // training loader stays alive while an evaluation loader (prefetch 2) runs.
  auto loaderBytes = [&](const Dataset& d, int64_t prefetch) {
    int64_t batches = std::min(BatchLoader::batchesHeld(d, int(prefetch)) - 2,
                               (d.size() + s.batch - 1) / s.batch) +
                      2;
    int64_t perSample = saturatingMul(d.featuresPerSample() + 2, 4);
    return saturatingMul(saturatingMul(batches, std::min(d.size(), s.batch)), perSample);
  };
  const int prefetch = s.project.data().prefetch_batches();
  int64_t bytes = loaderBytes(s.data.train, prefetch > 0 ? prefetch : 2);
  bytes = saturatingAdd(bytes, std::max(loaderBytes(s.data.val, 2), loaderBytes(s.data.test, 2)));
  return s.budget->reserve("data.prefetch_batches " + std::to_string(prefetch > 0 ? prefetch : 2) +
                               ": the batches prepared ahead",
                           bytes);
}

}  // namespace netloom
