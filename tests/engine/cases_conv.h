// Op-harness cases for convolutions (Conv2d, ConvTranspose2d).
#pragma once

#include "op_harness.h"

namespace harness {

inline std::vector<std::pair<std::string, OpCase>> convCases() { return {}; }

}  // namespace harness
