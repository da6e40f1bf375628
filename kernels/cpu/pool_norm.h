// Shared by pool.cpp, norm.cpp and layer_norm.cpp (not exported): their registration
// functions and the chunking they share.
#pragma once

#include <algorithm>

#include "kernels/cpu/dnnl_util.h"

namespace netloom::cpu {

void registerPooling(KernelRegistry& r);
void registerNormalization(KernelRegistry& r);  // BatchNorm
void registerLayerNorm(KernelRegistry& r);

}  // namespace netloom::cpu
