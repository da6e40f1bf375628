// The block library that ships with NetLoom (resources/blocks, compiled in as Qt
// resources): ready-made blocks a user drops like any op. Dropping one copies its
// definition into the project, where it is the project's own from then on.
#pragma once

#include <string>
#include <vector>

#include "engine/proto/project.pb.h"

namespace netloom::editor {

// Every library block, by name; parsed once.
const std::vector<proto::ModelDef>& libraryBlocks();
const proto::ModelDef* libraryBlock(const std::string& name);

}  // namespace netloom::editor
