// Op-harness cases for pooling, normalisation and resampling (MaxPool2d, AvgPool2d,
// GlobalAvgPool2d, BatchNorm, LayerNorm, Upsample).
#pragma once

#include "op_harness.h"

namespace harness {

inline std::vector<std::pair<std::string, OpCase>> normCases() { return {}; }

}  // namespace harness
