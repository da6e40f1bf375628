// Shared by pool.cpp and norm.cpp (not exported): their registration functions.
#pragma once

#include "kernels/cpu/dnnl_util.h"

namespace netloom::cpu {

void registerPooling(KernelRegistry& r);
void registerNormalization(KernelRegistry& r);

}  // namespace netloom::cpu
