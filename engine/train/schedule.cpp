#include "engine/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace netloom {

double learningRate(const proto::LrSchedule& s, double baseLr, int64_t step, int64_t stepsPerEpoch,
                    int64_t totalSteps) {
  double lr = baseLr;
  int64_t warm = s.warmup_steps();
  switch (s.kind()) {
    case proto::LrSchedule::STEP: {
      int64_t every = std::max<int64_t>(1, s.step_epochs());
      int64_t epoch = (step - 1) / std::max<int64_t>(1, stepsPerEpoch);
      double gamma = s.gamma() > 0 ? s.gamma() : 0.1;
      lr = baseLr * std::pow(gamma, double(epoch / every));
      break;
    }
    case proto::LrSchedule::COSINE: {
      // Anneals over the steps after warm-up towards min_lr.
      double span = double(std::max<int64_t>(1, totalSteps - warm));
      // As torch.optim.lr_scheduler.CosineAnnealingLR stepped once per step: the
      // first step runs at the base rate.
      double t = std::clamp(double(step - 1 - warm) / span, 0.0, 1.0);
      lr = s.min_lr() + 0.5 * (baseLr - s.min_lr()) * (1.0 + std::cos(M_PI * t));
      break;
    }
    default: break;
  }
  if (warm > 0 && step <= warm) lr *= double(step) / double(warm);
  return lr;
}

}  // namespace netloom
