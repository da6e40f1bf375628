#include "engine/io/progress.h"

#include <unistd.h>

#include <string>

namespace netloom {

ProgressPrinter::ProgressPrinter(std::FILE* out) : m_out(out), m_tty(isatty(fileno(out))) {}

namespace {
std::string clock(double seconds) {
  int s = int(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02d:%02d", s / 60, s % 60);
  return buf;
}
}  // namespace

void ProgressPrinter::drawStep(const proto::Step& s) {
  // Throttled: a terminal redraw per step would cost more than a small step.
  if (m_lastDraw >= 0 && s.seconds() - m_lastDraw < 0.1 && s.step() != m_totalSteps) return;
  m_lastDraw = s.seconds();
  if (m_startSeconds < 0) m_startSeconds = s.seconds();
  double frac = m_totalSteps > 0 ? double(s.step()) / double(m_totalSteps) : 0;
  const int width = 30;
  int filled = int(frac * width);
  std::string bar(filled, '#');
  bar += std::string(width - filled, '.');
  double elapsed = s.seconds() - m_startSeconds;
  double eta = s.step() > 1 && frac > 0 ? elapsed / frac - elapsed : 0;
  std::fprintf(m_out,
               "\r\033[2Kepoch %d/%d [%s] %3d%% step %lld/%lld loss %.4f %6.0f samples/s ETA %s",
               s.epoch(), m_epochs, bar.c_str(), int(frac * 100), (long long)s.step(),
               (long long)m_totalSteps, m_smoothedLoss, s.samples_per_sec(), clock(eta).c_str());
  std::fflush(m_out);
}

void ProgressPrinter::caughtUp() {
  if (!m_catchingUp) return;
  m_catchingUp = false;
  if (m_totalSteps == 0) return;  // nothing had started: what comes is printed as it comes
  std::fprintf(m_out, "now at epoch %d/%d, step %lld/%lld, loss %.4f\n", m_lastEpoch, m_epochs,
               (long long)m_lastStep, (long long)m_totalSteps, m_smoothedLoss);
  // A run that ended before: how it ended.
  if (m_last.has_finished() || m_last.has_failed()) onEvent(proto::TrainEvent(m_last));
  std::fflush(m_out);
}

void ProgressPrinter::onEvent(const proto::TrainEvent& e) {
  m_last = e;
  if (e.has_step()) m_lastStep = e.step().step(), m_lastEpoch = e.step().epoch();
  if (m_catchingUp) {
    if (e.has_run_started()) {
      m_totalSteps = e.run_started().total_steps();
      m_epochs = e.run_started().epochs();
    }
    if (e.has_step())
      m_smoothedLoss =
          m_smoothedLoss < 0 ? e.step().loss() : 0.95 * m_smoothedLoss + 0.05 * e.step().loss();
    return;
  }
  switch (e.kind_case()) {
    case proto::TrainEvent::kRunStarted: {
      const auto& r = e.run_started();
      m_totalSteps = r.total_steps();
      m_epochs = r.epochs();
      std::fprintf(m_out,
                   "training '%s' on %s, %d threads: %lld parameters, %lld train / %lld test "
                   "samples, compiled in %.1f ms, arena %.2f MiB (naive %.2f MiB)\n",
                   r.project_name().c_str(), r.device().c_str(), r.threads(),
                   (long long)r.parameters(), (long long)r.train_samples(),
                   (long long)r.test_samples(), r.compile_ms(), double(r.arena_bytes()) / 1048576.0,
                   double(r.naive_bytes()) / 1048576.0);
      break;
    }
    case proto::TrainEvent::kStep: {
      const auto& s = e.step();
      m_smoothedLoss = m_smoothedLoss < 0 ? s.loss() : 0.95 * m_smoothedLoss + 0.05 * s.loss();
      if (m_tty) drawStep(s);
      break;
    }
    case proto::TrainEvent::kEpoch: {
      const auto& ep = e.epoch();
      if (m_tty) std::fprintf(m_out, "\r\033[2K");
      std::fprintf(m_out, "epoch %d/%d: train loss %.4f", ep.epoch(), m_epochs, ep.train_loss());
      for (const auto& [k, v] : ep.train_metrics()) std::fprintf(m_out, " %s %.4f", k.c_str(), v);
      if (ep.has_val()) {
        std::fprintf(m_out, " | val loss %.4f", ep.val_loss());
        for (const auto& [k, v] : ep.val_metrics()) std::fprintf(m_out, " %s %.4f", k.c_str(), v);
      }
      if (ep.has_test()) {
        std::fprintf(m_out, " | test loss %.4f", ep.test_loss());
        for (const auto& [k, v] : ep.test_metrics()) std::fprintf(m_out, " %s %.4f", k.c_str(), v);
      }
      std::fprintf(m_out, " (%.1f s)\n", ep.seconds());
      break;
    }
    case proto::TrainEvent::kFinished: {
      const auto& f = e.finished();
      std::fprintf(m_out, "finished: %lld steps, %d epochs, %.0f samples/s, %.1f s\n",
                   (long long)f.steps(), f.epochs(), f.samples_per_sec(), f.wall_seconds());
      break;
    }
    case proto::TrainEvent::kLog:
      if (m_tty) std::fprintf(m_out, "\r\033[2K");
      std::fprintf(m_out, "%s%s\n", e.log().level() == proto::Log::WARNING ? "warning: " : "",
                   e.log().text().c_str());
      break;
    case proto::TrainEvent::kFailed:
      if (m_tty) std::fprintf(m_out, "\r\033[2K");
      std::fprintf(m_out, "failed: %s\n", e.failed().message().c_str());
      break;
    default: break;
  }
  std::fflush(m_out);
}

}  // namespace netloom
