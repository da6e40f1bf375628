#include "engine/train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "engine/compiler/compile.h"
#include "engine/data/dataset.h"
#include "engine/io/safetensors.h"
#include "engine/ops/optimizer_settings.h"
#include "engine/runtime/feeder.h"
#include "engine/train/checkpoint_policy.h"
#include "engine/train/eval_pass.h"
#include "engine/train/metric_watch.h"
#include "engine/train/run_reporter.h"
#include "engine/train/run_setup.h"
#include "engine/train/run_state.h"
#include "engine/train/schedule.h"
#include "engine/train/step_pipeline.h"
#include "kernels/core/functors.h"
#include "kernels/cpu/peak.h"

namespace netloom {

namespace {

// One training run: its programs and weights made ready, then the epoch loop over
// the step pipeline, with the checkpoint policy consulted after each step and each
// epoch, and the run reporter saying all of it.
class Fit {
 public:
  Fit(const TrainOptions& opts, const EventSink& sink) : m_run(opts), m_reporter(sink) {}
  Result<TrainSummary> run(const proto::Project& project);

 private:
  Error fail(const std::string& message) { return failWith(makeError(message)); }
  Error failWith(Error error) { return m_reporter.fail(std::move(error), m_run.pos.step); }

  // Programs planned, weights loaded or resumed, ranks agreed on them, RunStarted
  // sent.
  Status start(const proto::Project& project);
  // Compiles the first program and plans the run's memory.
  Status plan();
  // The initial weights (--init-weights or the project's), or the resumed checkpoint.
  Status loadWeights();
  // Steps per epoch and in the run.
  Status countSteps();
  // One epoch, or what is left of it: `more` false when the run ends with it.
  Status epoch(bool& more);
  // The epoch's report and evaluation, its best value and early stopping, and its
  // checkpoint: `more` false when early stopping ends the run.
  Status endEpoch(bool complete, std::chrono::steady_clock::time_point started, bool& more);
  // Evaluation of the validation and test splits into the epoch's event.
  Status evaluateEpoch(proto::Epoch& ep);
  // Whether the epoch just ended is the best, and whether early stopping ends the run.
  bool trackBest(const proto::Epoch& ep, bool& more);
  Result<TrainSummary> finish();
  std::string profile() const;
  BatchLoader::Options epochLoader() const;
  std::vector<std::string> metricNames() const {
    std::vector<std::string> names;
    for (const auto& [name, v] : m_main->metrics)
      if (v != m_main->loss) names.push_back(name);
    return names;
  }

  RunState m_run;
  RunReporter m_reporter;
  std::unique_ptr<ParamStore> m_store;
  std::unique_ptr<ProgramCache> m_train, m_eval;
  Program* m_main = nullptr;
  std::unique_ptr<CheckpointPolicy> m_checkpoints;
  std::unique_ptr<StepPipeline> m_steps;
  std::unique_ptr<BatchFeeder> m_feeder;
  double m_baseLr = 1e-3;
};

Status Fit::plan() {
  Setup& s = m_run.s;
  m_store = std::make_unique<ParamStore>(*s.device);
  m_train = std::make_unique<ProgramCache>(s.project, s.trainOpts, *m_store);
  m_eval = std::make_unique<ProgramCache>(s.project, s.evalOpts, *m_store);
  // An epoch's batches are never larger than the training set.
  auto first = m_train->get(std::min(s.batch, s.data.train.size()));
  if (!first) return failWith(first.error());
  m_main = *first;
  if (Status st = checkDataFits(*m_main, s.data.train, "training"); !st) return fail(st.message());
  if (Status st = checkDataFits(*m_main, s.data.val, "validation"); !st) return fail(st.message());
  if (Status st = checkDataFits(*m_main, s.data.test, "test"); !st) return fail(st.message());
  if (Status st = planRun(s, *m_train, *m_eval); !st) return failWith(st.error());
  return {};
}

Status Fit::loadWeights() {
  Setup& s = m_run.s;
  const TrainOptions& opts = m_run.opts;
  // --init-weights wins over the project's own initial weights (an imported model's).
  std::string init = opts.initWeights;
  if (init.empty() && !s.project.train().init_weights().empty())
    init = (std::filesystem::path(opts.projectDir) / s.project.train().init_weights()).string();
  if (!init.empty()) {
    auto tensors = readSafetensors(init);
    if (!tensors) return fail(tensors.error().message);
    if (Status st = m_store->importParams(*tensors, init, s.trainOpts.stageComm != nullptr); !st)
      return fail(st.message());
  }
  if (!opts.resume.empty()) {
    auto ckpt = readCheckpoint(opts.resume);
    if (!ckpt) return fail(ckpt.error().message);
    if (Status st = restoreTensors(*m_store, *ckpt, s.trainOpts.stageComm != nullptr); !st)
      return fail(st.message());
    m_run.pos = ckpt->position;
    s.seed = ckpt->seed;  // the data order and random streams continue from the saved run
  }
  // Every rank starts from rank 0's weights and state; under tensor parallelism,
  // from those of the rank holding the same parts in the first group.
  Communicator* same =
      s.trainOpts.tensorComm || s.trainOpts.stageComm ? s.trainOpts.dataComm : m_run.comm;
  // A pipeline's tied weights start from the stage one rank would take them from.
  if (Communicator* stages = s.trainOpts.stageComm)
    for (const Program::Tie& t : m_main->ties) {
      ParamStore::Entry* e = m_store->find(t.name);
      std::vector<float> values = ParamStore::read(*e);
      const int64_t bytes = int64_t(values.size() * sizeof(float));
      const uint32_t tag = uint32_t(t.tag) + (uint32_t(1) << 23);  // apart from its gradients
      if (stages->rank() == t.source) {
        for (int st : t.stages)
          if (st != t.source) stages->send(values.data(), bytes, st, tag);
      } else {
        stages->recv(values.data(), bytes, t.source, tag);
        ParamStore::write(*e, values.data());
      }
    }
  if (same && same->size() > 1) {
    for (const auto& entry : m_store->entries()) {
      if (entry->flat) continue;  // ZeRO: each rank's own shard
      std::vector<float> values = ParamStore::read(*entry);
      same->broadcast(values.data(), int64_t(values.size() * sizeof(float)), 0);
      ParamStore::write(*entry, values.data());
    }
  }
  return {};
}

Status Fit::countSteps() {
  const Setup& s = m_run.s;
  const int ranks = m_run.shares();
  RunPosition& pos = m_run.pos;
  m_run.perEpoch = BatchLoader::steps(s.data.train.size(), s.batch, ranks);
  if (m_run.perEpoch == 0) return fail("the training set has fewer samples than ranks");
  // A position from another number of ranks or batch size counts its steps anew.
  pos.batchInEpoch = (pos.samples + s.batch * ranks - 1) / (s.batch * ranks);
  m_run.total = m_run.perEpoch * s.epochs;
  if (m_run.opts.maxSteps > 0) m_run.total = std::min(m_run.total, m_run.opts.maxSteps);
  return {};
}

Status Fit::start(const proto::Project& project) {
  auto setupOr = prepare(project, m_run.opts);
  if (!setupOr) return failWith(setupOr.error());
  m_run.s = std::move(*setupOr);
  m_run.comm = m_run.s.trainOpts.comm;
  if (Status st = plan(); !st) return st;
  if (Status st = loadWeights(); !st) return st;
  auto settings = optimizerSettings(m_run.s.project.train().optimizer());
  m_baseLr = settings ? settings->lr : 1e-3;
  if (Status st = countSteps(); !st) return st;

  TrainSummary& sum = m_run.sum;
  sum.compileMs = m_main->compileMs;
  sum.arenaBytes = m_main->arenaBytes;
  sum.naiveBytes = m_main->naiveBytes;
  sum.flopsPerSample =
      m_main->batch > 0 ? double(programFlops(*m_main)) / double(m_main->batch) : 0;
  sum.parameters = m_store->parameterCount();
  for (const auto& e : m_store->entries())
    (e->kind == ValueKind::State ? sum.stateBytes : sum.weightBytes) += e->numel() * 4;
  m_reporter.started(m_run, *m_main);

  m_checkpoints = std::make_unique<CheckpointPolicy>(m_run);
  m_run.ctx.seed = m_run.s.seed;
  m_run.ctx.training = true;
  m_run.ctx.step = m_run.pos.step;
  m_feeder = std::make_unique<BatchFeeder>(*m_run.s.device);
  m_steps = std::make_unique<StepPipeline>(m_run, m_reporter, *m_store, *m_main);
  return {};
}

BatchLoader::Options Fit::epochLoader() const {
  const Setup& s = m_run.s;
  BatchLoader::Options lo;
  lo.batchSize = s.batch;
  lo.shuffle = !s.project.data().no_shuffle();
  lo.seed = s.seed;
  lo.epoch = m_run.pos.epoch;
  lo.prefetch = s.project.data().prefetch_batches() > 0 ? s.project.data().prefetch_batches() : 2;
  lo.skipSamples = m_run.pos.samples;  // this epoch's samples done, on any number of ranks
  lo.augment = s.data.augment;
  // Where the step's kernels take every core, a prefetch thread would take one from
  // them at each batch, and their threads would wait for it.
  lo.onCaller = s.device->id().kind == DeviceKind::Cpu &&
                s.threads * std::max(1, m_run.opts.ranksHere) >= omp_get_num_procs();
  if (m_run.comm) {
    lo.rank = m_run.readers()->rank();
    lo.ranks = m_run.readers()->size();
    lo.evenShares = s.trainOpts.tensorComm != nullptr;
  }
  return lo;
}

Status Fit::epoch(bool& more) {
  using Moment = CheckpointPolicy::Moment;
  const Setup& s = m_run.s;
  const BatchLoader::Options lo = epochLoader();
  m_steps->beginEpoch(lo);
  BatchLoader loader(s.data.train, s.data.norm, lo);
  if (!loader.status()) return fail(loader.status().message());
  RunPosition& pos = m_run.pos;
  StepContext& ctx = m_run.ctx;
  m_run.totals = Totals{};
  m_run.totals.loss = pos.lossSum;
  m_run.totals.metrics = pos.metricSums;
  m_run.totals.samples = pos.samples;
  Batch b, next;
  auto epochStart = std::chrono::steady_clock::now();
  bool have = loader.next(b);
  if (have) m_feeder->stage(b);
  bool stopped = false;
  while (have) {
    auto prog = m_train->get(b.size);
    if (!prog) return fail(prog.error().message);
    ctx.step += 1;
    pos.step = ctx.step;
    ctx.lossWeight = m_run.comm ? double(b.size) / double(b.globalSize) : 1.0;
    ctx.lr =
        learningRate(s.project.train().schedule(), m_baseLr, ctx.step, m_run.perEpoch, m_run.total);
    m_feeder->bind(**prog, b);
    if (Status st = m_steps->issue(**prog, b); !st) return fail(st.message());
    pos.batchInEpoch += 1;
    bool ending = ctx.step >= m_run.total || m_run.stopRequested();
    bool saving = m_checkpoints->due(Moment::AfterStep);
    bool mustDrain = m_steps->mustDrain() || ending || saving;
    // On a device that runs apart from the host, the next batch crosses while this
    // step runs; the CPU reports the step first, as it has its results already,
    // unless its ranks sum the scalars of several steps at once.
    if ((!m_steps->apart() && !m_run.comm) || ending)
      if (std::string bad = m_steps->drain(); !bad.empty()) return fail(bad);
    // A stop asked for while the step was reported ends the run at that step.
    ending = ending || m_run.stopRequested();
    if (m_steps->apart()) {
      have = !ending && loader.next(next);
      if (have) m_feeder->stage(next);
    }
    if (mustDrain)
      if (std::string bad = m_steps->drain(); !bad.empty()) return fail(bad);
    if (saving) {
      if (Status st = m_checkpoints->write(*m_store, m_reporter); !st) return fail(st.message());
      if (m_steps->empty()) m_steps->restartWindow();  // the checkpoint's time is not a step's
    }
    if (ending) {
      // Stopped by request mid-epoch: a checkpoint where it stopped, so the run can
      // be resumed from there (one due at the epoch's end comes below).
      if (m_checkpoints->due(Moment::Stopped))
        if (Status st = m_checkpoints->write(*m_store, m_reporter); !st) return fail(st.message());
      m_run.sum.stoppedByRequest = ctx.step < m_run.total;
      stopped = true;
      break;
    }
    if (!m_steps->apart()) {
      // The next step's time starts with its batch, unless steps are reported in
      // batches (ranks), whose window then holds everything.
      if (!m_run.comm) m_steps->restartWindow();
      have = loader.next(next);
    }
    std::swap(b, next);
  }
  if (std::string bad = m_steps->drain(); !bad.empty()) return fail(bad);
  if (Status st = loader.status(); !st) return fail(st.message());
  if (loader.skipped() > 0)
    m_reporter.log(proto::Log::WARNING,
                   "epoch " + std::to_string(pos.epoch) + ": " + std::to_string(loader.skipped()) +
                       " unreadable image(s) replaced by the next readable one; the first " +
                       loader.firstSkipped());
  more = !stopped;
  // Complete unless the run stopped before its last batch.
  return endEpoch(!stopped || pos.batchInEpoch >= m_run.perEpoch, epochStart, more);
}
Status Fit::evaluateEpoch(proto::Epoch& ep) {
  const Setup& s = m_run.s;
  if (s.data.val.size() > 0) {
    auto val =
        evaluate(*m_eval, s.data.val, s.data.norm, s.batch, s.seed, m_run.comm, metricNames());
    if (!val) return fail(val.error().message);
    ep.set_has_val(true);
    ep.set_val_loss(val->meanLoss());
    val->fill(ep.mutable_val_metrics());
  }
  if (s.data.test.size() > 0) {
    auto test =
        evaluate(*m_eval, s.data.test, s.data.norm, s.batch, s.seed, m_run.comm, metricNames());
    if (!test) return fail(test.error().message);
    ep.set_has_test(true);
    ep.set_test_loss(test->meanLoss());
    test->fill(ep.mutable_test_metrics());
    m_run.sum.testLoss = test->meanLoss();
    for (const Node& n : m_main->graph.nodes)
      if (n.op->accuracy && ep.test_metrics().count(n.name)) {
        m_run.sum.testAccuracy = ep.test_metrics().at(n.name);
        break;
      }
  }
  return {};
}

bool Fit::trackBest(const proto::Epoch& ep, bool& more) {
  const Setup& s = m_run.s;
  RunPosition& pos = m_run.pos;
  double value = 0;
  bool isBest =
      s.best && s.best->valueIn(ep, value) && (!pos.hasBest || s.best->improves(value, pos.best));
  const MetricWatch* tracked = s.early ? &*s.early : (s.best ? &*s.best : nullptr);
  if (!tracked || !tracked->valueIn(ep, value)) return isBest;
  if (!pos.hasBest || tracked->improves(value, pos.best)) {
    pos.best = value;
    pos.hasBest = true;
    pos.bestEpoch = pos.epoch;
    pos.epochsWithoutImprovement = 0;
  } else {
    pos.epochsWithoutImprovement += 1;
  }
  const auto& early = s.project.train().early_stopping();
  int patience = early.patience() > 0 ? early.patience() : 5;
  if (s.early && pos.epochsWithoutImprovement >= patience) {
    more = false;
    m_run.sum.stoppedEarly = true;
    m_reporter.log(proto::Log::INFO, "early stopping after epoch " + std::to_string(pos.epoch) +
                                         ": " + s.early->spec() + " has not improved for " +
                                         std::to_string(patience) + " epochs (best " +
                                         std::to_string(pos.best) + " at epoch " +
                                         std::to_string(pos.bestEpoch) + ")");
  }
  return isBest;
}

Status Fit::endEpoch(bool complete, std::chrono::steady_clock::time_point started, bool& more) {
  RunPosition& pos = m_run.pos;
  proto::Epoch ep;
  ep.set_epoch(pos.epoch);
  ep.set_train_loss(m_run.totals.meanLoss());
  m_run.totals.fill(ep.mutable_train_metrics());
  m_run.sum.trainLoss = m_run.totals.meanLoss();
  if (Status st = evaluateEpoch(ep); !st) return st;
  m_reporter.epoch(ep, started);
  m_run.sum.epochs = pos.epoch;
  if (!complete) return {};  // stopped mid-epoch: the run ends

  // Best value and early stopping look at complete epochs only.
  const bool isBest = trackBest(ep, more);
  const bool save = m_checkpoints->due(CheckpointPolicy::Moment::EpochEnd, isBest);
  // The position moves to the start of the next epoch, which a checkpoint describes.
  pos.epoch += 1;
  pos.batchInEpoch = 0;
  pos.lossSum = 0;
  pos.metricSums.clear();
  pos.samples = 0;
  if (save)
    if (Status st = m_checkpoints->write(*m_store, m_reporter, isBest); !st)
      return fail(st.message());
  return {};
}

std::string Fit::profile() const {
  std::string table;
  if (m_run.opts.profile) {
    // On the CPU each kernel is set against the matrix-product peak measured now, on
    // the run's threads.
    cpu::GemmPeak peak;
    if (m_main->device->id().kind == DeviceKind::Cpu) peak = cpu::measureGemmPeak();
    std::string probe = peak.probe + ", " + std::to_string(peak.threads) +
                        (peak.threads == 1 ? " thread" : " threads");
    table = profileTable(m_steps->takeProfiles(), peak.gflops, probe);
  }
  if (!m_run.comm || !m_run.opts.profile) return table;
  CommStats c = m_run.comm->stats();
  char line[320];
  double hidden = c.bucketSeconds > 0
                      ? 100.0 * std::max(0.0, c.bucketSeconds - c.waitedSeconds) / c.bucketSeconds
                      : 0.0;
  std::snprintf(line, sizeof line,
                "communication (%s): %lld bucket sums, %.1f MiB, %.3f s on the communication "
                "thread; the steps waited %.3f s for them: %.0f%% hidden behind the backward "
                "pass\n",
                m_run.comm->describe().c_str(), (long long)c.buckets, double(c.bytes) / 1048576.0,
                c.bucketSeconds, c.waitedSeconds, hidden);
  return table + line;
}

Result<TrainSummary> Fit::finish() {
  TrainSummary& sum = m_run.sum;
  const RunPosition& pos = m_run.pos;
  sum.steps = m_run.ctx.step;
  sum.samplesPerSec = pos.trainSeconds > 0 ? double(pos.trainSamples) / pos.trainSeconds : 0;
  sum.trainSeconds = pos.trainSeconds;
  sum.steadySamplesPerSec =
      m_run.steadySeconds > 0 ? double(m_run.steadySamples) / m_run.steadySeconds : 0;
  sum.device = m_run.s.device->id().toString();
  sum.wallSeconds = m_reporter.runSeconds();
  sum.precision = precisionName(m_main->precision);
  if (m_main->lossScale != kNoValue && sum.steps > 0) {
    std::vector<float> state = m_main->read(m_main->lossScale);
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", double(state[fn::LossScale::kScale]));
    sum.skippedSteps = int64_t(state[fn::LossScale::kSkipped]);
    sum.lossScale = state[fn::LossScale::kScale];
    m_reporter.log(proto::Log::INFO,
                   "fp16 loss scaling: " + std::to_string(sum.skippedSteps) + " of " +
                       std::to_string(sum.steps) +
                       " steps skipped (their scaled gradients overflowed); the loss scale is "
                       "now " +
                       scale);
  }
  sum.profile = profile();
  if (m_run.comm) {
    CommStats c = m_run.comm->stats();
    sum.ranks = m_run.comm->size();
    sum.commSeconds = c.bucketSeconds;
    sum.commWaitedSeconds = c.waitedSeconds;
  }
  const std::string& weights = m_run.opts.saveWeights;
  if (!weights.empty()) {
    std::unique_ptr<ParamStore> whole = m_run.gathered(*m_store);
    auto metadata = dataMetadata(m_run.s.data.train);
    metadata["format"] = "pt";
    metadata["producer"] = "netloom";
    if (m_run.writes())
      if (Status st =
              writeSafetensors(weights, (whole ? *whole : *m_store).exportParams(), metadata);
          !st)
        return fail(st.message());
  }
  m_reporter.finished(sum);
  return sum;
}

Result<TrainSummary> Fit::run(const proto::Project& project) {
  if (Status st = start(project); !st) return st.error();
  bool more = m_run.pos.step < m_run.total;
  while (more && m_run.pos.epoch <= m_run.s.epochs)
    if (Status st = epoch(more); !st) return st.error();
  return finish();
}

}  // namespace

// The memory budget plans every large allocation; whatever it did not foresee (a
// library's scratch memory) ends the run with a Failed event rather than the process.
Result<TrainSummary> runTraining(const proto::Project& project, const TrainOptions& opts,
                                 const EventSink& sink) {
  std::string message;
  try {
    return Fit(opts, sink).run(project);
  } catch (const std::bad_alloc&) {
    message = "the run ran out of memory";
  } catch (const CommError& e) {
    message = std::string("the run failed: ") + e.what();
    if (opts.leaveCollectiveFailures) {
      RunReporter(sink).log(proto::Log::ERROR, message);
      return Error{message, ErrorKind::Collective};
    }
  } catch (const std::exception& e) {
    message = std::string("the run failed: ") + e.what();
  }
  return RunReporter(sink).fail(makeError(message), 0);
}

}  // namespace netloom
