// Op-harness cases for pooling, normalisation and resampling (MaxPool2d, AvgPool2d,
// GlobalAvgPool2d, BatchNorm, LayerNorm, Upsample). The references follow PyTorch's
// definitions directly (output sizes, ceil_mode, divisors), independently of the
// engine's geometry code.
#pragma once

#include <algorithm>
#include <cmath>

#include "op_harness.h"

namespace harness {

namespace norm_ref {

struct Pool {
  int64_t kh, kw, sh, sw, ph, pw;
  bool ceil = false, includePad = true;
};

// PyTorch's pooling_output_shape: the last window must start inside the input or
// its left padding.
inline int64_t poolOut(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil) {
  int64_t o = (in + 2 * p - k + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// Max (average = false) or average pooling of N×C×H×W.
inline Vec pool(const RefArgs& a, const Pool& p, bool average) {
  const Shape& s = a.inShapes[0];
  int64_t n = s[0], c = s[1], ih = s[2], iw = s[3];
  int64_t oh = poolOut(ih, p.kh, p.sh, p.ph, p.ceil), ow = poolOut(iw, p.kw, p.sw, p.pw, p.ceil);
  Vec y;
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t hs = oy * p.sh - p.ph, ws = ox * p.sw - p.pw;
        // As PyTorch's avg_pool2d: the padded extent stops at the explicit padding.
        int64_t he = std::min(hs + p.kh, ih + p.ph), we = std::min(ws + p.kw, iw + p.pw);
        double padded = double((he - hs) * (we - ws));
        hs = std::max<int64_t>(hs, 0), ws = std::max<int64_t>(ws, 0);
        he = std::min(he, ih), we = std::min(we, iw);
        double best = -INFINITY, sum = 0;
        for (int64_t yy = hs; yy < he; ++yy)
          for (int64_t xx = ws; xx < we; ++xx) {
            double v = a.in[0][(plane * ih + yy) * iw + xx];
            best = std::max(best, v);
            sum += v;
          }
        double div = p.includePad ? padded : double((he - hs) * (we - ws));
        y.push_back(average ? sum / div : best);
      }
  return y;
}

inline Vec globalAvg(const RefArgs& a) {
  const Shape& s = a.inShapes[0];
  int64_t area = s[2] * s[3];
  Vec y(s[0] * s[1], 0.0);
  for (size_t i = 0; i < a.in[0].size(); ++i) y[i / area] += a.in[0][i] / double(area);
  return y;
}

// Training-mode BatchNorm: batch statistics over N and every position.
inline Vec batchNorm(const RefArgs& a, double eps) {
  const Shape& s = a.inShapes[0];
  int64_t n = s[0], c = s[1], sp = count(s) / (n * c);
  Vec y(a.in[0].size());
  for (int64_t ch = 0; ch < c; ++ch) {
    auto at = [&](int64_t b, int64_t i) { return (b * c + ch) * sp + i; };
    double mean = 0, var = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < sp; ++i) mean += a.in[0][at(b, i)] / double(n * sp);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < sp; ++i)
        var += std::pow(a.in[0][at(b, i)] - mean, 2) / double(n * sp);
    double w = a.params.empty() ? 1.0 : a.params[0][ch],
           bias = a.params.empty() ? 0.0 : a.params[1][ch];
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < sp; ++i)
        y[at(b, i)] = (a.in[0][at(b, i)] - mean) / std::sqrt(var + eps) * w + bias;
  }
  return y;
}

inline Vec layerNorm(const RefArgs& a, int64_t dims, double eps) {
  const Shape& s = a.inShapes[0];
  int64_t cols = 1;
  for (size_t i = s.size() - dims; i < s.size(); ++i) cols *= s[i];
  int64_t rows = count(s) / cols;
  Vec y(a.in[0].size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = &a.in[0][r * cols];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) mean += x[j] / double(cols);
    for (int64_t j = 0; j < cols; ++j) var += (x[j] - mean) * (x[j] - mean) / double(cols);
    for (int64_t j = 0; j < cols; ++j) {
      double w = a.params.empty() ? 1.0 : a.params[0][j],
             b = a.params.empty() ? 0.0 : a.params[1][j];
      y[r * cols + j] = (x[j] - mean) / std::sqrt(var + eps) * w + b;
    }
  }
  return y;
}

inline Vec upsample(const RefArgs& a, int64_t sh, int64_t sw) {
  const Shape& s = a.inShapes[0];
  int64_t ih = s[2], iw = s[3], oh = ih * sh, ow = iw * sw;
  Vec y;
  for (int64_t plane = 0; plane < s[0] * s[1]; ++plane)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        y.push_back(a.in[0][(plane * ih + oy / sh) * iw + ox / sw]);
  return y;
}

}  // namespace norm_ref

inline std::vector<std::pair<std::string, OpCase>> normCases() {
  using namespace norm_ref;
  using I = int64_t;
  std::vector<std::pair<std::string, OpCase>> c;
  auto add = [&](std::string name, OpCase oc) { c.push_back({std::move(name), std::move(oc)}); };

  // Pooling: attributes as the user writes them, and the same geometry for the reference.
  auto pooling = [&](std::string name, bool average, Shape x, Pool p, bool stride = true,
                     bool pad = true) {
    std::map<std::string, AttrVal> attrs = {{"kernel_size", Shape{p.kh, p.kw}}};
    if (stride) attrs["stride"] = Shape{p.sh, p.sw};
    if (pad) attrs["padding"] = Shape{p.ph, p.pw};
    if (p.ceil) attrs["ceil_mode"] = true;
    if (average) attrs["count_include_pad"] = p.includePad;
    add(std::move(name),
        {average ? "AvgPool2d" : "MaxPool2d", attrs, {{x}}, [p, average](const RefArgs& a) {
           return pool(a, p, average);
         }});
  };
  add("maxpool 2x2 s2 (defaults)",
      {"MaxPool2d", {{"kernel_size", Shape{2}}}, {{{2, 3, 4, 4}}}, [](const RefArgs& a) {
         return pool(a, {2, 2, 2, 2, 0, 0}, false);
       }});
  pooling("maxpool 3x3 s2 p1", false, {2, 2, 5, 5}, {3, 3, 2, 2, 1, 1});
  pooling("maxpool ceil_mode", false, {1, 2, 5, 5}, {2, 2, 2, 2, 0, 0, true});
  pooling("maxpool ceil_mode 3x3 s2 p1", false, {1, 2, 6, 6}, {3, 3, 2, 2, 1, 1, true});
  pooling("maxpool rectangular", false, {2, 2, 6, 5}, {3, 2, 2, 1, 1, 0});
  pooling("avgpool 2x2", true, {2, 3, 4, 4}, {2, 2, 2, 2, 0, 0}, false, false);
  pooling("avgpool 3x3 s2 p1 include pad", true, {2, 2, 5, 5}, {3, 3, 2, 2, 1, 1});
  pooling("avgpool 3x3 s2 p1 exclude pad", true, {2, 2, 5, 5}, {3, 3, 2, 2, 1, 1, false, false});
  pooling("avgpool overlapping s1 p1", true, {1, 2, 4, 4}, {3, 3, 1, 1, 1, 1});
  pooling("avgpool ceil_mode include pad", true, {1, 2, 6, 6}, {3, 3, 2, 2, 1, 1, true, true});
  pooling("avgpool ceil_mode exclude pad", true, {1, 2, 6, 6}, {3, 3, 2, 2, 1, 1, true, false});
  pooling("avgpool ceil_mode no padding", true, {1, 2, 5, 5}, {2, 2, 2, 2, 0, 0, true, true});
  pooling("avgpool rectangular", true, {2, 1, 5, 6}, {2, 3, 1, 2, 1, 1, false, false});

  add("global avg pool", {"GlobalAvgPool2d", {}, {{{2, 3, 4, 5}}}, globalAvg});
  add("global avg pool keepdim",
      {"GlobalAvgPool2d", {{"keepdim", true}}, {{{2, 3, 3, 2}}}, globalAvg});

  auto bn = [](const RefArgs& a) { return batchNorm(a, 1e-5); };
  add("batchnorm N×C", {"BatchNorm", {}, {{{6, 16}}}, bn});
  add("batchnorm N×C no affine", {"BatchNorm", {{"affine", false}}, {{{5, 4}}}, bn});
  add("batchnorm N×C×L", {"BatchNorm", {{"num_features", I(2)}}, {{{3, 2, 5}}}, bn});
  add("batchnorm N×C×H×W", {"BatchNorm", {}, {{{3, 2, 3, 4}}}, bn});
  add("batchnorm N×C×H×W no affine", {"BatchNorm", {{"affine", false}}, {{{2, 3, 2, 3}}}, bn});
  add("batchnorm eps", {"BatchNorm", {{"eps", 0.1}}, {{{4, 2, 2, 2}}}, [](const RefArgs& a) {
                          return batchNorm(a, 0.1);
                        }});

  auto ln = [](int64_t dims) {
    return [dims](const RefArgs& a) { return layerNorm(a, dims, 1e-5); };
  };
  add("layernorm last dim", {"LayerNorm", {}, {{{4, 6}}}, ln(1)});
  add("layernorm last dim of 3", {"LayerNorm", {}, {{{2, 3, 5}}}, ln(1)});
  add("layernorm last dim no affine", {"LayerNorm", {{"affine", false}}, {{{4, 6}}}, ln(1)});
  add("layernorm two dims", {"LayerNorm", {{"normalized_dims", I(2)}}, {{{3, 4, 5}}}, ln(2)});
  add("layernorm two dims no affine",
      {"LayerNorm", {{"normalized_dims", I(2)}, {"affine", false}}, {{{2, 3, 4}}}, ln(2)});

  add("upsample 2",
      {"Upsample", {}, {{{2, 2, 3, 3}}}, [](const RefArgs& a) { return upsample(a, 2, 2); }});
  add("upsample [2, 3]",
      {"Upsample", {{"scale_factor", Shape{2, 3}}}, {{{1, 2, 2, 3}}}, [](const RefArgs& a) {
         return upsample(a, 2, 3);
       }});
  return c;
}

}  // namespace harness
