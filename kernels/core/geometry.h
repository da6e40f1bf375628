// Window geometry of convolutions and pooling, shared by shape inference in the
// engine and by every kernel, so both always agree on sizes and padding.
#pragma once

#include <string>

#include "kernels/core/attrs.h"
#include "kernels/core/tensor.h"

namespace netloom {

// A 2-D sliding window over N×C×H×W. Padding may be asymmetric ("same").
struct Window2d {
  int64_t n = 0, c = 0, ih = 0, iw = 0;  // input
  int64_t oh = 0, ow = 0;                // output spatial size
  int64_t kh = 1, kw = 1;                // kernel
  int64_t sh = 1, sw = 1;                // stride
  int64_t dh = 1, dw = 1;                // dilation
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
};

// Reads a 1- or 2-element ints attribute as (h, w); `def` when absent or empty.
bool pair2d(const Attrs& a, const std::string& name, int64_t def, int64_t& h, int64_t& w);

// Convolution: attributes kernel_size, stride, padding, same_padding, dilation over
// an input N×C×H×W. Returns an error text naming the attribute, or empty.
std::string convWindow(const Attrs& a, const Shape& x, Window2d& w);

// Transposed convolution: output = (in - 1)·stride - 2·padding + dilation·(k - 1)
// + output_padding + 1.
std::string convTransposeWindow(const Attrs& a, const Shape& x, Window2d& w);

// Pooling: kernel_size, stride (empty: the kernel size), padding, ceil_mode.
std::string poolWindow(const Attrs& a, const Shape& x, Window2d& w);

}  // namespace netloom
