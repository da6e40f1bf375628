// PyTorch code export: a project as readable PyTorch, a model.py whose nn.Module has
// NetLoom's parameter names (so load_state_dict reads a run's safetensors as they
// are) and a train.py with the project's optimizer, schedule, loss and data settings.
#pragma once

#include <string>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

// Writes model.py, train.py and README.md into `outDir` (made if missing).
// `projectDir` resolves the project's relative data paths.
Status exportPytorch(const proto::Project& project, const std::string& projectDir,
                     const std::string& outDir);

}  // namespace netloom
