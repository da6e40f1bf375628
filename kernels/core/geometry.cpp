#include "kernels/core/geometry.h"

namespace netloom {

bool pair2d(const Attrs& a, const std::string& name, int64_t def, int64_t& h, int64_t& w) {
  std::vector<int64_t> v = a.ints(name);
  if (v.empty()) {
    h = w = def;
    return true;
  }
  if (v.size() > 2) return false;
  h = v[0];
  w = v.size() == 2 ? v[1] : v[0];
  return true;
}

namespace {

std::string readCommon(const Attrs& a, const Shape& x, Window2d& w, bool pool) {
  if (x.size() != 4) return "expects N×C×H×W, got " + shapeToString(x);
  w.n = x[0], w.c = x[1], w.ih = x[2], w.iw = x[3];
  if (!pair2d(a, "kernel_size", 1, w.kh, w.kw))
    return "attribute 'kernel_size' takes 1 or 2 values";
  int64_t sdef = pool ? -1 : 1;
  if (!pair2d(a, "stride", sdef, w.sh, w.sw)) return "attribute 'stride' takes 1 or 2 values";
  if (w.sh == -1) w.sh = w.kh, w.sw = w.kw;
  if (w.sh < 1 || w.sw < 1) return "attribute 'stride' must be at least 1";
  if (!pair2d(a, "dilation", 1, w.dh, w.dw)) return "attribute 'dilation' takes 1 or 2 values";
  int64_t ph = 0, pw = 0;
  if (!pair2d(a, "padding", 0, ph, pw)) return "attribute 'padding' takes 1 or 2 values";
  if (ph < 0 || pw < 0) return "attribute 'padding' must not be negative";
  w.padTop = w.padBottom = ph;
  w.padLeft = w.padRight = pw;
  return {};
}

std::string checkFits(const Window2d& w) {
  int64_t ekh = (w.kh - 1) * w.dh + 1, ekw = (w.kw - 1) * w.dw + 1;
  if (ekh > w.ih + w.padTop + w.padBottom || ekw > w.iw + w.padLeft + w.padRight)
    return "attribute 'kernel_size' " + std::to_string(w.kh) + "×" + std::to_string(w.kw) +
           (w.dh > 1 || w.dw > 1
                ? " (dilated " + std::to_string(ekh) + "×" + std::to_string(ekw) + ")"
                : "") +
           " is larger than the padded input " + std::to_string(w.ih + w.padTop + w.padBottom) +
           "×" + std::to_string(w.iw + w.padLeft + w.padRight);
  return {};
}

}  // namespace

std::string convWindow(const Attrs& a, const Shape& x, Window2d& w) {
  if (std::string e = readCommon(a, x, w, false); !e.empty()) return e;
  int64_t ekh = (w.kh - 1) * w.dh + 1, ekw = (w.kw - 1) * w.dw + 1;
  if (a.b("same_padding")) {
    // TensorFlow's "same": output = ceil(input / stride), extra padding at the end.
    w.oh = (w.ih + w.sh - 1) / w.sh;
    w.ow = (w.iw + w.sw - 1) / w.sw;
    int64_t th = std::max<int64_t>(0, (w.oh - 1) * w.sh + ekh - w.ih);
    int64_t tw = std::max<int64_t>(0, (w.ow - 1) * w.sw + ekw - w.iw);
    w.padTop = th / 2, w.padBottom = th - th / 2;
    w.padLeft = tw / 2, w.padRight = tw - tw / 2;
  }
  if (std::string e = checkFits(w); !e.empty()) return e;
  w.oh = (w.ih + w.padTop + w.padBottom - ekh) / w.sh + 1;
  w.ow = (w.iw + w.padLeft + w.padRight - ekw) / w.sw + 1;
  return {};
}

std::string convTransposeWindow(const Attrs& a, const Shape& x, Window2d& w) {
  if (std::string e = readCommon(a, x, w, false); !e.empty()) return e;
  int64_t oph = 0, opw = 0;
  if (!pair2d(a, "output_padding", 0, oph, opw))
    return "attribute 'output_padding' takes 1 or 2 values";
  if (oph >= std::max(w.sh, w.dh) || opw >= std::max(w.sw, w.dw) || oph < 0 || opw < 0)
    return "attribute 'output_padding' must be smaller than the stride or the dilation";
  w.oh = (w.ih - 1) * w.sh - 2 * w.padTop + w.dh * (w.kh - 1) + oph + 1;
  w.ow = (w.iw - 1) * w.sw - 2 * w.padLeft + w.dw * (w.kw - 1) + opw + 1;
  // The bottom/right padding that makes the forward convolution of the output give
  // back the input size exactly (output_padding adds rows the convolution skips).
  w.padBottom = w.padTop - oph;
  w.padRight = w.padLeft - opw;
  if (w.oh < 1 || w.ow < 1)
    return "the output would be empty (" + std::to_string(w.oh) + "×" + std::to_string(w.ow) +
           "): reduce 'padding'";
  return {};
}

std::string poolWindow(const Attrs& a, const Shape& x, Window2d& w) {
  if (std::string e = readCommon(a, x, w, true); !e.empty()) return e;
  if (w.padTop * 2 > w.kh || w.padLeft * 2 > w.kw)
    return "attribute 'padding' must be at most half the kernel size";
  if (std::string e = checkFits(w); !e.empty()) return e;
  auto out = [&](int64_t in, int64_t pad, int64_t k, int64_t s) {
    int64_t span = in + 2 * pad - k;
    int64_t o = (a.b("ceil_mode") ? (span + s - 1) / s : span / s) + 1;
    // As PyTorch: the last window must start inside the input or its left padding.
    if (a.b("ceil_mode") && (o - 1) * s >= in + pad) --o;
    return o;
  };
  w.oh = out(w.ih, w.padTop, w.kh, w.sh);
  w.ow = out(w.iw, w.padLeft, w.kw, w.sw);
  // Windows that ceil_mode adds may run past the bottom/right padding.
  w.padBottom = std::max(w.padBottom, (w.oh - 1) * w.sh + w.kh - w.ih - w.padTop);
  w.padRight = std::max(w.padRight, (w.ow - 1) * w.sw + w.kw - w.iw - w.padLeft);
  return {};
}

}  // namespace netloom
