// The parts of a tensor split along one axis into equal slices, as tensor parallelism
// lays them out: part k of `parts` along `axis` of a row-major tensor of `whole`
// shape is the k-th contiguous run of that axis. Host memory, any element size.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/core/tensor.h"

namespace netloom {

// The whole tensor's rows around `axis`: `outer` blocks of `axisLen × inner` elements.
struct AxisRuns {
  int64_t outer = 1, axisLen = 1, inner = 1;
  AxisRuns(const Shape& whole, int axis) {
    for (int i = 0; i < int(whole.size()); ++i) {
      if (i < axis) outer *= whole[size_t(i)];
      if (i == axis) axisLen = whole[size_t(i)];
      if (i > axis) inner *= whole[size_t(i)];
    }
  }
};

// Part `index` of `parts` as runs of bytes: `outer` runs of `run` bytes, one every
// `stride` bytes of the whole from `offset` on, and back to back in the part.
struct PartRuns {
  int64_t outer = 1, run = 0, stride = 0, offset = 0;
  PartRuns(const Shape& whole, int axis, int index, int parts, size_t elemBytes) {
    const AxisRuns r(whole, axis);
    outer = r.outer;
    run = r.axisLen / parts * r.inner * int64_t(elemBytes);
    stride = r.axisLen * r.inner * int64_t(elemBytes);
    offset = int64_t(index) * run;
  }
};

// Copies part `index` of `parts` along `axis` out of `whole` into the contiguous `part`.
inline void takePart(const void* whole, const Shape& shape, int axis, int index, int parts,
                     void* part, size_t elemBytes) {
  const PartRuns p(shape, axis, index, parts, elemBytes);
  const char* src = static_cast<const char*>(whole) + p.offset;
  char* dst = static_cast<char*>(part);
  for (int64_t o = 0; o < p.outer; ++o)
    std::memcpy(dst + o * p.run, src + o * p.stride, size_t(p.run));
}

// The reverse: the contiguous `part` written as part `index` of `whole`.
inline void putPart(const void* part, const Shape& shape, int axis, int index, int parts,
                    void* whole, size_t elemBytes) {
  const PartRuns p(shape, axis, index, parts, elemBytes);
  const char* src = static_cast<const char*>(part);
  char* dst = static_cast<char*>(whole) + p.offset;
  for (int64_t o = 0; o < p.outer; ++o)
    std::memcpy(dst + o * p.stride, src + o * p.run, size_t(p.run));
}

}  // namespace netloom
