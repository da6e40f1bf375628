// bf16 tensors for the float kernels of any device: a kernel's widened twin converts
// each bf16 input to float in its launch's workspace, runs the float kernel there, and
// rounds each bf16 output back (as CastBf16 rounds). The device gives the two copies.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/core/kernel.h"

namespace netloom {

// n values from bf16 to float, and from float to bf16 (rounded to nearest even), on the
// device whose memory the pointers are in, in the order of its launches.
struct HalfCopies {
  std::function<void(const uint16_t*, float*, int64_t)> widen;
  std::function<void(const float*, uint16_t*, int64_t)> narrow;
};

// The copies a launch of a kernel prepared for `s` makes (a GPU's are on s's stream).
using HalfCopiesFor = std::function<HalfCopies(const KernelSig& s)>;

// `inner`'s twin for signatures with bf16 tensors (KernelRegistry::widenHalf). It
// declines a signature without them, and otherwise whatever `inner` declines of it
// with bf16 read as float.
KernelImpl widenedTwin(const KernelImpl& inner, const HalfCopiesFor& copies);

// What a copy (the shape ops' kernels) declines: it keeps its input's type, or converts
// between float32 and bf16 in the same pass, where bf16 storage moved a rounding into it.
std::string declineConvertingCopy(const KernelSig& s);

}  // namespace netloom
