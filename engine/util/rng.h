#pragma once
#include "kernels/core/rng.h"
