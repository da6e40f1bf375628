// The CUDA backend: devices through the CUDA runtime (linked statically, never the
// driver library), kernels on cuBLASLt, cuDNN 9 and our own from the shared functors.
#pragma once

#include "kernels/core/device.h"

namespace netloom::cuda {

Backend backend();

}  // namespace netloom::cuda
