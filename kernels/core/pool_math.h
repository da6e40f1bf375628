// The arithmetic of one pooling window, written once for the CPU's kernels and the
// GPU's (NL_HD): where a window reads, its first maximum and its divisor, as PyTorch
// defines them. CPU tests check it; the CUDA kernels that run where cuDNN's pooling
// cannot express a configuration run the same code.
#pragma once

#include <cstdint>

#include "kernels/core/geometry.h"
#include "kernels/core/hd.h"

namespace netloom::pool {

// Where output index `o` reads along one axis: [lo, hi) inside the input, and the
// window's length inside the explicitly padded input. Windows that ceil_mode adds
// may reach past the explicit padding; as in PyTorch, those positions never count.
struct Span {
  int64_t lo, hi, padded;
};

NL_HD inline Span span(int64_t o, int64_t stride, int64_t k, int64_t pad, int64_t in) {
  int64_t start = o * stride - pad;
  int64_t end = start + k < in + pad ? start + k : in + pad;
  return {start > 0 ? start : 0, end < in ? end : in, end - start};
}

// The first maximum of a window in row-major order; the first NaN wins, as in
// PyTorch. A plane's elements lie `step` floats apart (16 in nChw16c).
NL_HD inline int64_t argmax(const float* plane, int64_t iw, const Span& r, const Span& c,
                            int64_t step = 1) {
  float best = -__builtin_huge_valf();
  int64_t at = r.lo * iw + c.lo;
  for (int64_t y = r.lo; y < r.hi; ++y)
    for (int64_t x = c.lo; x < c.hi; ++x) {
      float v = plane[(y * iw + x) * step];
      if (v != v) return y * iw + x;
      if (v > best) best = v, at = y * iw + x;
    }
  return at;
}

// An average window's divisor: its padded size with count_include_pad, else the
// input positions it covers.
NL_HD inline float divisor(const Span& r, const Span& c, bool includePad) {
  return includePad ? float(r.padded * c.padded) : float((r.hi - r.lo) * (c.hi - c.lo));
}

NL_HD inline float windowSum(const float* plane, int64_t iw, const Span& r, const Span& c) {
  float sum = 0.f;
  for (int64_t y = r.lo; y < r.hi; ++y)
    for (int64_t x = c.lo; x < c.hi; ++x) sum += plane[y * iw + x];
  return sum;
}

// The outputs along one axis whose windows may cover input index i: [first, last].
// Callers check each with span(), since ceil_mode's last window may be cut short.
NL_HD inline void covering(int64_t i, int64_t stride, int64_t k, int64_t pad, int64_t out,
                           int64_t& first, int64_t& last) {
  int64_t hiStart = i + pad;          // the latest window start that covers i
  int64_t loStart = hiStart - k + 1;  // the earliest
  first = loStart <= 0 ? 0 : (loStart + stride - 1) / stride;
  last = hiStart / stride < out - 1 ? hiStart / stride : out - 1;
}

// Output (oy, ox) of one N·C plane of x.
NL_HD inline float forwardAt(const float* plane, const Window2d& w, int64_t oy, int64_t ox,
                             bool average, bool includePad) {
  Span r = span(oy, w.sh, w.kh, w.padTop, w.ih), c = span(ox, w.sw, w.kw, w.padLeft, w.iw);
  return average ? windowSum(plane, w.iw, r, c) / divisor(r, c, includePad)
                 : plane[argmax(plane, w.iw, r, c)];
}

// dx at input (iy, ix) of one plane, gathered: over the windows that cover it, in
// output order and from 0.f, their share of dy (all of dy[o] where it is the window's
// first maximum, for max pooling; dy[o] / divisor, for average pooling). The same sum,
// in the same order, as scattering each dy[o] over its window output by output.
// `plane` (x) is read by max pooling only.
NL_HD inline float gradientAt(const float* grad, const float* plane, const Window2d& w, int64_t iy,
                              int64_t ix, bool average, bool includePad) {
  int64_t oy0, oy1, ox0, ox1;
  covering(iy, w.sh, w.kh, w.padTop, w.oh, oy0, oy1);
  covering(ix, w.sw, w.kw, w.padLeft, w.ow, ox0, ox1);
  float acc = 0.f;
  for (int64_t oy = oy0; oy <= oy1; ++oy) {
    Span r = span(oy, w.sh, w.kh, w.padTop, w.ih);
    if (iy < r.lo || iy >= r.hi) continue;
    for (int64_t ox = ox0; ox <= ox1; ++ox) {
      Span c = span(ox, w.sw, w.kw, w.padLeft, w.iw);
      if (ix < c.lo || ix >= c.hi) continue;
      float g = grad[oy * w.ow + ox];
      if (average)
        acc += g / divisor(r, c, includePad);
      else if (argmax(plane, w.iw, r, c) == iy * w.iw + ix)
        acc += g;
    }
  }
  return acc;
}

}  // namespace netloom::pool
