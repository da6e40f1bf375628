// Pooling and nearest upsampling on the CPU. oneDNN's pooling comes first where its
// semantics match PyTorch's; the reference kernels own whole N·C planes per thread,
// so overlapping windows accumulate in a fixed order and results do not depend on
// the thread count.
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/core/functors.h"
#include "kernels/core/geometry.h"
#include "kernels/core/pool_math.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/pool_norm.h"

namespace netloom::cpu {
namespace {

using dnnl::memory;

Window2d poolGeometry(const KernelSig& s, int xIndex) {
  Window2d w;
  [[maybe_unused]] std::string err = poolWindow(*s.attrs, s.in[xIndex].shape, w);
  assert(err.empty());  // shape inference has run the same check
  return w;
}

using pool::Span;
using pool::span;

// Planes per parallel chunk so that one chunk is worth a thread.
inline int64_t planeGrain(int64_t workPerPlane) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, workPerPlane));
}

using pool::argmax;

// Where plane p (= n·C + c) of an N×C×H×W tensor starts, and how far apart its
// elements lie, in either activation layout.
struct PlaneAddress {
  int64_t c, area;
  bool blocked;
  int64_t start(int64_t p) const {
    if (!blocked) return p * area;
    int64_t n = p / c, ch = p % c;
    return ((n * (paddedChannels(c) / 16) + ch / 16) * area) * 16 + ch % 16;
  }
  int64_t step() const { return blocked ? 16 : 1; }
};

// Calls f(outputIndex, rows, cols, divisor) for every window of one plane.
template <class F>
inline void forEachWindow(const Window2d& w, bool includePad, F&& f) {
  for (int64_t oy = 0; oy < w.oh; ++oy) {
    Span r = span(oy, w.sh, w.kh, w.padTop, w.ih);
    for (int64_t ox = 0; ox < w.ow; ++ox) {
      Span c = span(ox, w.sw, w.kw, w.padLeft, w.iw);
      f(oy * w.ow + ox, r, c, pool::divisor(r, c, includePad));
    }
  }
}

// Max pooling with NaN propagated, over plain or blocked tensors. The reference
// kernel, and oneDNN's kernels' way out when a NaN reaches them: their maximum skips it.
void maxPoolForward(const Window2d& w, bool blocked, const float* x, float* y) {
  PlaneAddress in{w.c, w.ih * w.iw, blocked}, out{w.c, w.oh * w.ow, blocked};
  parallelFor(w.n * w.c, planeGrain(w.oh * w.ow * w.kh * w.kw), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const float* xp = x + in.start(p);
      float* yp = y + out.start(p);
      forEachWindow(w, true, [&](int64_t o, const Span& r, const Span& c, float) {
        yp[o * out.step()] = xp[argmax(xp, w.iw, r, c, in.step()) * in.step()];
      });
    }
  });
}

void maxPoolBackward(const Window2d& w, bool blocked, const float* dy, const float* x, float* dx) {
  PlaneAddress in{w.c, w.ih * w.iw, blocked}, out{w.c, w.oh * w.ow, blocked};
  parallelFor(w.n * w.c, planeGrain(w.oh * w.ow * w.kh * w.kw), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const float* xp = x + in.start(p);
      const float* dyp = dy + out.start(p);
      float* dxp = dx + in.start(p);
      for (int64_t i = 0; i < in.area; ++i) dxp[i * in.step()] = 0.f;
      forEachWindow(w, true, [&](int64_t o, const Span& r, const Span& c, float) {
        dxp[argmax(xp, w.iw, r, c, in.step()) * in.step()] += dyp[o * out.step()];
      });
    }
  });
}

// Whether any of the n floats is NaN: one vectorised pass, well under the cost of
// the pooling it guards.
bool anyNan(const float* x, int64_t n) {
  bool found = false;
  parallelFor(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    int nan = 0;
    const float* p = x;  // a local pointer: through the captured one, GCC gathers
#pragma omp simd reduction(| : nan)
    for (int64_t i = lo; i < hi; ++i) nan |= p[i] != p[i];
    if (nan) {
#pragma omp atomic write
      found = true;
    }
  });
  return found;
}

bool anyNan(const uint16_t* x, int64_t n) {  // bf16
  bool found = false;
  parallelFor(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    int nan = 0;
    const uint16_t* p = x;
#pragma omp simd reduction(| : nan)
    for (int64_t i = lo; i < hi; ++i) nan |= (p[i] & 0x7fff) > 0x7f80;
    if (nan) {
#pragma omp atomic write
      found = true;
    }
  });
  return found;
}

bool anyNan(const TensorRef& t, int64_t n) {
  return t.dtype == DType::BF16 ? anyNan(static_cast<const uint16_t*>(t.data), n)
                                : anyNan(t.f32(), n);
}

// A tensor's stored elements as floats: itself, or a bf16 one's widened into `own`.
const float* asFloats(const TensorRef& t, int64_t n, std::vector<float>& own) {
  if (t.dtype != DType::BF16) return t.f32();
  own.resize(size_t(n));
  widenElements(static_cast<const uint16_t*>(t.data), own.data(), n);
  return own.data();
}

// The reference loops of max pooling (NaN's path) on tensors of either type: `loop`
// writes floats, stored into y as its type.
template <class Loop>
void inFloats(const TensorRef& y, int64_t n, Loop&& loop) {
  if (y.dtype != DType::BF16) return loop(y.f32());
  std::vector<float> own;
  own.resize(size_t(n));
  loop(own.data());
  narrowElements(own.data(), static_cast<uint16_t*>(y.data), n);
}

KernelFn maxPoolReference(const KernelSig& s) {
  Window2d w = poolGeometry(s, 0);
  return [w](const KernelIO& io) { maxPoolForward(w, false, io.in[0].f32(), io.out[0].f32()); };
}

KernelFn maxPoolGradReference(const KernelSig& s) {
  Window2d w = poolGeometry(s, 1);
  return [w](const KernelIO& io) {
    maxPoolBackward(w, false, io.in[0].f32(), io.in[1].f32(), io.out[0].f32());
  };
}

KernelFn avgPoolReference(const KernelSig& s) {
  Window2d w = poolGeometry(s, 0);
  bool includePad = s.attrs->b("count_include_pad", true);
  return [w, includePad](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(w.n * w.c, planeGrain(w.oh * w.ow * w.kh * w.kw), [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        const float* xp = x + p * w.ih * w.iw;
        float* yp = y + p * w.oh * w.ow;
        forEachWindow(w, includePad, [&](int64_t o, const Span& r, const Span& c, float div) {
          yp[o] = pool::windowSum(xp, w.iw, r, c) / div;
        });
      }
    });
  };
}

KernelFn avgPoolGradReference(const KernelSig& s) {
  Window2d w = poolGeometry(s, 1);
  bool includePad = s.attrs->b("count_include_pad", true);
  return [w, includePad](const KernelIO& io) {
    const float* dy = io.in[0].f32();
    float* dx = io.out[0].f32();
    parallelFor(w.n * w.c, planeGrain(w.oh * w.ow * w.kh * w.kw), [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        const float* dyp = dy + p * w.oh * w.ow;
        float* dxp = dx + p * w.ih * w.iw;
        std::fill(dxp, dxp + w.ih * w.iw, 0.f);
        forEachWindow(w, includePad, [&](int64_t o, const Span& r, const Span& c, float div) {
          float g = dyp[o] / div;
          for (int64_t iy = r.lo; iy < r.hi; ++iy)
            for (int64_t ix = c.lo; ix < c.hi; ++ix) dxp[iy * w.iw + ix] += g;
        });
      }
    });
  };
}

// oneDNN pooling ------------------------------------------------------------------

struct DnnlPool {
  Window2d w;
  dnnl::algorithm alg;
  memory::desc src, dst;

  DnnlPool(const KernelSig& s, int xIndex, bool average) : w(poolGeometry(s, xIndex)) {
    alg = !average                                ? dnnl::algorithm::pooling_max
          : s.attrs->b("count_include_pad", true) ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
    // Forward: (x) -> y. Backward: (dy, x) -> dx, where x is read only by max pooling.
    bool fwd = xIndex == 0;
    const auto type =
        s.out[0].dtype == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32;
    src = activationDesc({w.n, w.c, w.ih, w.iw}, fwd ? s.in[0].layout : s.out[0].layout, type);
    dst = activationDesc({w.n, w.c, w.oh, w.ow}, fwd ? s.out[0].layout : s.in[0].layout, type);
  }
  dnnl::pooling_forward::primitive_desc forward(dnnl::prop_kind prop) const {
    dnnl::pooling_forward::desc d(prop, alg, src, dst, {w.sh, w.sw}, {w.kh, w.kw},
                                  {w.padTop, w.padLeft}, {w.padBottom, w.padRight});
    return {d, userScratchpad(), dnnlEngine()};
  }
  dnnl::pooling_backward::primitive_desc backward(
      const dnnl::pooling_forward::primitive_desc& hint) const {
    dnnl::pooling_backward::desc d(alg, src, dst, {w.sh, w.sw}, {w.kh, w.kw}, {w.padTop, w.padLeft},
                                   {w.padBottom, w.padRight});
    return {d, userScratchpad(), dnnlEngine(), hint};
  }
};

std::string declinePool(const KernelSig& s, int xIndex, bool average, bool backward) {
  // All in float, or all in bf16 (the bf16 kernel's inputs: x, and dy backward).
  for (const auto* ds : {&s.in, &s.out})
    for (const TensorDesc& d : *ds)
      if (d.dtype != s.out[0].dtype || (d.dtype != DType::F32 && d.dtype != DType::BF16))
        return "takes tensors all float32 or all bf16";
  if (backward && !average && s.in[1].layout != s.out[0].layout)
    return "max pooling's backward needs x in the layout of dx";
  DnnlPool p(s, xIndex, average);
  if (p.alg == dnnl::algorithm::pooling_avg_include_padding &&
      (p.w.padBottom != p.w.padTop || p.w.padRight != p.w.padLeft))
    return "ceil_mode windows reach past the padding: oneDNN would count those positions "
           "in the divisor, PyTorch does not";
  return dnnlDecline([&]() -> std::vector<std::string> {
    if (!backward) return {p.forward(dnnl::prop_kind::forward_inference).impl_info_str()};
    auto fwd = p.forward(dnnl::prop_kind::forward_training);
    return {fwd.impl_info_str(), p.backward(fwd).impl_info_str()};
  });
}

// Inference-only forward: max pooling then needs no workspace. oneDNN's maximum
// skips NaN (its vector max returns the other operand); where x holds one, the
// NaN-propagating kernel runs instead, as PyTorch would answer.
KernelFn poolForwardOneDnn(const KernelSig& s, bool average) {
  DnnlPool p(s, 0, average);
  auto call = std::make_shared<DnnlCall>(
      DnnlCall::make<dnnl::pooling_forward>(p.forward(dnnl::prop_kind::forward_inference)));
  call->arg(DNNL_ARG_SRC, p.src);
  call->arg(DNNL_ARG_DST, p.dst);
  bool blocked = s.in[0].layout == Layout::Blocked16;
  Window2d w = p.w;
  const int64_t xs = storedElements(s.in[0]), ys = storedElements(s.out[0]),
                padding = paddedBlocked(s.out[0]) ? bytesOf(s.out[0]) : 0;
  return [call, average, blocked, w, xs, ys, padding](const KernelIO& io) {
    if (!average && anyNan(io.in[0], xs)) {
      if (padding) std::memset(io.out[0].data, 0, size_t(padding));  // the padding stays zero
      std::vector<float> x;
      const float* xf = asFloats(io.in[0], xs, x);
      inFloats(io.out[0], ys, [&](float* y) {
        if (padding) std::fill(y, y + ys, 0.f);
        maxPoolForward(w, blocked, xf, y);
      });
      return;
    }
    call->set(DNNL_ARG_SRC, io.in[0].data);
    call->set(DNNL_ARG_DST, io.out[0].data);
    call->run();
  };
}

KernelFn avgPoolGradOneDnn(const KernelSig& s) {
  DnnlPool p(s, 1, true);
  auto call = std::make_shared<DnnlCall>(DnnlCall::make<dnnl::pooling_backward>(
      p.backward(p.forward(dnnl::prop_kind::forward_training))));
  call->arg(DNNL_ARG_DIFF_DST, p.dst);
  call->arg(DNNL_ARG_DIFF_SRC, p.src);
  return [call](const KernelIO& io) {
    call->set(DNNL_ARG_DIFF_DST, io.in[0].data);
    call->set(DNNL_ARG_DIFF_SRC, io.out[0].data);
    call->run();
  };
}

// Max pooling's backward reads the forward's workspace (where each window's maximum
// is), which the plan does not keep: the forward runs again here, into an output and
// a workspace of this kernel's own, allocated once. oneDNN records the first maximum
// of a window, as PyTorch does (checked on inputs full of ties).
KernelFn maxPoolGradOneDnn(const KernelSig& s) {
  DnnlPool p(s, 1, false);
  auto fwdPd = p.forward(dnnl::prop_kind::forward_training);
  auto fwd = std::make_shared<DnnlCall>(DnnlCall::make<dnnl::pooling_forward>(fwdPd));
  auto bwd = std::make_shared<DnnlCall>(DnnlCall::make<dnnl::pooling_backward>(p.backward(fwdPd)));
  memory workspace(fwdPd.workspace_desc(), dnnlEngine());
  fwd->arg(DNNL_ARG_SRC, p.src);
  fwd->own(DNNL_ARG_DST, memory(p.dst, dnnlEngine()));
  fwd->own(DNNL_ARG_WORKSPACE, workspace);
  bwd->arg(DNNL_ARG_DIFF_DST, p.dst);
  bwd->arg(DNNL_ARG_DIFF_SRC, p.src);
  bwd->own(DNNL_ARG_WORKSPACE, workspace);
  bool blocked = s.in[1].layout == Layout::Blocked16;
  Window2d w = p.w;
  const int64_t xs = storedElements(s.in[1]), dys = storedElements(s.in[0]),
                padding = paddedBlocked(s.out[0]) ? bytesOf(s.out[0]) : 0;
  return [fwd, bwd, blocked, w, xs, dys, padding](const KernelIO& io) {
    if (anyNan(io.in[1], xs)) {  // the gradient goes to the NaN
      if (padding) std::memset(io.out[0].data, 0, size_t(padding));
      std::vector<float> dy, x;
      const float *dyf = asFloats(io.in[0], dys, dy), *xf = asFloats(io.in[1], xs, x);
      inFloats(io.out[0], xs, [&](float* dx) {
        if (padding) std::fill(dx, dx + xs, 0.f);
        maxPoolBackward(w, blocked, dyf, xf, dx);
      });
      return;
    }
    fwd->set(DNNL_ARG_SRC, io.in[1].data);
    fwd->run();
    bwd->set(DNNL_ARG_DIFF_DST, io.in[0].data);
    bwd->set(DNNL_ARG_DIFF_SRC, io.out[0].data);
    bwd->run();
  };
}

// Global average pooling and upsampling: memory-bound passes with nothing for a
// library to improve, so one kernel each.

// In nChw16c a plane is 16 channels interleaved: x[n][c / 16][hw][c % 16].
KernelFn globalAvgPool(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  int64_t n = x[0], c = x[1], planes = n * c, area = x[2] * x[3];
  if (s.in[0].layout == Layout::Blocked16)
    return [n, c, area](const KernelIO& io) {
      const float* x = io.in[0].f32();
      float* y = io.out[0].f32();
      int64_t blocks = n * c / 16;
      parallelFor(blocks, planeGrain(area * 16), [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          const float* xp = x + b * area * 16;
          double sum[16] = {};
          for (int64_t i = 0; i < area; ++i)
            for (int l = 0; l < 16; ++l) sum[l] += xp[i * 16 + l];
          for (int l = 0; l < 16; ++l) y[b * 16 + l] = float(sum[l] / double(area));
        }
      });
    };
  return [planes, area](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(planes, planeGrain(area), [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        const float* xp = x + p * area;
        double sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < area; ++i) sum += xp[i];
        y[p] = float(sum / double(area));
      }
    });
  };
}

KernelFn globalAvgPoolGrad(const KernelSig& s) {
  const Shape& x = s.in[1].shape;
  int64_t planes = x[0] * x[1], area = x[2] * x[3];
  if (s.out[0].layout == Layout::Blocked16)
    return [planes, area](const KernelIO& io) {
      const float* dy = io.in[0].f32();
      float* dx = io.out[0].f32();
      parallelFor(planes / 16, planeGrain(area * 16), [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          float g[16];
          for (int l = 0; l < 16; ++l) g[l] = dy[b * 16 + l] / float(area);
          float* dxp = dx + b * area * 16;
          for (int64_t i = 0; i < area; ++i)
            for (int l = 0; l < 16; ++l) dxp[i * 16 + l] = g[l];
        }
      });
    };
  return [planes, area](const KernelIO& io) {
    const float* dy = io.in[0].f32();
    float* dx = io.out[0].f32();
    parallelFor(planes, planeGrain(area), [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        float g = dy[p] / float(area);
        std::fill(dx + p * area, dx + (p + 1) * area, g);
      }
    });
  };
}

struct UpsampleDims {
  int64_t rows, iw, sh, sw;  // rows: N·C·H input rows
};

UpsampleDims upsampleDims(const KernelSig& s, int xIndex) {
  const Shape& x = s.in[xIndex].shape;
  UpsampleDims d{x[0] * x[1] * x[2], x[3], 1, 1};
  pair2d(*s.attrs, "scale_factor", 2, d.sh, d.sw);
  return d;
}

// Input row r becomes output rows r·sh … r·sh + sh - 1.
KernelFn upsample(const KernelSig& s) {
  UpsampleDims d = upsampleDims(s, 0);
  return [d](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    int64_t ow = d.iw * d.sw;
    parallelFor(d.rows, planeGrain(ow * d.sh), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float* xr = x + r * d.iw;
        float* y0 = y + r * d.sh * ow;
        for (int64_t j = 0; j < d.iw; ++j)
          for (int64_t k = 0; k < d.sw; ++k) y0[j * d.sw + k] = xr[j];
        for (int64_t i = 1; i < d.sh; ++i) std::memcpy(y0 + i * ow, y0, sizeof(float) * ow);
      }
    });
  };
}

KernelFn upsampleGrad(const KernelSig& s) {
  UpsampleDims d = upsampleDims(s, 1);
  return [d](const KernelIO& io) {
    const float* dy = io.in[0].f32();
    float* dx = io.out[0].f32();
    int64_t ow = d.iw * d.sw;
    parallelFor(d.rows, planeGrain(ow * d.sh), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        float* dxr = dx + r * d.iw;
        std::fill(dxr, dxr + d.iw, 0.f);
        for (int64_t i = 0; i < d.sh; ++i) {
          const float* dyr = dy + (r * d.sh + i) * ow;
          for (int64_t j = 0; j < d.iw; ++j)
            for (int64_t k = 0; k < d.sw; ++k) dxr[j] += dyr[j * d.sw + k];
        }
      }
    });
  };
}

}  // namespace

void registerPooling(KernelRegistry& r) {
  auto cpu = DeviceKind::Cpu;
  // oneDNN's pooling in float, or in bf16 where all its tensors are.
  auto half = [](KernelImpl k) {
    k.halfTensors = true;
    return k;
  };
  r.add("MaxPool2d", cpu,
        half({"onednn.pooling_max",
              [](const KernelSig& s) { return declinePool(s, 0, false, false); },
              [](const KernelSig& s) { return poolForwardOneDnn(s, false); }, true}));
  r.add("MaxPool2d", cpu, kernel("reference.max_pool2d", maxPoolReference));
  r.add("MaxPool2dGrad", cpu,
        half({"onednn.pooling_max_backward",
              [](const KernelSig& s) { return declinePool(s, 1, false, true); }, maxPoolGradOneDnn,
              true}));
  r.add("MaxPool2dGrad", cpu, kernel("reference.max_pool2d_grad", maxPoolGradReference));
  r.add("AvgPool2d", cpu,
        {"onednn.pooling_avg", [](const KernelSig& s) { return declinePool(s, 0, true, false); },
         [](const KernelSig& s) { return poolForwardOneDnn(s, true); }, true});
  r.add("AvgPool2d", cpu, kernel("reference.avg_pool2d", avgPoolReference));
  r.add(
      "AvgPool2dGrad", cpu,
      {"onednn.pooling_avg_backward",
       [](const KernelSig& s) { return declinePool(s, 1, true, true); }, avgPoolGradOneDnn, true});
  r.add("AvgPool2dGrad", cpu, kernel("reference.avg_pool2d_grad", avgPoolGradReference));
  KernelImpl gap = kernel("cpu.global_avg_pool2d", globalAvgPool);
  KernelImpl gapGrad = kernel("cpu.global_avg_pool2d_grad", globalAvgPoolGrad);
  gap.anyLayout = gapGrad.anyLayout = true;
  gap.decline = gapGrad.decline = [](const KernelSig& s) -> std::string {
    for (const auto* descs : {&s.in, &s.out})
      if (std::any_of(descs->begin(), descs->end(), paddedBlocked))
        return "takes whole blocks of 16 channels";
    return {};
  };
  r.add("GlobalAvgPool2d", cpu, std::move(gap));
  r.add("GlobalAvgPool2dGrad", cpu, std::move(gapGrad));
  r.add("Upsample", cpu, kernel("cpu.upsample_nearest", upsample));
  r.add("UpsampleGrad", cpu, kernel("cpu.upsample_nearest_grad", upsampleGrad));
}

}  // namespace netloom::cpu
