// Op-harness cases for convolutions (Conv2d, ConvTranspose2d). The references are
// direct loops in double that work out sizes and "same" padding on their own, so
// they check the engine's geometry as well as its kernels.
#pragma once

#include "op_harness.h"

namespace harness {

struct ConvSpec {
  int64_t sh = 1, sw = 1;  // stride
  int64_t ph = 0, pw = 0;  // padding on each side
  int64_t dh = 1, dw = 1;  // dilation
  int64_t groups = 1;
  bool same = false;         // TensorFlow "same": output ceil(in / stride), extra at the end
  int64_t oph = 0, opw = 0;  // output_padding (transposed only)
};

// y[n, o, oy, ox] = b[o] + Σ x[n, c, oy·s - pad + ky·d, ox·s - pad + kx·d] · w[o, c', ky, kx]
inline Vec conv2dRef(const RefArgs& a, const ConvSpec& p) {
  const Shape &xs = a.inShapes[0], &ws = a.paramShapes[0];
  int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  int64_t o = ws[0], cig = ws[1], kh = ws[2], kw = ws[3], cog = o / p.groups;
  int64_t padTop = p.ph, padLeft = p.pw, oh, ow;
  if (p.same) {
    oh = (h + p.sh - 1) / p.sh, ow = (w + p.sw - 1) / p.sw;
    padTop = std::max<int64_t>(0, (oh - 1) * p.sh + (kh - 1) * p.dh + 1 - h) / 2;
    padLeft = std::max<int64_t>(0, (ow - 1) * p.sw + (kw - 1) * p.dw + 1 - w) / 2;
  } else {
    oh = (h + 2 * p.ph - (kh - 1) * p.dh - 1) / p.sh + 1;
    ow = (w + 2 * p.pw - (kw - 1) * p.dw - 1) / p.sw + 1;
  }
  const Vec &x = a.in[0], &wt = a.params[0];
  Vec y(n * o * oh * ow);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double s = a.params.size() > 1 ? a.params[1][oc] : 0.0;
          for (int64_t ic = 0; ic < cig; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy = oy * p.sh - padTop + ky * p.dh, ix = ox * p.sw - padLeft + kx * p.dw;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                int64_t xc = oc / cog * cig + ic;
                s +=
                    x[((b * c + xc) * h + iy) * w + ix] * wt[((oc * cig + ic) * kh + ky) * kw + kx];
              }
          y[((b * o + oc) * oh + oy) * ow + ox] = s;
        }
  return y;
}

// Every input pixel scatters x[n, c, iy, ix] · w[c, o', ky, kx] to y[n, o, iy·s - pad
// + ky·d, ix·s - pad + kx·d]; the weight is [in, out/groups, kh, kw] as in PyTorch.
inline Vec convTranspose2dRef(const RefArgs& a, const ConvSpec& p) {
  const Shape &xs = a.inShapes[0], &ws = a.paramShapes[0];
  int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  int64_t cog = ws[1], kh = ws[2], kw = ws[3], o = cog * p.groups, cig = c / p.groups;
  int64_t oh = (h - 1) * p.sh - 2 * p.ph + (kh - 1) * p.dh + p.oph + 1;
  int64_t ow = (w - 1) * p.sw - 2 * p.pw + (kw - 1) * p.dw + p.opw + 1;
  const Vec &x = a.in[0], &wt = a.params[0];
  Vec y(n * o * oh * ow, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < oh * ow; ++i)
        y[(b * o + oc) * oh * ow + i] = a.params.size() > 1 ? a.params[1][oc] : 0.0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < w; ++ix)
          for (int64_t ol = 0; ol < cog; ++ol)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t oy = iy * p.sh - p.ph + ky * p.dh, ox = ix * p.sw - p.pw + kx * p.dw;
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                int64_t oc = ic / cig * cog + ol;
                y[((b * o + oc) * oh + oy) * ow + ox] +=
                    x[((b * c + ic) * h + iy) * w + ix] * wt[((ic * cog + ol) * kh + ky) * kw + kx];
              }
  return y;
}

inline std::map<std::string, AttrVal> convCaseAttrs(int64_t out, Shape kernel, const ConvSpec& p,
                                                    bool transposed, bool bias = true) {
  std::map<std::string, AttrVal> a = {{"out_channels", out},
                                      {"kernel_size", kernel},
                                      {"stride", Shape{p.sh, p.sw}},
                                      {"padding", Shape{p.ph, p.pw}},
                                      {"dilation", Shape{p.dh, p.dw}},
                                      {"groups", p.groups},
                                      {"bias", bias}};
  if (transposed)
    a["output_padding"] = Shape{p.oph, p.opw};
  else
    a["same_padding"] = p.same;
  return a;
}

inline std::vector<std::pair<std::string, OpCase>> convCases() {
  std::vector<std::pair<std::string, OpCase>> c;
  auto conv = [&](std::string name, Shape x, int64_t out, Shape k, ConvSpec p, bool bias = true) {
    c.push_back({"conv2d " + name,
                 {"Conv2d", convCaseAttrs(out, k, p, false, bias), {{x}}, [p](const RefArgs& a) {
                    return conv2dRef(a, p);
                  }}});
  };
  auto deconv = [&](std::string name, Shape x, int64_t out, Shape k, ConvSpec p, bool bias = true) {
    c.push_back(
        {"conv transpose " + name,
         {"ConvTranspose2d", convCaseAttrs(out, k, p, true, bias), {{x}}, [p](const RefArgs& a) {
            return convTranspose2dRef(a, p);
          }}});
  };

  conv("3x3", {2, 3, 5, 5}, 4, {3}, {});
  conv("1x1", {2, 4, 3, 3}, 3, {1}, {});
  conv("pad 1", {2, 2, 6, 6}, 3, {3}, {.ph = 1, .pw = 1});
  conv("stride 2 pad 1", {1, 3, 7, 7}, 2, {3}, {.sh = 2, .sw = 2, .ph = 1, .pw = 1});
  // 6 rows: total padding 1, all at the bottom; 5 columns: 1 on each side.
  conv("same stride 2 asymmetric", {2, 2, 6, 5}, 3, {3}, {.sh = 2, .sw = 2, .same = true});
  // An even kernel: padding 1 on top, 2 at the bottom.
  conv("same 4x4 stride 1", {1, 2, 5, 5}, 2, {4}, {.same = true});
  conv("same dilation 2 stride 2", {1, 2, 7, 6}, 2, {3},
       {.sh = 2, .sw = 2, .dh = 2, .dw = 2, .same = true});
  conv("dilation 2", {2, 2, 7, 7}, 3, {3}, {.ph = 1, .pw = 1, .dh = 2, .dw = 2});
  conv("groups 2", {2, 4, 5, 5}, 6, {3}, {.ph = 1, .pw = 1, .groups = 2});
  conv("depthwise stride 2", {2, 4, 6, 6}, 4, {3},
       {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 4});
  conv("no bias", {2, 3, 5, 5}, 2, {3}, {.ph = 1, .pw = 1}, false);
  conv("kernel 2x3 stride 1x2 pad 1x0", {2, 2, 5, 7}, 3, {2, 3}, {.sw = 2, .ph = 1});

  deconv("3x3", {2, 3, 4, 4}, 2, {3}, {});
  deconv("stride 2 pad 1 output_padding 1", {2, 2, 3, 3}, 3, {3},
         {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .oph = 1, .opw = 1});
  // output_padding above the padding: the equivalent convolution has negative
  // bottom/right padding.
  deconv("stride 2 output_padding 1 no padding", {1, 2, 3, 3}, 2, {3},
         {.sh = 2, .sw = 2, .oph = 1, .opw = 1});
  deconv("groups 2 stride 2", {2, 4, 3, 3}, 6, {3},
         {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 2});
  deconv("depthwise", {1, 3, 4, 4}, 3, {3}, {.ph = 1, .pw = 1, .groups = 3});
  deconv("no bias kernel 2x3 stride 2", {1, 2, 4, 3}, 2, {2, 3}, {.sh = 2, .sw = 2}, false);
  deconv("dilation 2", {2, 2, 3, 3}, 2, {3}, {.ph = 1, .pw = 1, .dh = 2, .dw = 2});
  return c;
}

}  // namespace harness
