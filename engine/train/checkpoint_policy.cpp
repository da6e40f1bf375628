#include "engine/train/checkpoint_policy.h"

namespace netloom {

CheckpointPolicy::CheckpointPolicy(const RunState& run)
    : m_run(run),
      m_policy(run.s.project.train().checkpoint()),
      m_any(m_policy.every_steps() > 0 || m_policy.every_epochs() > 0 || run.s.best),
      m_writer(run.s.checkpointDir, m_policy, dataMetadata(run.s.data.train)) {}

bool CheckpointPolicy::due(Moment at, bool isBest) const {
  const RunPosition& pos = m_run.pos;
  const int64_t step = m_run.ctx.step;
  bool stepDue = m_policy.every_steps() > 0 && step % m_policy.every_steps() == 0;
  bool lastOfEpoch = pos.batchInEpoch >= m_run.perEpoch;
  switch (at) {
    case Moment::AfterStep:  // mid-epoch; one due at the epoch's end waits for it
      return stepDue && !lastOfEpoch;
    case Moment::Stopped:  // stopped by request mid-epoch: resumable from there
      // Asked to always leave one (a job a scheduler may requeue), the run writes it
      // unless the policy wrote one at this step already.
      if (m_run.opts.checkpointOnStop && !m_any) return step < m_run.total;
      return m_any && step < m_run.total && !lastOfEpoch && !stepDue;
    case Moment::EpochEnd: {  // pos.epoch is the epoch just completed
      bool due = m_policy.every_epochs() > 0 && pos.epoch % m_policy.every_epochs() == 0;
      return m_any && (due || stepDue || isBest);
    }
  }
  return false;
}

Status CheckpointPolicy::write(const ParamStore& store, const RunReporter& reporter, bool best) {
  std::unique_ptr<ParamStore> whole = m_run.gathered(store);
  if (!m_run.writes()) return {};
  auto path = m_writer.write(whole ? *whole : store, m_run.pos, m_run.s.seed);
  if (!path) return path.error();
  reporter.checkpoint(*path, m_run.pos.step);
  if (best) return m_writer.markBest(*path);
  return {};
}

}  // namespace netloom
