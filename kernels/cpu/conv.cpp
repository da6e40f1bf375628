// Convolutions on the CPU: Conv2d, ConvTranspose2d and their input and weight
// gradients, each with oneDNN first and a plain deterministic reference last (their
// bias gradient and the layout conversions are in layouts.cpp). oneDNN
// primitives are created once at prepare time for the layouts the compiler chose, so
// a launch only rebinds pointers. Where activations are blocked (nChw16c), the
// compiler stores the weights, their gradient and optimizer state packed in the
// layout most of its passes have fast code for (`packs` names each pass's choice),
// and every pass is built for that layout where it can be. Only a pass that has no
// fast code for the stored layout converts the weights inside its launch, into
// memory allocated here once.
#include <cassert>
#include <memory>

#include "kernels/core/geometry.h"
#include "kernels/cpu/dnnl_util.h"

namespace netloom::cpu {
namespace {

// Which of the three convolution passes a kernel computes.
enum class Pass { Forward, Data, Weights };

// An op's configuration read from its signature. `w` is the op's own geometry:
// ih/iw its input (x), oh/ow its output (y); for the transposed op, padBottom and
// padRight are those of the equivalent convolution and may be negative.
struct ConvConfig {
  bool transposed = false;
  Layout xLayout = Layout::Plain, yLayout = Layout::Plain;  // the op's input and output sides
  DType xType = DType::F32, yType = DType::F32;  // as stored: float, or bf16 (bf16 kernels)
  bool bias = false;                             // forward only
  int64_t groups = 1, c = 0, o = 0;              // input and output channels of the op
  Window2d w;
  TensorDesc weight;  // as stored: PyTorch's layout or packed
};

// The forward op has (x, weight[, bias]); its gradients (dy, x, weight).
ConvConfig configOf(const KernelSig& s, bool transposed, Pass pass) {
  ConvConfig k;
  k.transposed = transposed;
  int xi = pass == Pass::Forward ? 0 : 1, wi = xi + 1;
  k.bias = pass == Pass::Forward && s.in.size() > 2;
  k.groups = s.attrs->i("groups", 1);
  const Shape& x = s.in[xi].shape;
  const Shape& wt = s.in[wi].shape;
  std::string err =
      transposed ? convTransposeWindow(*s.attrs, x, k.w) : convWindow(*s.attrs, x, k.w);
  assert(err.empty() && "shape inference accepted the configuration");
  (void)err;
  k.c = x[1];
  k.o = transposed ? wt[1] * k.groups : wt[0];
  k.weight = s.in[wi];
  // Forward: x in, y out. Data: dy in, dx out. Weights: dy and x in.
  const TensorDesc& xSide = pass == Pass::Data ? s.out[0] : s.in[xi];
  const TensorDesc& ySide = pass == Pass::Forward ? s.out[0] : s.in[0];
  k.xLayout = xSide.layout;
  k.yLayout = ySide.layout;
  k.xType = xSide.dtype;
  k.yType = ySide.dtype;
  return k;
}

// The same computation as a direct convolution, which the reference loops are
// written for: a transposed convolution is the input gradient of the convolution
// that maps its output back to its input, with the very same weight tensor.
struct ConvGeom {
  int64_t n = 0, ci = 0, co = 0, g = 1;  // conv input and output channels
  Window2d w;                            // ih/iw conv input, oh/ow conv output
};

ConvGeom geomOf(const ConvConfig& k) {
  ConvGeom g;
  g.n = k.w.n, g.g = k.groups, g.w = k.w;
  if (!k.transposed) {
    g.ci = k.c, g.co = k.o;
  } else {
    g.ci = k.o, g.co = k.c;
    std::swap(g.w.ih, g.w.oh);
    std::swap(g.w.iw, g.w.ow);
  }
  return g;
}

// Output positions [lo, hi) whose tap at input offset `off` (from stride·o) falls
// inside an input of length `in`.
inline void tapRange(int64_t off, int64_t s, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = in - off <= 0 ? 0 : std::min(out, (in - off + s - 1) / s);
}

// Reference loops -----------------------------------------------------------------
// Each parallel item owns one output plane (or one weight slice) and visits its
// contributions in a fixed order, so results do not depend on the thread count. Rows
// with unit stride, the common case, get a vectorised inner loop.

// y[n, co] = bias + Σ x[n, ci of the group] ⋆ w[co].
void refForward(const ConvGeom& g, const float* x, const float* wt, const float* b, float* y) {
  const Window2d& w = g.w;
  int64_t cig = g.ci / g.g, cog = g.co / g.g, in = w.ih * w.iw, out = w.oh * w.ow;
  parallelFor(g.n * g.co, grainFor(cig * w.kh * w.kw * out), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      int64_t n = item / g.co, o = item % g.co, grp = o / cog;
      float* yp = y + item * out;
      std::fill(yp, yp + out, b ? b[o] : 0.f);
      for (int64_t c = 0; c < cig; ++c) {
        const float* xp = x + (n * g.ci + grp * cig + c) * in;
        const float* wp = wt + (o * cig + c) * w.kh * w.kw;
        for (int64_t ky = 0; ky < w.kh; ++ky)
          for (int64_t kx = 0; kx < w.kw; ++kx) {
            float wv = wp[ky * w.kw + kx];
            int64_t offY = ky * w.dh - w.padTop, offX = kx * w.dw - w.padLeft, y0, y1, x0, x1;
            tapRange(offY, w.sh, w.ih, w.oh, y0, y1);
            tapRange(offX, w.sw, w.iw, w.ow, x0, x1);
            for (int64_t oy = y0; oy < y1; ++oy) {
              const float* xr = xp + (oy * w.sh + offY) * w.iw + offX;
              float* yr = yp + oy * w.ow;
              if (w.sw == 1) {
#pragma omp simd
                for (int64_t ox = x0; ox < x1; ++ox) yr[ox] += wv * xr[ox];
              } else {
                for (int64_t ox = x0; ox < x1; ++ox) yr[ox] += wv * xr[ox * w.sw];
              }
            }
          }
      }
    }
  });
}

// dx[n, ci] = bias + Σ over the group's co of dy[n, co] scattered through w[co, ci].
void refData(const ConvGeom& g, const float* dy, const float* wt, const float* b, float* dx) {
  const Window2d& w = g.w;
  int64_t cig = g.ci / g.g, cog = g.co / g.g, in = w.ih * w.iw, out = w.oh * w.ow;
  parallelFor(g.n * g.ci, grainFor(cog * w.kh * w.kw * out), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      int64_t n = item / g.ci, c = item % g.ci, grp = c / cig, cl = c % cig;
      float* xp = dx + item * in;
      std::fill(xp, xp + in, b ? b[c] : 0.f);
      for (int64_t o = grp * cog; o < (grp + 1) * cog; ++o) {
        const float* yp = dy + (n * g.co + o) * out;
        const float* wp = wt + (o * cig + cl) * w.kh * w.kw;
        for (int64_t ky = 0; ky < w.kh; ++ky)
          for (int64_t kx = 0; kx < w.kw; ++kx) {
            float wv = wp[ky * w.kw + kx];
            int64_t offY = ky * w.dh - w.padTop, offX = kx * w.dw - w.padLeft, y0, y1, x0, x1;
            tapRange(offY, w.sh, w.ih, w.oh, y0, y1);
            tapRange(offX, w.sw, w.iw, w.ow, x0, x1);
            for (int64_t oy = y0; oy < y1; ++oy) {
              float* xr = xp + (oy * w.sh + offY) * w.iw + offX;
              const float* yr = yp + oy * w.ow;
              if (w.sw == 1) {
#pragma omp simd
                for (int64_t ox = x0; ox < x1; ++ox) xr[ox] += wv * yr[ox];
              } else {
                for (int64_t ox = x0; ox < x1; ++ox) xr[ox * w.sw] += wv * yr[ox];
              }
            }
          }
      }
    }
  });
}

// dw[co, ci] = Σ over the batch of dy[n, co] ⋆ x[n, ci]; one item per weight slice.
void refWeights(const ConvGeom& g, const float* x, const float* dy, float* dw) {
  const Window2d& w = g.w;
  int64_t cig = g.ci / g.g, cog = g.co / g.g, in = w.ih * w.iw, out = w.oh * w.ow;
  parallelFor(g.co * cig, grainFor(g.n * w.kh * w.kw * out), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      int64_t o = item / cig, cl = item % cig, c = o / cog * cig + cl;
      for (int64_t ky = 0; ky < w.kh; ++ky)
        for (int64_t kx = 0; kx < w.kw; ++kx) {
          int64_t offY = ky * w.dh - w.padTop, offX = kx * w.dw - w.padLeft, y0, y1, x0, x1;
          tapRange(offY, w.sh, w.ih, w.oh, y0, y1);
          tapRange(offX, w.sw, w.iw, w.ow, x0, x1);
          double acc = 0;  // sums N·OH·OW products: rows in float, the total in double
          for (int64_t n = 0; n < g.n; ++n) {
            const float* xp = x + (n * g.ci + c) * in;
            const float* yp = dy + (n * g.co + o) * out;
            for (int64_t oy = y0; oy < y1; ++oy) {
              const float* xr = xp + (oy * w.sh + offY) * w.iw + offX;
              const float* yr = yp + oy * w.ow;
              float row = 0.f;
              if (w.sw == 1) {
#pragma omp simd reduction(+ : row)
                for (int64_t ox = x0; ox < x1; ++ox) row += yr[ox] * xr[ox];
              } else {
                for (int64_t ox = x0; ox < x1; ++ox) row += yr[ox] * xr[ox * w.sw];
              }
              acc += row;
            }
          }
          dw[item * w.kh * w.kw + ky * w.kw + kx] = float(acc);
        }
    }
  });
}

// Which reference loop computes an op, and on which of its inputs: `a` and `b` are
// (x, weight) for the forward loop, (dy, weight) for the data loop and (x, dy) for
// the weight loop. The transposed op swaps the convolution's two sides, so its
// forward is the data loop, its input gradient the forward loop, and its dy sits on
// the convolution's input side.
KernelFn makeReference(const KernelSig& s, bool transposed, Pass pass) {
  ConvConfig k = configOf(s, transposed, pass);
  ConvGeom g = geomOf(k);
  Pass loop = pass;
  int a = 0, b = 1, bias = k.bias ? 2 : -1;
  if (pass == Pass::Forward && transposed) loop = Pass::Data;
  if (pass == Pass::Data) loop = transposed ? Pass::Forward : Pass::Data, b = 2;
  if (pass == Pass::Weights && !transposed) a = 1, b = 0;
  return [g, loop, a, b, bias](const KernelIO& io) {
    const float* pa = io.in[a].f32();
    const float* pb = io.in[b].f32();
    const float* pbias = bias >= 0 ? io.in[bias].f32() : nullptr;
    float* y = io.out[0].f32();
    switch (loop) {
      case Pass::Forward: refForward(g, pa, pb, pbias, y); break;
      case Pass::Data: refData(g, pa, pb, pbias, y); break;
      case Pass::Weights: refWeights(g, pa, pb, y); break;
    }
  };
}

// oneDNN ---------------------------------------------------------------------------

struct ConvPrims {
  using Fwd = dnnl::convolution_forward;
  using Data = dnnl::convolution_backward_data;
  using Weights = dnnl::convolution_backward_weights;
  static constexpr dnnl::algorithm alg = dnnl::algorithm::convolution_direct;
};

struct DeconvPrims {
  using Fwd = dnnl::deconvolution_forward;
  using Data = dnnl::deconvolution_backward_data;
  using Weights = dnnl::deconvolution_backward_weights;
  static constexpr dnnl::algorithm alg = dnnl::algorithm::deconvolution_direct;
};

// A weight layout conversion that runs inside each launch.
struct WeightReorder {
  dnnl::reorder prim;
  dnnl::memory from, to;
};

// A primitive with its memory objects bound once; `slots` says which tensor of a
// launch each memory wraps (an input index, or -1 for the output). `before` converts
// the weights in, `after` the weight gradient out.
struct DnnlConv {
  dnnl::primitive prim;
  std::string impl;
  std::vector<std::pair<int, dnnl::memory>> slots;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<WeightReorder> before, after;
  dnnl::memory scratchpad;  // user-owned, so a launch allocates nothing
  WeightGeometry geometry;
  dnnl::memory::desc weights;  // the layout the primitive reads or writes them in
  // Activations the primitive reads in bf16, converted from float by `before` into the
  // launch's workspace (planned in the arena): each one's memory and offset there.
  std::vector<std::pair<dnnl::memory, int64_t>> staged;
  int64_t workspaceBytes = 0;
};

// A backward pass on the weights as stored where oneDNN has fast code for that
// layout (a packed store is the forward's choice), else on the layout it prefers.
template <class Pd, class Make>
Pd preferStored(const dnnl::memory::desc& stored, const dnnl::memory::desc& any, Make make) {
  if (stored != any && stored.data.format_kind == dnnl_blocked) {
    try {
      Pd pd = make(stored);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) return pd;
    } catch (const dnnl::error&) {
    }
  }
  return make(any);
}

// Binds a primitive's arguments to the kernel's slots (-1: its output).
struct Binder {
  DnnlConv& st;
  const WeightGeometry& geo;
  const dnnl::memory::desc& wei;  // the weights as stored

  void bind(int arg, int slot, const dnnl::memory::desc& d) {
    dnnl::memory m(d, dnnlEngine(), DNNL_MEMORY_NONE);
    st.slots.push_back({slot, m});
    st.args[arg] = m;
  }
  // An activation at `slot`, stored as `user`, that the primitive reads as `chosen`:
  // bound as it is where they agree, else converted into the workspace each launch.
  void bindRead(int arg, int slot, const dnnl::memory::desc& user,
                const dnnl::memory::desc& chosen) {
    if (chosen == user) return bind(arg, slot, user);
    dnnl::memory from(user, dnnlEngine(), DNNL_MEMORY_NONE);
    dnnl::memory to(chosen, dnnlEngine(), DNNL_MEMORY_NONE);
    st.slots.push_back({slot, from});
    st.args[arg] = to;
    st.before.push_back({dnnl::reorder(from, to), from, to});
    st.staged.push_back({to, st.workspaceBytes});
    st.workspaceBytes += int64_t((chosen.get_size() + 63) / 64 * 64);
  }
  // The weights (or their gradient, `out`) at slot `slot`, in PyTorch's layout there
  // and in `chosen` for the primitive.
  void bindWeights(int arg, int slot, const dnnl::memory::desc& chosen, bool out) {
    st.geometry = geo;
    st.weights = chosen;
    if (chosen == wei) return bind(arg, slot, wei);
    dnnl::memory user(wei, dnnlEngine(), DNNL_MEMORY_NONE), own(chosen, dnnlEngine());
    st.slots.push_back({slot, user});
    st.args[arg] = own;
    if (out)
      st.after.push_back({dnnl::reorder(own, user), own, user});
    else
      st.before.push_back({dnnl::reorder(user, own), user, own});
  }
};

// `run`: the primitive will run, so its scratchpad is allocated; a primitive built
// only to ask oneDNN something (whether it takes a configuration, which weight
// layout it reads) needs none, which at large batches is gigabytes. `bf16`: the
// primitive reads its operands (x, the weights, dy) in bf16, into float results; the
// float tensors it is given hold bf16 values already (autocast rounded them), so the
// conversion each launch loses nothing.
template <class P>
std::shared_ptr<DnnlConv> buildPrims(const ConvConfig& k, Pass pass, bool run, bool bf16) {
  using tag = dnnl::memory::format_tag;
  using dims = dnnl::memory::dims;
  using type = dnnl::memory::data_type;
  const Window2d& w = k.w;
  const dnnl::engine& eng = dnnlEngine();
  const type half = bf16 ? type::bf16 : type::f32;
  auto md = [](dims d, tag t, type ty) { return dnnl::memory::desc(d, ty, t); };
  const dims xDims{w.n, k.c, w.ih, w.iw}, yDims{w.n, k.o, w.oh, w.ow};
  auto stored = [](DType t) { return t == DType::BF16 ? type::bf16 : type::f32; };
  auto src = activationDesc(xDims, k.xLayout, stored(k.xType));
  auto dst = activationDesc(yDims, k.yLayout, stored(k.yType));
  // As the primitive reads them: x (forward, weights) and dy (data, weights).
  auto srcIn = activationDesc(xDims, k.xLayout, half);
  auto dstIn = activationDesc(yDims, k.yLayout, half);
  WeightGeometry geo = weightGeometry(k.weight.shape, k.groups, k.transposed);
  dnnl::memory::desc wei = geo.plain;  // the weights as stored
  if (k.weight.layout == Layout::Packed && !packedDesc(k.weight, geo, wei))
    throw dnnl::error(dnnl_invalid_arguments, "unknown packed weight format");
  // With plain activations oneDNN keeps its plain-layout code, which reads PyTorch's
  // layout; with blocked ones each pass picks its own (in bf16, always its own).
  bool blocked = k.xLayout != Layout::Plain || k.yLayout != Layout::Plain;
  auto weiAny = blocked ? md(geo.dims, tag::any, type::f32) : geo.plain;
  auto weiIn = bf16 ? md(geo.dims, tag::any, half) : weiAny;  // weights read
  auto bias = k.bias ? md({k.o}, tag::x, type::f32) : dnnl::memory::desc();
  dims strides{w.sh, w.sw}, dil{w.dh - 1, w.dw - 1};
  dims padL{w.padTop, w.padLeft}, padR{w.padBottom, w.padRight};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  typename P::Fwd::primitive_desc fwd(
      typename P::Fwd::desc(dnnl::prop_kind::forward_training, P::alg, srcIn, weiIn, bias,
                            pass == Pass::Forward ? dst : dstIn, strides, dil, padL, padR),
      attr, eng);
  auto st = std::make_shared<DnnlConv>();
  Binder b{*st, geo, wei};
  dnnl::memory::desc scratch;
  if (pass == Pass::Forward) {
    st->prim = typename P::Fwd(fwd);
    st->impl = fwd.impl_info_str();
    scratch = fwd.scratchpad_desc();
    b.bindRead(DNNL_ARG_SRC, 0, src, fwd.src_desc());
    b.bindWeights(DNNL_ARG_WEIGHTS, 1, fwd.weights_desc(), false);
    if (k.bias) b.bind(DNNL_ARG_BIAS, 2, bias);
    b.bind(DNNL_ARG_DST, -1, dst);
  } else if (pass == Pass::Data) {
    const auto& stored = bf16 ? weiIn : wei;  // a float store is no bf16 choice
    auto pd = preferStored<typename P::Data::primitive_desc>(stored, weiIn, [&](const auto& wd) {
      return typename P::Data::primitive_desc(
          typename P::Data::desc(P::alg, src, wd, dstIn, strides, dil, padL, padR), attr, eng, fwd);
    });
    st->prim = typename P::Data(pd);
    st->impl = pd.impl_info_str();
    scratch = pd.scratchpad_desc();
    b.bindRead(DNNL_ARG_DIFF_DST, 0, dst, pd.diff_dst_desc());
    b.bindWeights(DNNL_ARG_WEIGHTS, 2, pd.weights_desc(), false);
    b.bind(DNNL_ARG_DIFF_SRC, -1, src);
  } else {
    auto pd = preferStored<typename P::Weights::primitive_desc>(wei, weiAny, [&](const auto& wd) {
      return typename P::Weights::primitive_desc(
          typename P::Weights::desc(P::alg, srcIn, wd, dstIn, strides, dil, padL, padR), attr, eng,
          fwd);
    });
    st->prim = typename P::Weights(pd);
    st->impl = pd.impl_info_str();
    scratch = pd.scratchpad_desc();
    b.bindRead(DNNL_ARG_DIFF_DST, 0, dst, pd.diff_dst_desc());
    b.bindRead(DNNL_ARG_SRC, 1, src, pd.src_desc());
    b.bindWeights(DNNL_ARG_DIFF_WEIGHTS, -1, pd.diff_weights_desc(), true);
  }
  if (run && scratch.get_size() > 0) {
    st->scratchpad = dnnl::memory(scratch, eng);
    st->args[DNNL_ARG_SCRATCHPAD] = st->scratchpad;
  }
  return st;
}

std::shared_ptr<DnnlConv> buildDnnl(const KernelSig& s, bool transposed, Pass pass,
                                    bool run = false, bool bf16 = false) {
  ConvConfig k = configOf(s, transposed, pass);
  return transposed ? buildPrims<DeconvPrims>(k, pass, run, bf16)
                    : buildPrims<ConvPrims>(k, pass, run, bf16);
}

std::string declineDnnl(const KernelSig& s, bool transposed, Pass pass, bool bf16 = false) {
  // The activations (x, y and their gradients) may be stored in bf16 for the bf16
  // pass; the weights, the bias and the weight gradient are float.
  const int weight = pass == Pass::Forward ? 1 : 2;
  for (size_t i = 0; i < s.in.size(); ++i)
    if (s.in[i].dtype == DType::BF16 && (!bf16 || int(i) >= weight))
      return bf16 ? "reads its weights and bias in float32 only"
                  : "reads float32 only (its bf16 form reads bf16 activations)";
  if (s.out[0].dtype == DType::BF16 && (!bf16 || pass == Pass::Weights))
    return bf16 ? "writes the weight gradient in float32 only"
                : "writes float32 only (its bf16 form writes bf16 activations)";
  if (bf16 && !s.attrs->b("bf16_operands"))
    return "computes in bf16 only where autocast to bf16 rounded its operands";
  if (bf16 && !cpuHasBf16Units())
    return "this CPU has no bf16 units (AVX512_BF16 or AMX); the float kernel computes on "
           "the rounded values";
  try {
    auto st = buildDnnl(s, transposed, pass, false, bf16);
    // Its own reference loops are no faster than ours, and ours are deterministic.
    if (st->impl.rfind("ref", 0) == 0)
      return bf16 ? "oneDNN has no fast bf16 convolution on this CPU (it would run " + st->impl +
                        "); the float kernel computes on the rounded values"
                  : "oneDNN has only its reference implementation";
    // A transposed convolution its bf16 code (jit_bf16, brgconv ..._bf16) does not take
    // runs gemm-based, slower than the float kernel (one of 1 output channel: 2.8×).
    if (bf16 && transposed && st->impl.find("bf16") == std::string::npos)
      return "oneDNN's bf16 code does not take this transposed convolution (it would run " +
             st->impl + ", slower than in float); the float kernel computes on the rounded values";
  } catch (const dnnl::error& e) {
    return std::string("oneDNN: ") + e.what();
  }
  return {};
}

KernelFn makeDnnl(const KernelSig& s, bool transposed, Pass pass, bool bf16 = false) {
  std::shared_ptr<DnnlConv> st = buildDnnl(s, transposed, pass, true, bf16);
  return [st](const KernelIO& io) {
    for (auto& [slot, m] : st->slots)
      m.set_data_handle(slot < 0 ? io.out[0].data : io.in[slot].data);
    for (auto& [m, at] : st->staged) m.set_data_handle(static_cast<char*>(io.workspace) + at);
    dnnl::stream& stream = dnnlStream();
    for (WeightReorder& r : st->before) r.prim.execute(stream, r.from, r.to);
    st->prim.execute(stream, st->args);
    for (WeightReorder& r : st->after) r.prim.execute(stream, r.from, r.to);
    stream.wait();
  };
}

// The packed format a pass would read the weights (or write their gradient) in,
// given the layout the signature stores them in: that same format where the pass
// has fast code for it. Empty for PyTorch's layout, or where no packed format fits.
std::string preferredWeights(const KernelSig& s, bool transposed, Pass pass) {
  try {
    auto st = buildDnnl(s, transposed, pass);
    return packedFormat(st->geometry, st->weights);
  } catch (const dnnl::error&) {
    return {};
  }
}

// The implementation oneDNN picked, and the conversions a launch makes.
std::string describeDnnl(const KernelSig& s, bool transposed, Pass pass, bool bf16 = false) {
  auto st = buildDnnl(s, transposed, pass, false, bf16);
  std::string d = st->impl;
  if (bf16)
    d += "; bf16 operands" + std::string(st->staged.empty() ? ""
                                                            : ", activations converted "
                                                              "into its workspace");
  if (st->before.size() > st->staged.size() || !st->after.empty()) {
    std::string chosen = packedFormat(st->geometry, st->weights);
    d += std::string(st->after.empty() ? "; converts the weights"
                                       : "; converts the weight gradient") +
         " per launch" + (chosen.empty() ? "" : " (" + chosen + ")");
  }
  return d;
}

}  // namespace

void registerConv(KernelRegistry& r) {
  struct Entry {
    const char* op;
    bool transposed;
    Pass pass;
    const char* onednn;
    const char* reference;
  };
  const Entry entries[] = {
      {"Conv2d", false, Pass::Forward, "onednn.conv_fwd", "reference.conv_fwd"},
      {"Conv2dGradInput", false, Pass::Data, "onednn.conv_bwd_data", "reference.conv_bwd_data"},
      {"Conv2dGradWeight", false, Pass::Weights, "onednn.conv_bwd_weights",
       "reference.conv_bwd_weights"},
      {"ConvTranspose2d", true, Pass::Forward, "onednn.deconv_fwd", "reference.deconv_fwd"},
      {"ConvTranspose2dGradInput", true, Pass::Data, "onednn.deconv_bwd_data",
       "reference.deconv_bwd_data"},
      {"ConvTranspose2dGradWeight", true, Pass::Weights, "onednn.deconv_bwd_weights",
       "reference.deconv_bwd_weights"},
  };
  for (const Entry& e : entries) {
    bool t = e.transposed;
    Pass p = e.pass;
    // Where autocast rounded the operands to bf16 (and the CPU has bf16 units), the
    // same pass on bf16 operands, into float; else in float.
    for (bool bf16 : {true, false}) {
      KernelImpl dnnl{std::string(e.onednn) + (bf16 ? "_bf16" : ""),
                      [t, p, bf16](const KernelSig& s) { return declineDnnl(s, t, p, bf16); },
                      [t, p, bf16](const KernelSig& s) { return makeDnnl(s, t, p, bf16); }, true};
      // Weights are stored in float, packed as the float pass prefers.
      dnnl.packs = [t, p](const KernelSig& s, int input) {
        int weight = p == Pass::Forward ? 1 : 2;
        return input == weight && anyBlocked(s) ? preferredWeights(widenedSig(s), t, p)
                                                : std::string();
      };
      dnnl.detail = [t, p, bf16](const KernelSig& s) { return describeDnnl(s, t, p, bf16); };
      if (bf16)
        dnnl.workspace = [t, p](const KernelSig& s) {
          return buildDnnl(s, t, p, false, true)->workspaceBytes;
        };
      dnnl.halfTensors = bf16;
      r.add(e.op, DeviceKind::Cpu, std::move(dnnl));
    }
    r.add(e.op, DeviceKind::Cpu,
          kernel(e.reference, [t, p](const KernelSig& s) { return makeReference(s, t, p); }));
  }
}

}  // namespace netloom::cpu
