// Holding a run at a known step, for tests that must act on a run in progress
// (pause it, stop it, kill it) without racing it: NETLOOM_HOLD_AT_STEP=N makes
// netloom-train wait, once step N's event is written, until a line is written to
// the FIFO named by NETLOOM_HOLD_FIFO (relative to the working directory, which is
// a remote job's folder). Not in --help: users have no need of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/util/status.h"

namespace netloom {

class StepHold {
 public:
  // Off unless both variables are set; an error when they are set but unusable.
  static Result<StepHold> fromEnvironment();

  bool active() const { return m_step > 0; }
  // After `step`'s event: at the hold step, blocks until the FIFO is written to (or
  // its writer closes it), or until `stop` is set by a signal handler.
  Status after(int64_t step, const std::atomic<bool>& stop) const;

 private:
  int64_t m_step = 0;
  std::string m_fifo;
};

}  // namespace netloom
