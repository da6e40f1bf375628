// Per-op time breakdown of profiled runs (`netloom-train --profile`): where a
// training step's time goes, by op and kernel, and the costliest nodes.
#pragma once

#include <string>
#include <vector>

#include "engine/runtime/program.h"

namespace netloom {

struct ProfiledProgram {
  const Program* program = nullptr;
  std::vector<double> seconds;  // per plan step, summed over runs
  int64_t runs = 0;
};

std::string profileTable(const std::vector<ProfiledProgram>& runs);

}  // namespace netloom
