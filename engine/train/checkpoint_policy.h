// When a run leaves a checkpoint: every N steps or epochs, at the best epoch, and
// where a stop asked for mid-epoch leaves one to resume from; and writing it (rank
// 0's, in a job of ranks). Inside the trainer; not an API.
#pragma once

#include "engine/train/run_reporter.h"
#include "engine/train/run_state.h"

namespace netloom {

class CheckpointPolicy {
 public:
  enum class Moment { AfterStep, Stopped, EpochEnd };

  // Reads the run's position as it moves; the policy is the project's.
  explicit CheckpointPolicy(const RunState& run);

  // Whether the policy wants one at `at`; `isBest`: the epoch just ended is the best.
  bool due(Moment at, bool isBest = false) const;
  // Writes one at the run's position, reports it, and marks it the best where asked.
  Status write(const ParamStore& store, const RunReporter& reporter, bool best = false);

 private:
  const RunState& m_run;
  const proto::CheckpointPolicy& m_policy;
  bool m_any = false;  // the policy asks for checkpoints at all
  CheckpointWriter m_writer;
};

}  // namespace netloom
