// The optimizer of a project's TrainDef with every default applied, as torch.optim has
// them: what the update ops compute with, what the IDE shows and what the PyTorch
// export writes.
#pragma once

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

struct OptimizerSettings {
  proto::Optimizer::Kind kind = proto::Optimizer::ADAM;
  double lr = 1e-3, momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
  bool nesterov = false;
};
Result<OptimizerSettings> optimizerSettings(const proto::Optimizer& opt);

}  // namespace netloom
