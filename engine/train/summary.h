// The model summary `netloom-train --summary` prints (and the editor's summary panel
// shows): per node its output shape, parameters, forward FLOPs and activation
// memory, and the totals, in the spirit of torchinfo.
#pragma once

#include <string>
#include <vector>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"
#include "kernels/core/tensor.h"

namespace netloom {

struct NodeSummary {
  std::string name, op;
  Shape output;            // the first output's shape, batch included
  int64_t parameters = 0;  // trainable elements
  int64_t flops = 0;       // forward, for the whole batch
  int64_t activationBytes = 0;
};

struct ModelSummary {
  int64_t batch = 1;
  std::vector<NodeSummary> nodes;  // in execution order
  int64_t parameters = 0, buffers = 0, flops = 0, activationBytes = 0;

  std::string table() const;
};

Result<ModelSummary> summarizeModel(const proto::ModelDef& model, int64_t batch);

}  // namespace netloom
