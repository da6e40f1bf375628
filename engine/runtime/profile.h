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

// `peakGflops` (the device's measured matrix-product peak, 0 where unknown) adds each
// matrix kernel's share of it beside its GFLOP/s.
std::string profileTable(const std::vector<ProfiledProgram>& runs, double peakGflops = 0,
                         const std::string& peakProbe = {});

// Floating-point operations of one run of the program's kernels: the sum of each
// step's (PlanStep::flops; ops that declare none count zero).
int64_t programFlops(const Program& p);

}  // namespace netloom
