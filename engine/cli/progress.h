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

 private:
  void drawStep(const proto::Step& s);

  std::FILE* m_out;
  bool m_tty;
  int64_t m_totalSteps = 0;
  int m_epochs = 0;
  double m_smoothedLoss = -1;
  double m_startSeconds = -1;
  double m_lastDraw = -1;
};

}  // namespace netloom
