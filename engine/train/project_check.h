// Checks a project's settings before a run uses any of them: every value that is
// out of range, not finite, or an enum this build does not know is an error naming
// the field; values PyTorch accepts but that rarely mean what was meant are warnings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

// More threads than this is a typo, not a machine: OpenMP would try to start them all.
constexpr int kMaxThreads = 1024;

// Errors name the field ("train.optimizer.eps"); `warnings` (may be null) gets one
// line per accepted but suspicious value.
Status checkProject(const proto::Project& project, std::vector<std::string>* warnings = nullptr);

// Every enum field of `message`, at any depth, holds a value its enum defines.
// `path` prefixes the field names in the message ("train").
Status checkEnums(const google::protobuf::Message& message, const std::string& path = "");

}  // namespace netloom
