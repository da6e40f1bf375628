// Reading and writing *.nlproj files (protobuf text format). Parse errors name the
// file, line and column; saves are atomic.
#pragma once

#include <string>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

Result<proto::Project> parseProject(const std::string& text, const std::string& fileName);
// The newest project format this build reads; a newer file is refused on load.
constexpr int32_t kProjectFormatVersion = 1;
// A project is text a person edits: anything larger is not one.
constexpr uint64_t kMaxProjectBytes = 64ull << 20;

// Refuses a project of a format newer than this build reads.
Status checkFormatVersion(const proto::Project& project);

// Reads a project file: a regular file of at most kMaxProjectBytes, in a format
// this build reads. Errors name the file, and the line and column of a syntax error.
Result<proto::Project> loadProject(const std::string& path);
// The project as text, as a person writes it (project_text.cpp): fields in the order
// the schema declares them, only those that differ from their defaults, one line per
// node and per short section. The comments of `original` (the text the project was
// read from) are kept: the file's head, and each comment before the top-level section
// or the node it stood before, where that section or node is still there.
std::string projectToText(const proto::Project& project, const std::string& original = {});
// A block definition (a ModelDef) in text format, as the block library holds it.
Result<proto::ModelDef> parseBlock(const std::string& text, const std::string& fileName);
std::string blockToText(const proto::ModelDef& block);
Status saveProject(const std::string& path, const proto::Project& project,
                   const std::string& original = {});

}  // namespace netloom
