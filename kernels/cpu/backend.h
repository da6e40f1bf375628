// The CPU backend: its device and its kernels, as kernels/backends.cpp lists them.
#pragma once

#include "kernels/core/device.h"

namespace netloom::cpu {

Backend backend();

}  // namespace netloom::cpu
