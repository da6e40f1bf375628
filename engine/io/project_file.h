// Reading and writing *.nlproj files (protobuf text format). Parse errors name the
// file, line and column; saves are atomic.
#pragma once

#include <string>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

Result<proto::Project> parseProject(const std::string& text, const std::string& fileName);
Result<proto::Project> loadProject(const std::string& path);
std::string projectToText(const proto::Project& project);
// A block definition (a ModelDef) in text format, as the block library holds it.
Result<proto::ModelDef> parseBlock(const std::string& text, const std::string& fileName);
std::string blockToText(const proto::ModelDef& block);
Status saveProject(const std::string& path, const proto::Project& project);

}  // namespace netloom
