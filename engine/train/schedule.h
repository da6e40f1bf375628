// Learning-rate schedules, computed on the host once per step.
#pragma once

#include <cstdint>

#include "engine/proto/project.pb.h"

namespace netloom {

// The rate for 1-based `step` of a run of `totalSteps`, `stepsPerEpoch` per epoch.
double learningRate(const proto::LrSchedule& s, double baseLr, int64_t step, int64_t stepsPerEpoch,
                    int64_t totalSteps);

}  // namespace netloom
