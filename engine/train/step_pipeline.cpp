#include "engine/train/step_pipeline.h"

#include <algorithm>
#include <cmath>

#include "engine/runtime/nonfinite.h"
#include "engine/train/norms.h"
#include "kernels/core/functors.h"

namespace netloom {
namespace {

// Steps between two reports of gradient and weight norms.
constexpr int64_t kNormEvery = 10;
// Steps issued between two reads of their losses on a device the host cannot
// address: each read waits for the device to finish.
constexpr int kReadEvery = 16;

// Run with the step's first half done (up to the optimizer updates): why the step
// must not go on, when its loss or gradient norm is not finite, naming the first
// tensor that is (found by replaying the step on the same batch); empty otherwise.
std::string nonFiniteStep(const Program& p, const StepContext& ctx, const Batch& b, int epoch) {
  float loss = p.scalar(p.loss);
  if (std::isfinite(loss) && p.device->allFinite(p.updateGradients())) return {};
  double squares = std::isfinite(loss) ? updateGradientSquares(p) : 0.0;
  std::string what =
      !std::isfinite(loss)
          ? std::string("the loss is ") + (std::isnan(loss) ? "NaN" : "infinite")
          : std::string("the gradient norm is ") + (std::isnan(squares) ? "NaN" : "infinite");
  feed(p, b);
  auto first = firstNonFinite(p, ctx);
  return "step " + std::to_string(ctx.step) + " (epoch " + std::to_string(epoch) + "): " + what +
         "; first non-finite tensor: " + (first ? first->describe() : "none found on replay");
}

// The floats a step of `main` records in the ring (StepPipeline::m_ring).
size_t widthOf(const Program& main) {
  return 2 + main.metrics.size() + (main.lossScale != kNoValue ? 2 : 0);
}

}  // namespace

StepPipeline::StepPipeline(RunState& run, RunReporter& reporter, const ParamStore& store,
                           const Program& main)
    : m_run(run),
      m_reporter(reporter),
      m_store(store),
      m_scaled(main.lossScale != kNoValue),
      m_ring(std::make_unique<ScalarRing>(*run.s.device, int(widthOf(main)), kReadEvery,
                                          run.comm != nullptr)),
      m_width(widthOf(main)),
      m_apart(!run.s.device->hostAddressable()) {}

void StepPipeline::beginEpoch(const BatchLoader::Options& loader) {
  m_epochLoader = loader;
  restartWindow();
}

std::vector<ProfiledProgram> StepPipeline::takeProfiles() {
  std::vector<ProfiledProgram> all;
  for (auto& [_, pp] : m_profiles) all.push_back(std::move(pp));
  m_profiles.clear();
  return all;
}

Status StepPipeline::issue(Program& prog, const Batch& b) {
  const Setup& s = m_run.s;
  StepContext& ctx = m_run.ctx;
  auto issueStart = std::chrono::steady_clock::now();
  bool guarded = false;
  bool checked = s.checkEvery > 0 && ctx.step % s.checkEvery == 0;
  if (m_run.opts.profile) {
    ProfiledProgram& pp = m_profiles[&prog];
    pp.program = &prog;
    prog.runProfiled(ctx, pp.seconds);
    pp.runs += 1;
  } else if (checked && m_apart) {
    prog.runGuarded(ctx);  // checked on the device: the host runs on
    guarded = true;
  } else if (checked) {
    prog.runRecorded(ctx, 0, prog.updatesBegin);
    if (std::string bad = nonFiniteStep(prog, ctx, b, m_run.pos.epoch); !bad.empty())
      return makeError(bad);
    prog.runRecorded(ctx, prog.updatesBegin, prog.steps.size());
  } else {
    prog.run(ctx);
  }
  std::vector<RingScalar> scalars{prog.loss};
  for (const auto& [name, v] : prog.metrics) scalars.push_back(v);
  if (m_scaled) {
    scalars.push_back({prog.lossScale, fn::LossScale::kUsed});
    scalars.push_back({prog.lossScale, fn::LossScale::kSkipped});
  }
  m_ring->record(prog, scalars, guarded);
  for (const std::string& why : prog.takeRecordingProblems())
    if (m_recordingProblems.insert(why).second)  // each reason once, whichever plan
      m_reporter.log(proto::Log::WARNING,
                     s.device->id().toString() + ": the step could not be recorded as a CUDA " +
                         "Graph (" + why + "); each kernel is launched every step instead");
  m_run.sum.issueSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - issueStart).count();
  bool norms = m_run.opts.reportNorms && (ctx.step == 1 || ctx.step % kNormEvery == 0);
  m_issued.push_back({&prog, ctx.step, b.size, m_run.pos.epoch, ctx.lr, norms,
                      m_run.pos.batchInEpoch, b.globalSize > 0 ? b.globalSize : b.size});
  return {};
}

void StepPipeline::sumOverRanks(std::vector<float>& values, size_t width) {
  // The step's loss and metrics over the global batch: each rank's weighted by its
  // share; and whether any rank was asked to stop.
  std::vector<float> sums;
  for (size_t k = 0; k < m_issued.size(); ++k) {
    double weight = double(m_issued[k].size) / double(m_issued[k].globalSize);
    for (size_t m = 0; m + 1 < width; ++m) sums.push_back(float(values[k * width + m] * weight));
  }
  sums.push_back(m_run.opts.stop && m_run.opts.stop->load() ? 1.f : 0.f);
  m_run.comm->allreduce(sums.data(), int64_t(sums.size()));
  for (size_t k = 0; k < m_issued.size(); ++k) {
    for (size_t m = 0; m + 1 < width; ++m) values[k * width + m] = sums[k * (width - 1) + m];
    m_issued[k].size = m_issued[k].globalSize;  // reported for the whole step
  }
  m_run.stopAgreed = m_run.stopAgreed || sums.back() > 0;
}

std::string StepPipeline::replayFailed(const Issued& it) const {
  // Checked on the device: its updates, and every later one, did nothing. The step
  // runs again on its own batch, checked and replayed as on the CPU.
  const Setup& s = m_run.s;
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
  return !bad.empty() ? bad
                      : "step " + std::to_string(it.step) + " (epoch " + std::to_string(it.epoch) +
                            "): the loss or the gradient norm was not finite, and not again when "
                            "the step ran once more";
}

std::string StepPipeline::drain() {
  if (m_issued.empty()) return {};
  std::vector<float> values = m_ring->drain();
  const size_t width = m_width;
  if (m_run.comm) sumOverRanks(values, width);
  auto end = std::chrono::steady_clock::now();
  const double window = std::chrono::duration<double>(end - m_windowStart).count();
  double dt = window / double(m_issued.size());
  double commShare = 0;  // of this window, the share the steps waited for gradient sums
  if (m_run.comm) {
    double waited = m_run.comm->stats().waitedSeconds;
    commShare = window > 0 ? std::clamp((waited - m_waitedBefore) / window, 0.0, 1.0) : 0.0;
    m_waitedBefore = waited;
  }
  m_windowStart = end;
  RunPosition& pos = m_run.pos;
  for (size_t k = 0; k < m_issued.size(); ++k) {
    const Issued& it = m_issued[k];
    const float* v = values.data() + k * width;
    if (v[width - 1] == 0.f) {
      pos.step = it.step;  // the run failed there, whatever was issued after it
      return replayFailed(it);
    }
    pos.trainSeconds += dt;
    pos.trainSamples += it.size;
    if (it.step > m_run.opts.warmupSteps) {
      m_run.steadySeconds += dt;
      m_run.steadySamples += it.size;
    }
    float loss = v[0];
    if (!std::isfinite(loss))
      return "the loss became " + std::string(std::isnan(loss) ? "NaN" : "infinite") + " at step " +
             std::to_string(it.step) + " (epoch " + std::to_string(it.epoch) + ")";
    m_run.totals.add(*it.prog, it.size, v);
    pos.lossSum = m_run.totals.loss;
    pos.metricSums = m_run.totals.metrics;
    pos.samples = m_run.totals.samples;
    proto::Step st;
    st.set_step(it.step);
    st.set_epoch(it.epoch);
    st.set_loss(loss);
    st.set_lr(it.lr);
    st.set_samples_per_sec(dt > 0 ? double(it.size) / dt : 0);
    if (m_run.comm) st.set_comm_share(commShare);
    const size_t metrics = it.prog->metrics.size();
    for (size_t m = 0; m < metrics; ++m)
      if (it.prog->metrics[m].second != it.prog->loss)
        (*st.mutable_metrics())[it.prog->metrics[m].first] = v[1 + m];
    if (m_scaled) {
      st.set_loss_scale(v[1 + metrics]);
      st.set_skipped_steps(int64_t(v[2 + metrics]));
    }
    // Norms are asked for only of a step drained before the next one is issued.
    if (it.norms) reportNorms(*it.prog, m_store, st);
    m_reporter.step(std::move(st), *m_run.s.device, k + 1 == m_issued.size());
  }
  m_issued.clear();
  return {};
}

}  // namespace netloom
