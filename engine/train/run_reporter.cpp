#include "engine/train/run_reporter.h"

#include <algorithm>

namespace netloom {

double wallClockSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void RunReporter::send(proto::TrainEvent& e) const {
  e.set_time(wallClockSeconds());
  m_sink(e);
}

Error RunReporter::fail(Error error, int64_t step) const {
  proto::TrainEvent e;
  e.mutable_failed()->set_message(error.message);
  e.mutable_failed()->set_step(step);
  send(e);
  return error;
}

void RunReporter::log(proto::Log::Level level, const std::string& text) const {
  proto::TrainEvent e;
  e.mutable_log()->set_level(level);
  e.mutable_log()->set_text(text);
  send(e);
}

void RunReporter::started(const RunState& run, const Program& main) const {
  const Setup& s = run.s;
  proto::TrainEvent e;
  auto* r = e.mutable_run_started();
  r->set_project_name(s.project.name());
  r->set_device(s.device->id().toString());
  DeviceInfo info = s.device->info();
  r->set_device_name(info.name);
  r->set_device_memory_total(info.totalBytes);
  r->set_threads(s.threads);
  r->set_total_steps(run.total);
  // The epochs this run will reach: fewer than the project's under --max-steps.
  const int64_t per = run.perEpoch;
  r->set_epochs(per > 0 ? int(std::min<int64_t>(s.epochs, (run.total + per - 1) / per)) : s.epochs);
  r->set_train_samples(s.data.train.size());
  r->set_test_samples(s.data.test.size());
  r->set_parameters(run.sum.parameters);
  r->set_arena_bytes(main.arenaBytes);
  r->set_naive_bytes(main.naiveBytes);
  r->set_compile_ms(main.compileMs);
  r->set_seed(s.seed);
  r->set_ranks(run.ranks());
  send(e);
  for (const std::string& w : s.warnings) log(proto::Log::WARNING, w);
  if (run.comm) {
    const int ranks = run.shares();
    int64_t global = s.batch * ranks, left = s.data.train.size() % global;
    const CompileOptions& c = s.trainOpts;
    const std::string how =
        c.stageComm ? "pipelines of " + std::to_string(c.stageComm->size()) + " stages (" +
                          std::to_string(c.microBatches) + " micro-batches), this rank stage " +
                          std::to_string(c.stageComm->rank()) + ", batches of " +
                          std::to_string(s.batch) + " per pipeline"
        : c.tensorComm ? "tensor groups of " + std::to_string(c.tensorComm->size()) +
                             " ranks (their link: " + c.tensorComm->link().describe() +
                             "), batches of " + std::to_string(s.batch) + " per rank"
        : c.zero > 0 ? "ZeRO-" + std::to_string(c.zero) + ", batches of " +
                           std::to_string(s.batch) + " per rank"
                     : "batches of " + std::to_string(s.batch) + " per rank";
    log(proto::Log::INFO, "data parallel: " + run.comm->describe() + ", " + how + " (" +
                              std::to_string(global) + " per step)");
    if (left > 0 && left < ranks)
      log(proto::Log::INFO, "the last " + std::to_string(left) + " sample" +
                                (left == 1 ? "" : "s") +
                                " of each epoch's order are left out of training: too few to "
                                "give every rank one");
  }
  if (!run.opts.resume.empty())
    log(proto::Log::INFO, "resumed at step " + std::to_string(run.pos.step) + " (epoch " +
                              std::to_string(run.pos.epoch) + ", batch " +
                              std::to_string(run.pos.batchInEpoch) + ")");
}

void RunReporter::step(proto::Step step, const Device& device, bool lastOfWindow) {
  auto now = std::chrono::steady_clock::now();
  step.set_seconds(runSeconds());
  if (lastOfWindow && now - m_memoryReported >= std::chrono::seconds(1)) {
    step.set_device_memory_used(device.memoryInUse());
    m_memoryReported = now;
  }
  proto::TrainEvent e;
  *e.mutable_step() = std::move(step);
  send(e);
}

void RunReporter::epoch(proto::Epoch epoch, std::chrono::steady_clock::time_point started) const {
  epoch.set_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  epoch.set_run_seconds(runSeconds());
  proto::TrainEvent e;
  *e.mutable_epoch() = std::move(epoch);
  send(e);
}

void RunReporter::checkpoint(const std::string& path, int64_t step) const {
  proto::TrainEvent e;
  e.mutable_checkpoint()->set_path(path);
  e.mutable_checkpoint()->set_step(step);
  send(e);
}

void RunReporter::finished(const TrainSummary& sum) const {
  proto::TrainEvent e;
  auto* f = e.mutable_finished();
  f->set_steps(sum.steps);
  f->set_epochs(sum.epochs);
  f->set_train_loss(sum.trainLoss);
  f->set_test_loss(sum.testLoss);
  f->set_test_accuracy(sum.testAccuracy);
  f->set_samples_per_sec(sum.samplesPerSec);
  f->set_wall_seconds(sum.wallSeconds);
  f->set_stopped(sum.stoppedByRequest);
  send(e);
}

}  // namespace netloom
