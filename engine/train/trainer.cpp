#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "engine/compiler/compile.h"
#include "engine/data/dataset.h"
#include "engine/io/safetensors.h"
#include "engine/ops/optimizer_settings.h"
#include "engine/runtime/feeder.h"
#include "engine/runtime/nonfinite.h"
#include "engine/runtime/profile.h"
#include "engine/train/checkpoint.h"
#include "engine/train/eval_pass.h"
#include "engine/train/metric_watch.h"
#include "engine/train/norms.h"
#include "engine/train/run_setup.h"
#include "engine/train/schedule.h"
#include "kernels/core/checked.h"
#include "kernels/core/functors.h"
#include "kernels/cpu/peak.h"

namespace netloom {

namespace {

// Steps between two reports of gradient and weight norms.
constexpr int64_t kNormEvery = 10;
// Steps issued between two reads of their losses on a device the host cannot
// address: each read waits for the device to finish.
constexpr int kReadEvery = 16;

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

proto::TrainEvent event() {
  proto::TrainEvent e;
  e.set_time(now());
  return e;
}

// Run with the step's first half done (up to the optimizer updates): why the step
// must not go on, when its loss or gradient norm is not finite, naming the first
// tensor that is (found by replaying the step on the same batch); empty otherwise.
std::string nonFiniteStep(const Program& p, const StepContext& ctx, const Batch& b, int epoch) {
  float loss = p.scalar(p.loss);
  double squares = std::isfinite(loss) ? updateGradientSquares(p) : 0.0;
  if (std::isfinite(loss) && std::isfinite(squares)) return {};
  std::string what =
      !std::isfinite(loss)
          ? std::string("the loss is ") + (std::isnan(loss) ? "NaN" : "infinite")
          : std::string("the gradient norm is ") + (std::isnan(squares) ? "NaN" : "infinite");
  feed(p, b);
  auto first = firstNonFinite(p, ctx);
  return "step " + std::to_string(ctx.step) + " (epoch " + std::to_string(epoch) + "): " + what +
         "; first non-finite tensor: " + (first ? first->describe() : "none found on replay");
}

// One training run, split as fit (the whole run: run()), epoch (epoch(), endEpoch())
// and step (step(), drain()), over the state they share.
class Fit {
 public:
  Fit(const TrainOptions& opts, const EventSink& sink) : m_opts(opts), m_sink(sink) {}
  Result<TrainSummary> run(const proto::Project& project);

 private:
  // Ends the run with a Failed event; the error keeps its kind (a refusal stays one).
  Error failWith(Error error) {
    proto::TrainEvent e = event();
    e.mutable_failed()->set_message(error.message);
    e.mutable_failed()->set_step(m_pos.step);
    m_sink(e);
    return error;
  }
  Error fail(const std::string& message) { return failWith(makeError(message)); }
  void log(proto::Log::Level level, const std::string& text) {
    proto::TrainEvent e = event();
    e.mutable_log()->set_level(level);
    e.mutable_log()->set_text(text);
    m_sink(e);
  }

  // Programs planned, weights loaded or resumed, RunStarted sent.
  Status start(const proto::Project& project);
  // One epoch, or what is left of it: `more` false when the run ends with it.
  Status epoch(bool& more);
  // Issues a step on `b` (bound already), recorded for drain() to report.
  Status step(Program& prog, const Batch& b);
  // Reads back the issued steps' scalars and reports each step, in order.
  std::string drain();
  // The epoch's report and evaluation, its best value and early stopping, and its
  // checkpoint: `more` false when early stopping ends the run.
  Status endEpoch(bool complete, std::chrono::steady_clock::time_point started, bool& more);
  Result<TrainSummary> finish();

  enum class Moment { AfterStep, Stopped, EpochEnd };
  // Whether the checkpoint policy wants one at `at`.
  bool checkpointDue(Moment at, bool isBest = false) const;
  Status checkpoint(bool best = false);

  const TrainOptions& m_opts;
  const EventSink& m_sink;
  double m_wallStart = now();
  RunPosition m_pos;
  Setup m_s;
  std::unique_ptr<ParamStore> m_store;
  std::unique_ptr<ProgramCache> m_train, m_eval;
  Program* m_main = nullptr;
  std::unique_ptr<CheckpointWriter> m_writer;
  bool m_checkpointing = false;
  double m_baseLr = 1e-3;
  int64_t m_perEpoch = 0, m_total = 0;
  TrainSummary m_sum;
  StepContext m_ctx;
  std::map<const Program*, ProfiledProgram> m_profiles;
  std::unique_ptr<BatchFeeder> m_feeder;
  // The loss, each metric and the step's guard (checked on the device) of a step,
  // read back every kReadEvery steps on a device the host cannot address (each read
  // waits for the device), every step on the CPU.
  std::unique_ptr<ScalarRing> m_ring;
  struct Issued {
    Program* prog;
    int64_t step, size;
    int epoch;
    double lr;
    bool norms;          // the Step event carries gradient and weight norms
    int64_t batchIndex;  // in its epoch, from 0: the batch a replay loads again
    int64_t globalSize;  // the step's batch across all ranks
  };
  std::vector<Issued> m_issued;
  BatchLoader::Options m_epochLoader;         // the current epoch's, for a replay
  bool m_apart = false;                       // the device runs apart from the host
  std::set<std::string> m_recordingProblems;  // said already
  std::chrono::steady_clock::time_point m_windowStart, m_memoryReported;
  Totals m_totals;  // of the epoch in progress
  // Data parallelism: the other ranks (null alone), and whether any rank was asked
  // to stop, as the last drain() agreed (all ranks stop at the same step).
  Communicator* m_comm = nullptr;
  bool m_stopAgreed = false;
  double m_waitedBefore = 0;  // CommStats::waitedSeconds at the last drain
  bool stopRequested() const { return m_comm ? m_stopAgreed : m_opts.stop && m_opts.stop->load(); }
  bool writes() const { return !m_comm || m_comm->rank() == 0; }  // checkpoints, weights
  std::vector<std::string> metricNames() const {
    std::vector<std::string> names;
    for (const auto& [name, v] : m_main->metrics)
      if (v != m_main->loss) names.push_back(name);
    return names;
  }
};

Status Fit::start(const proto::Project& project) {
  auto setupOr = prepare(project, m_opts);
  if (!setupOr) return failWith(setupOr.error());
  m_s = std::move(*setupOr);
  Setup& s = m_s;
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
  // --init-weights wins over the project's own initial weights (an imported model's).
  std::string init = m_opts.initWeights;
  if (init.empty() && !s.project.train().init_weights().empty())
    init = (std::filesystem::path(m_opts.projectDir) / s.project.train().init_weights()).string();
  if (!init.empty()) {
    auto tensors = readSafetensors(init);
    if (!tensors) return fail(tensors.error().message);
    if (Status st = m_store->importParams(*tensors, init); !st) return fail(st.message());
  }
  if (!m_opts.resume.empty()) {
    auto ckpt = readCheckpoint(m_opts.resume);
    if (!ckpt) return fail(ckpt.error().message);
    if (Status st = restoreTensors(*m_store, *ckpt); !st) return fail(st.message());
    m_pos = ckpt->position;
    s.seed = ckpt->seed;  // the data order and random streams continue from the saved run
  }
  m_comm = s.trainOpts.comm;
  const int ranks = m_comm ? m_comm->size() : 1;
  if (m_comm) {
    // Every rank starts from rank 0's weights and state.
    for (const auto& entry : m_store->entries()) {
      std::vector<float> values = ParamStore::read(*entry);
      m_comm->broadcast(values.data(), int64_t(values.size() * sizeof(float)), 0);
      ParamStore::write(*entry, values.data());
    }
  }
  const proto::TrainDef& def = s.project.train();
  auto settings = optimizerSettings(def.optimizer());
  m_baseLr = settings ? settings->lr : 1e-3;
  m_perEpoch = BatchLoader::steps(s.data.train.size(), s.batch, ranks);
  if (m_perEpoch == 0) return fail("the training set has fewer samples than ranks");
  // A position from another number of ranks or batch size counts its steps anew.
  m_pos.batchInEpoch = (m_pos.samples + s.batch * ranks - 1) / (s.batch * ranks);
  m_total = m_perEpoch * s.epochs;
  if (m_opts.maxSteps > 0) m_total = std::min(m_total, m_opts.maxSteps);

  m_sum.compileMs = m_main->compileMs;
  m_sum.arenaBytes = m_main->arenaBytes;
  m_sum.naiveBytes = m_main->naiveBytes;
  m_sum.flopsPerSample =
      m_main->batch > 0 ? double(programFlops(*m_main)) / double(m_main->batch) : 0;
  m_sum.parameters = m_store->parameterCount();
  proto::TrainEvent e = event();
  auto* r = e.mutable_run_started();
  r->set_project_name(s.project.name());
  r->set_device(s.device->id().toString());
  DeviceInfo info = s.device->info();
  r->set_device_name(info.name);
  r->set_device_memory_total(info.totalBytes);
  r->set_threads(s.threads);
  r->set_total_steps(m_total);
  // The epochs this run will reach: fewer than the project's under --max-steps.
  r->set_epochs(m_perEpoch > 0
                    ? int(std::min<int64_t>(s.epochs, (m_total + m_perEpoch - 1) / m_perEpoch))
                    : s.epochs);
  r->set_train_samples(s.data.train.size());
  r->set_test_samples(s.data.test.size());
  r->set_parameters(m_sum.parameters);
  r->set_arena_bytes(m_main->arenaBytes);
  r->set_naive_bytes(m_main->naiveBytes);
  r->set_compile_ms(m_main->compileMs);
  r->set_seed(s.seed);
  r->set_ranks(ranks);
  m_sink(e);
  for (const std::string& w : s.warnings) log(proto::Log::WARNING, w);
  if (m_comm) {
    int64_t global = s.batch * ranks, left = s.data.train.size() % global;
    log(proto::Log::INFO, "data parallel: " + m_comm->describe() + ", batches of " +
                              std::to_string(s.batch) + " per rank (" + std::to_string(global) +
                              " per step)");
    if (left > 0 && left < ranks)
      log(proto::Log::INFO, "the last " + std::to_string(left) + " sample" +
                                (left == 1 ? "" : "s") +
                                " of each epoch's order are left out of training: too few to "
                                "give every rank one");
  }
  if (!m_opts.resume.empty())
    log(proto::Log::INFO, "resumed at step " + std::to_string(m_pos.step) + " (epoch " +
                              std::to_string(m_pos.epoch) + ", batch " +
                              std::to_string(m_pos.batchInEpoch) + ")");

  const proto::CheckpointPolicy& policy = def.checkpoint();
  m_checkpointing = policy.every_steps() > 0 || policy.every_epochs() > 0 || s.best;
  m_writer = std::make_unique<CheckpointWriter>(s.checkpointDir, policy);
  m_ctx.seed = s.seed;
  m_ctx.training = true;
  m_ctx.step = m_pos.step;
  m_feeder = std::make_unique<BatchFeeder>(*s.device);
  m_ring = std::make_unique<ScalarRing>(*s.device, 2 + int(m_main->metrics.size()), kReadEvery,
                                        s.trainOpts.comm != nullptr);
  m_apart = !s.device->hostAddressable();
  m_windowStart = std::chrono::steady_clock::now();
  m_memoryReported = m_windowStart - std::chrono::seconds(1);
  return {};
}

bool Fit::checkpointDue(Moment at, bool isBest) const {
  const proto::CheckpointPolicy& policy = m_s.project.train().checkpoint();
  bool stepDue = policy.every_steps() > 0 && m_ctx.step % policy.every_steps() == 0;
  bool lastOfEpoch = m_pos.batchInEpoch >= m_perEpoch;
  switch (at) {
    case Moment::AfterStep:  // mid-epoch; one due at the epoch's end waits for it
      return stepDue && !lastOfEpoch;
    case Moment::Stopped:  // stopped by request mid-epoch: resumable from there
      // Asked to always leave one (a job a scheduler may requeue), the run writes it
      // unless the policy wrote one at this step already.
      if (m_opts.checkpointOnStop && !m_checkpointing) return m_ctx.step < m_total;
      return m_checkpointing && m_ctx.step < m_total && !lastOfEpoch && !stepDue;
    case Moment::EpochEnd: {  // m_pos.epoch is the epoch just completed
      bool due = policy.every_epochs() > 0 && m_pos.epoch % policy.every_epochs() == 0;
      return m_checkpointing && (due || stepDue || isBest);
    }
  }
  return false;
}

Status Fit::checkpoint(bool best) {
  if (!writes()) return {};
  auto path = m_writer->write(*m_store, m_pos, m_s.seed);
  if (!path) return path.error();
  proto::TrainEvent e = event();
  e.mutable_checkpoint()->set_path(*path);
  e.mutable_checkpoint()->set_step(m_pos.step);
  m_sink(e);
  if (best) return m_writer->markBest(*path);
  return {};
}

std::string Fit::drain() {
  if (m_issued.empty()) return {};
  const Setup& s = m_s;
  std::vector<float> values = m_ring->drain();
  const size_t width = 2 + m_main->metrics.size();
  if (m_comm) {
    // The step's loss and metrics over the global batch: each rank's weighted by its
    // share; and whether any rank was asked to stop.
    std::vector<float> sums;
    for (size_t k = 0; k < m_issued.size(); ++k) {
      double weight = double(m_issued[k].size) / double(m_issued[k].globalSize);
      for (size_t m = 0; m + 1 < width; ++m) sums.push_back(float(values[k * width + m] * weight));
    }
    sums.push_back(m_opts.stop && m_opts.stop->load() ? 1.f : 0.f);
    m_comm->allreduce(sums.data(), int64_t(sums.size()));
    for (size_t k = 0; k < m_issued.size(); ++k) {
      for (size_t m = 0; m + 1 < width; ++m) values[k * width + m] = sums[k * (width - 1) + m];
      m_issued[k].size = m_issued[k].globalSize;  // reported for the whole step
    }
    m_stopAgreed = m_stopAgreed || sums.back() > 0;
  }
  auto end = std::chrono::steady_clock::now();
  const double window = std::chrono::duration<double>(end - m_windowStart).count();
  double dt = window / double(m_issued.size());
  double commShare = 0;  // of this window, the share the steps waited for gradient sums
  if (m_comm) {
    double waited = m_comm->stats().waitedSeconds;
    commShare = window > 0 ? std::clamp((waited - m_waitedBefore) / window, 0.0, 1.0) : 0.0;
    m_waitedBefore = waited;
  }
  m_windowStart = end;
  for (size_t k = 0; k < m_issued.size(); ++k) {
    const Issued& it = m_issued[k];
    const float* v = values.data() + k * width;
    if (v[width - 1] == 0.f) {
      // Checked on the device: its updates, and every later one, did nothing. The
      // step runs again on its own batch, checked and replayed as on the CPU.
      m_pos.step = it.step;  // the run failed there, whatever was issued after it
      BatchLoader::Options again = m_epochLoader;
      again.skipBatches = it.batchIndex;
      again.skipSamples = -1;
      again.prefetch = 1;
      BatchLoader loader(s.data.train, s.data.norm, again);
      Batch b;
      if (!loader.next(b)) return "step " + std::to_string(it.step) + ": its batch is gone";
      StepContext ctx{it.step, it.lr, s.seed, true};
      feed(*it.prog, b);
      it.prog->run(ctx, 0, it.prog->updatesBegin);
      std::string bad = nonFiniteStep(*it.prog, ctx, b, it.epoch);
      return !bad.empty()
                 ? bad
                 : "step " + std::to_string(it.step) + " (epoch " + std::to_string(it.epoch) +
                       "): the loss or the gradient norm was not finite, and not "
                       "again when the step ran once more";
    }
    m_pos.trainSeconds += dt;
    m_pos.trainSamples += it.size;
    float loss = v[0];
    if (!std::isfinite(loss))
      return "the loss became " + std::string(std::isnan(loss) ? "NaN" : "infinite") + " at step " +
             std::to_string(it.step) + " (epoch " + std::to_string(it.epoch) + ")";
    m_totals.add(*it.prog, it.size, v);
    m_pos.lossSum = m_totals.loss;
    m_pos.metricSums = m_totals.metrics;
    m_pos.samples = m_totals.samples;
    proto::TrainEvent e = event();
    auto* st = e.mutable_step();
    st->set_step(it.step);
    st->set_epoch(it.epoch);
    st->set_loss(loss);
    st->set_lr(it.lr);
    st->set_samples_per_sec(dt > 0 ? double(it.size) / dt : 0);
    if (m_comm) st->set_comm_share(commShare);
    st->set_seconds(now() - m_wallStart);
    if (k + 1 == m_issued.size() && end - m_memoryReported >= std::chrono::seconds(1)) {
      st->set_device_memory_used(s.device->memoryInUse());
      m_memoryReported = end;
    }
    for (size_t m = 0; m < it.prog->metrics.size(); ++m)
      if (it.prog->metrics[m].second != it.prog->loss)
        (*st->mutable_metrics())[it.prog->metrics[m].first] = v[1 + m];
    // Norms are asked for only of a step drained before the next one is issued.
    if (it.norms) reportNorms(*it.prog, *m_store, *st);
    m_sink(e);
  }
  m_issued.clear();
  return {};
}

Status Fit::step(Program& prog, const Batch& b) {
  const Setup& s = m_s;
  auto issueStart = std::chrono::steady_clock::now();
  bool guarded = false;
  bool checked = s.checkEvery > 0 && m_ctx.step % s.checkEvery == 0;
  if (m_opts.profile) {
    ProfiledProgram& pp = m_profiles[&prog];
    pp.program = &prog;
    prog.runProfiled(m_ctx, pp.seconds);
    pp.runs += 1;
  } else if (checked && m_apart) {
    prog.runGuarded(m_ctx);  // checked on the device: the host runs on
    guarded = true;
  } else if (checked) {
    prog.runRecorded(m_ctx, 0, prog.updatesBegin);
    if (std::string bad = nonFiniteStep(prog, m_ctx, b, m_pos.epoch); !bad.empty())
      return makeError(bad);
    prog.runRecorded(m_ctx, prog.updatesBegin, prog.steps.size());
  } else {
    prog.run(m_ctx);
  }
  std::vector<ValueId> scalars{prog.loss};
  for (const auto& [name, v] : prog.metrics) scalars.push_back(v);
  m_ring->record(prog, scalars, guarded);
  for (const std::string& why : prog.takeRecordingProblems())
    if (m_recordingProblems.insert(why).second)  // each reason once, whichever plan
      log(proto::Log::WARNING, s.device->id().toString() +
                                   ": the step could not be recorded as a CUDA Graph (" + why +
                                   "); each kernel is launched every step instead");
  m_sum.issueSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - issueStart).count();
  bool norms = m_opts.reportNorms && (m_ctx.step == 1 || m_ctx.step % kNormEvery == 0);
  m_issued.push_back({&prog, m_ctx.step, b.size, m_pos.epoch, m_ctx.lr, norms, m_pos.batchInEpoch,
                      b.globalSize > 0 ? b.globalSize : b.size});
  return {};
}

Status Fit::epoch(bool& more) {
  const Setup& s = m_s;
  BatchLoader::Options lo;
  lo.batchSize = s.batch;
  lo.shuffle = !s.project.data().no_shuffle();
  lo.seed = s.seed;
  lo.epoch = m_pos.epoch;
  lo.prefetch = s.project.data().prefetch_batches() > 0 ? s.project.data().prefetch_batches() : 2;
  lo.skipSamples = m_pos.samples;  // this epoch's samples done, on any number of ranks
  lo.augment = s.data.augment;
  if (m_comm) {
    lo.rank = m_comm->rank();
    lo.ranks = m_comm->size();
  }
  m_epochLoader = lo;
  BatchLoader loader(s.data.train, s.data.norm, lo);
  if (!loader.status()) return fail(loader.status().message());
  m_totals = Totals{};
  m_totals.loss = m_pos.lossSum;
  m_totals.metrics = m_pos.metricSums;
  m_totals.samples = m_pos.samples;
  Batch b, next;
  auto epochStart = std::chrono::steady_clock::now();
  m_windowStart = epochStart;
  bool have = loader.next(b);
  if (have) m_feeder->stage(b);
  bool stopped = false;
  while (have) {
    auto prog = m_train->get(b.size);
    if (!prog) return fail(prog.error().message);
    m_ctx.step += 1;
    m_pos.step = m_ctx.step;
    m_ctx.lossWeight = m_comm ? double(b.size) / double(b.globalSize) : 1.0;
    m_ctx.lr =
        learningRate(s.project.train().schedule(), m_baseLr, m_ctx.step, m_perEpoch, m_total);
    m_feeder->bind(**prog, b);
    if (Status st = step(**prog, b); !st) return fail(st.message());
    m_pos.batchInEpoch += 1;
    bool ending = m_ctx.step >= m_total || stopRequested();
    bool saving = checkpointDue(Moment::AfterStep);
    bool mustDrain = m_ring->full() || m_issued.back().norms || ending || saving;
    // On a device that runs apart from the host, the next batch crosses while this
    // step runs; the CPU reports the step first, as it has its results already,
    // unless its ranks sum the scalars of several steps at once.
    if ((!m_apart && !m_comm) || ending)
      if (std::string bad = drain(); !bad.empty()) return fail(bad);
    // A stop asked for while the step was reported ends the run at that step.
    ending = ending || stopRequested();
    if (m_apart) {
      have = !ending && loader.next(next);
      if (have) m_feeder->stage(next);
    }
    if (mustDrain)
      if (std::string bad = drain(); !bad.empty()) return fail(bad);
    if (saving) {
      if (Status st = checkpoint(); !st) return fail(st.message());
      if (m_issued.empty()) m_windowStart = std::chrono::steady_clock::now();  // not a step's
    }
    if (ending) {
      // Stopped by request mid-epoch: a checkpoint where it stopped, so the run can
      // be resumed from there (one due at the epoch's end comes below).
      if (checkpointDue(Moment::Stopped))
        if (Status st = checkpoint(); !st) return fail(st.message());
      m_sum.stoppedByRequest = m_ctx.step < m_total;
      stopped = true;
      break;
    }
    if (!m_apart) {
      // The next step's time starts with its batch, unless steps are reported in
      // batches (ranks), whose window then holds everything.
      if (!m_comm) m_windowStart = std::chrono::steady_clock::now();
      have = loader.next(next);
    }
    std::swap(b, next);
  }
  if (std::string bad = drain(); !bad.empty()) return fail(bad);
  if (Status st = loader.status(); !st) return fail(st.message());
  if (loader.skipped() > 0)
    log(proto::Log::WARNING, "epoch " + std::to_string(m_pos.epoch) + ": " +
                                 std::to_string(loader.skipped()) +
                                 " unreadable image(s) replaced by the next readable one; the "
                                 "first " +
                                 loader.firstSkipped());
  more = !stopped;
  // Complete unless the run stopped before its last batch.
  return endEpoch(!stopped || m_pos.batchInEpoch >= m_perEpoch, epochStart, more);
}

Status Fit::endEpoch(bool complete, std::chrono::steady_clock::time_point started, bool& more) {
  const Setup& s = m_s;
  proto::TrainEvent e = event();
  auto* ep = e.mutable_epoch();
  ep->set_epoch(m_pos.epoch);
  ep->set_train_loss(m_totals.meanLoss());
  m_totals.fill(ep->mutable_train_metrics());
  m_sum.trainLoss = m_totals.meanLoss();
  if (s.data.val.size() > 0) {
    auto val = evaluate(*m_eval, s.data.val, s.data.norm, s.batch, s.seed, m_comm, metricNames());
    if (!val) return fail(val.error().message);
    ep->set_has_val(true);
    ep->set_val_loss(val->meanLoss());
    val->fill(ep->mutable_val_metrics());
  }
  if (s.data.test.size() > 0) {
    auto test = evaluate(*m_eval, s.data.test, s.data.norm, s.batch, s.seed, m_comm, metricNames());
    if (!test) return fail(test.error().message);
    ep->set_has_test(true);
    ep->set_test_loss(test->meanLoss());
    test->fill(ep->mutable_test_metrics());
    m_sum.testLoss = test->meanLoss();
    for (const Node& n : m_main->graph.nodes)
      if (n.op->accuracy && ep->test_metrics().count(n.name)) {
        m_sum.testAccuracy = ep->test_metrics().at(n.name);
        break;
      }
  }
  ep->set_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  ep->set_run_seconds(now() - m_wallStart);
  m_sink(e);
  m_sum.epochs = m_pos.epoch;
  if (!complete) return {};  // stopped mid-epoch: the run ends

  // Best value and early stopping look at complete epochs only.
  const proto::TrainDef& def = s.project.train();
  double value = 0;
  bool isBest = s.best && s.best->valueIn(*ep, value) &&
                (!m_pos.hasBest || s.best->improves(value, m_pos.best));
  const MetricWatch* tracked = s.early ? &*s.early : (s.best ? &*s.best : nullptr);
  if (tracked && tracked->valueIn(*ep, value)) {
    if (!m_pos.hasBest || tracked->improves(value, m_pos.best)) {
      m_pos.best = value;
      m_pos.hasBest = true;
      m_pos.bestEpoch = m_pos.epoch;
      m_pos.epochsWithoutImprovement = 0;
    } else {
      m_pos.epochsWithoutImprovement += 1;
    }
    int patience = def.early_stopping().patience() > 0 ? def.early_stopping().patience() : 5;
    if (s.early && m_pos.epochsWithoutImprovement >= patience) {
      more = false;
      m_sum.stoppedEarly = true;
      log(proto::Log::INFO,
          "early stopping after epoch " + std::to_string(m_pos.epoch) + ": " + s.early->spec() +
              " has not improved for " + std::to_string(patience) + " epochs (best " +
              std::to_string(m_pos.best) + " at epoch " + std::to_string(m_pos.bestEpoch) + ")");
    }
  }
  bool save = checkpointDue(Moment::EpochEnd, isBest);
  // The position moves to the start of the next epoch, which a checkpoint describes.
  m_pos.epoch += 1;
  m_pos.batchInEpoch = 0;
  m_pos.lossSum = 0;
  m_pos.metricSums.clear();
  m_pos.samples = 0;
  if (save)
    if (Status st = checkpoint(isBest); !st) return fail(st.message());
  return {};
}

Result<TrainSummary> Fit::finish() {
  m_sum.steps = m_ctx.step;
  m_sum.samplesPerSec =
      m_pos.trainSeconds > 0 ? double(m_pos.trainSamples) / m_pos.trainSeconds : 0;
  m_sum.trainSeconds = m_pos.trainSeconds;
  m_sum.device = m_s.device->id().toString();
  m_sum.wallSeconds = now() - m_wallStart;
  m_sum.precision = precisionName(m_main->precision);
  if (m_main->lossScale != kNoValue && m_sum.steps > 0) {
    std::vector<float> state = m_main->read(m_main->lossScale);
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", double(state[fn::LossScale::kScale]));
    m_sum.skippedSteps = int64_t(state[fn::LossScale::kSkipped]);
    m_sum.lossScale = state[fn::LossScale::kScale];
    log(proto::Log::INFO, "fp16 loss scaling: " + std::to_string(m_sum.skippedSteps) + " of " +
                              std::to_string(m_sum.steps) +
                              " steps skipped (their scaled gradients overflowed); the loss "
                              "scale is now " +
                              scale);
  }
  if (m_opts.profile) {
    std::vector<ProfiledProgram> all;
    for (auto& [_, pp] : m_profiles) all.push_back(std::move(pp));
    // On the CPU each kernel is set against the matrix-product peak measured now, on
    // the run's threads.
    cpu::GemmPeak peak;
    if (m_main->device->id().kind == DeviceKind::Cpu) peak = cpu::measureGemmPeak();
    std::string probe = peak.probe + ", " + std::to_string(peak.threads) +
                        (peak.threads == 1 ? " thread" : " threads");
    m_sum.profile = profileTable(all, peak.gflops, probe);
  }
  if (m_comm) {
    CommStats c = m_comm->stats();
    m_sum.ranks = m_comm->size();
    m_sum.commSeconds = c.bucketSeconds;
    m_sum.commWaitedSeconds = c.waitedSeconds;
    if (m_opts.profile) {
      char line[320];
      double hidden =
          c.bucketSeconds > 0
              ? 100.0 * std::max(0.0, c.bucketSeconds - c.waitedSeconds) / c.bucketSeconds
              : 0.0;
      std::snprintf(line, sizeof line,
                    "communication (%s): %lld bucket sums, %.1f MiB, %.3f s on the communication "
                    "thread; the steps waited %.3f s for them: %.0f%% hidden behind the backward "
                    "pass\n",
                    m_comm->describe().c_str(), (long long)c.buckets, double(c.bytes) / 1048576.0,
                    c.bucketSeconds, c.waitedSeconds, hidden);
      m_sum.profile += line;
    }
  }
  if (!m_opts.saveWeights.empty() && writes()) {
    if (Status st = writeSafetensors(m_opts.saveWeights, m_store->exportParams(),
                                     {{"format", "pt"}, {"producer", "netloom"}});
        !st)
      return fail(st.message());
  }
  proto::TrainEvent e = event();
  auto* f = e.mutable_finished();
  f->set_steps(m_sum.steps);
  f->set_epochs(m_sum.epochs);
  f->set_train_loss(m_sum.trainLoss);
  f->set_test_loss(m_sum.testLoss);
  f->set_test_accuracy(m_sum.testAccuracy);
  f->set_samples_per_sec(m_sum.samplesPerSec);
  f->set_wall_seconds(m_sum.wallSeconds);
  f->set_stopped(m_sum.stoppedByRequest);
  m_sink(e);
  return m_sum;
}

Result<TrainSummary> Fit::run(const proto::Project& project) {
  if (Status st = start(project); !st) return st.error();
  bool more = m_pos.step < m_total;
  while (more && m_pos.epoch <= m_s.epochs)
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
      proto::TrainEvent e = event();
      e.mutable_log()->set_level(proto::Log::ERROR);
      e.mutable_log()->set_text(message);
      sink(e);
      return Error{message, ErrorKind::Collective};
    }
  } catch (const std::exception& e) {
    message = std::string("the run failed: ") + e.what();
  }
  proto::TrainEvent e = event();
  e.mutable_failed()->set_message(message);
  sink(e);
  return makeError(message);
}

}  // namespace netloom
