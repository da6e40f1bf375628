// The loss a run minimises and the output a trained model predicts with: as the
// project names them, else as its model implies (its one loss node, and what that
// loss reads). Training, evaluation, prediction and the IDE's checks ask here, so a
// network drawn without naming either trains and evaluates.
#pragma once

#include <string>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

// train.loss when set (it must name a node), else the model's only loss node. A run
// needs train.loss set (prepare refuses it unset); the IDE writes this one there.
Result<std::string> lossNode(const proto::Project& project);

// model.outputs[0] when set, else the first input of the loss ("node" or "node:port").
Result<std::string> predictionOutput(const proto::Project& project);

}  // namespace netloom
