// The terminal progress line of netloom-train: a bar, epoch and step, live loss,
// throughput and ETA, redrawn in place on a terminal and printed per epoch otherwise.
#pragma once

#include <cstdio>

#include "engine/proto/events.pb.h"

namespace netloom {

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::FILE* out);
  void onEvent(const proto::TrainEvent& e);
  // While catching up with a stream written before (netloom-job attach), events are
  // taken in but nothing is printed; caughtUp() then prints where the run is.
  void setCatchingUp(bool on) { m_catchingUp = on; }
  void caughtUp();

 private:
  void drawStep(const proto::Step& s);

  std::FILE* m_out;
  bool m_tty;
  int64_t m_totalSteps = 0;
  int m_epochs = 0;
  double m_smoothedLoss = -1;
  double m_startSeconds = -1;
  double m_lastDraw = -1;
  bool m_catchingUp = false;
  proto::TrainEvent m_last;  // the last event taken in
  int64_t m_lastStep = 0;
  int m_lastEpoch = 0;
};

}  // namespace netloom
