// BatchNorm and LayerNorm on the CPU: oneDNN's normalisation primitives first where
// they have fast code for our plain layouts, plain references last. The references
// own each channel (BatchNorm) or row (LayerNorm) per thread, accumulate statistics
// in double in a fixed order, and reduce the LayerNorm parameter gradients per
// column band, so results are independent of the thread count. BatchNorm's running
// statistics are updated here after either kernel: oneDNN has no notion of them.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/pool_norm.h"

namespace netloom::cpu {
namespace {

using dnnl::memory;
using Flags = dnnl::normalization_flags;
using Impls = std::vector<std::string>;

// x viewed as N × C × S (S: the product of the dimensions after C).
struct BnDims {
  int64_t n = 1, c = 1, s = 1;
  int64_t count() const { return n * s; }  // elements per channel
};

BnDims bnDims(const Shape& x) {
  BnDims d{x[0], x[1], 1};
  for (size_t i = 2; i < x.size(); ++i) d.s *= x[i];
  return d;
}

inline int64_t grainFor(int64_t workPerItem) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, workPerItem));
}

// Visits the channels of the band [lo, hi) sample by sample, so each sample's band
// is one contiguous block whatever S is; the inner loop runs over the channels when
// S = 1 (N × C) and over the positions otherwise, and vectorises either way.
template <class F>
inline void forEachElement(const BnDims& d, int64_t lo, int64_t hi, F f) {
  for (int64_t n = 0; n < d.n; ++n) {
    if (d.s == 1) {
      int64_t base = n * d.c;
#pragma omp simd
      for (int64_t c = lo; c < hi; ++c) f(base + c, c);
    } else {
      for (int64_t c = lo; c < hi; ++c) {
        int64_t base = (n * d.c + c) * d.s;
#pragma omp simd
        for (int64_t i = base; i < base + d.s; ++i) f(i, c);
      }
    }
  }
}

// Per channel of the band, the sums over N and S of the two values term(i, c)
// returns for flat index i, in double. Every channel sums in the same order for
// any thread count.
template <class Term>
void channelSums(const BnDims& d, int64_t lo, int64_t hi, double* a, double* b, Term term) {
  std::fill(a + lo, a + hi, 0.0);
  std::fill(b + lo, b + hi, 0.0);
  if (d.s == 1) {
    forEachElement(d, lo, hi, [&](int64_t i, int64_t c) {
      auto [u, v] = term(i, c);
      a[c] += u, b[c] += v;
    });
    return;
  }
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = lo; c < hi; ++c) {
      int64_t base = (n * d.c + c) * d.s;
      double ta = 0, tb = 0;
#pragma omp simd reduction(+ : ta, tb)
      for (int64_t i = base; i < base + d.s; ++i) {
        auto [u, v] = term(i, c);
        ta += u, tb += v;
      }
      a[c] += ta, b[c] += tb;
    }
}

// Per-channel working memory of the reference kernels, allocated at prepare time.
struct BnScratch {
  std::vector<double> a, b;
  std::vector<float> p, q, r;
  explicit BnScratch(int64_t c) : a(c), b(c), p(c), q(c), r(c) {}
};

// PyTorch's update: the batch variance enters unbiased. A single element per
// channel has no unbiased variance (PyTorch refuses to train on it); the biased
// one, zero, is used instead of dividing by zero.
void updateRunning(float* rm, float* rv, const float* mean, const float* var, const BnDims& d,
                   double momentum) {
  double unbias = d.count() > 1 ? double(d.count()) / double(d.count() - 1) : 1.0;
  for (int64_t c = 0; c < d.c; ++c) {
    rm[c] = float((1 - momentum) * rm[c] + momentum * mean[c]);
    rv[c] = float((1 - momentum) * rv[c] + momentum * var[c] * unbias);
  }
}

// BatchNorm inputs: x, [weight, bias], running_mean, running_var.
struct BnPorts {
  bool affine;
  int rm, rv;
  explicit BnPorts(size_t nin) : affine(nin == 5), rm(affine ? 3 : 1), rv(affine ? 4 : 2) {}
};

// Statistics in one pass over x, as sums of x - k with k the channel's first
// element: in double and shifted, E[(x-k)²] - E[x-k]² keeps its precision.
KernelFn batchNormReference(const KernelSig& s) {
  BnDims d = bnDims(s.in[0].shape);
  BnPorts ports(s.in.size());
  double eps = s.attrs->f("eps", 1e-5), momentum = s.attrs->f("momentum", 0.1);
  auto scratch = std::make_shared<BnScratch>(d.c);
  return [d, ports, eps, momentum, scratch](const KernelIO& io) {
    bool training = !io.ctx || io.ctx->training;
    const float* x = io.in[0].f32();
    const float* w = ports.affine ? io.in[1].f32() : nullptr;
    const float* b = ports.affine ? io.in[2].f32() : nullptr;
    float* rm = io.in[ports.rm].f32();
    float* rv = io.in[ports.rv].f32();
    float *y = io.out[0].f32(), *bm = io.out[1].f32(), *bv = io.out[2].f32();
    double *s1 = scratch->a.data(), *s2 = scratch->b.data();
    float *scale = scratch->p.data(), *shift = scratch->q.data();
    parallelFor(d.c, grainFor(d.count()), [&](int64_t lo, int64_t hi) {
      if (training) {
        channelSums(d, lo, hi, s1, s2, [&](int64_t i, int64_t c) {
          double v = double(x[i]) - x[c * d.s];
          return std::pair{v, v * v};
        });
        for (int64_t c = lo; c < hi; ++c) {
          double n = double(d.count()), m = s1[c] / n;
          bm[c] = float(x[c * d.s] + m);
          bv[c] = float(std::max(s2[c] / n - m * m, 0.0));
        }
      } else {
        std::copy(rm + lo, rm + hi, bm + lo);
        std::copy(rv + lo, rv + hi, bv + lo);
      }
      for (int64_t c = lo; c < hi; ++c) {
        scale[c] = float(1.0 / std::sqrt(double(bv[c]) + eps)) * (w ? w[c] : 1.f);
        shift[c] = b ? b[c] : 0.f;
      }
      forEachElement(d, lo, hi,
                     [&](int64_t i, int64_t c) { y[i] = (x[i] - bm[c]) * scale[c] + shift[c]; });
    });
    if (training) updateRunning(rm, rv, bm, bv, d, momentum);
  };
}

// BatchNormGrad inputs: dy, x, batch_mean, batch_var, [weight]; training formulas:
// dx = w·invstd·(dy - mean(dy) - (x - mean)·invstd²·mean(dy·(x - mean))).
KernelFn batchNormGradReference(const KernelSig& s) {
  BnDims d = bnDims(s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  auto scratch = std::make_shared<BnScratch>(d.c);
  return [d, hasWeight, eps, scratch](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32();
    const float *mean = io.in[2].f32(), *var = io.in[3].f32();
    const float* w = hasWeight ? io.in[4].f32() : nullptr;
    float *dx = io.out[0].f32(), *dw = io.out[1].f32(), *db = io.out[2].f32();
    double *sdy = scratch->a.data(), *sdyx = scratch->b.data();  // Σ dy, Σ dy·(x - mean)
    float *k = scratch->p.data(), *mdy = scratch->q.data(), *kx = scratch->r.data();
    parallelFor(d.c, grainFor(2 * d.count()), [&](int64_t lo, int64_t hi) {
      channelSums(d, lo, hi, sdy, sdyx, [&](int64_t i, int64_t c) {
        return std::pair{double(dy[i]), double(dy[i]) * (double(x[i]) - mean[c])};
      });
      for (int64_t c = lo; c < hi; ++c) {
        double invstd = 1.0 / std::sqrt(double(var[c]) + eps), n = double(d.count());
        db[c] = float(sdy[c]);
        dw[c] = float(sdyx[c] * invstd);
        k[c] = float(invstd) * (w ? w[c] : 1.f);
        mdy[c] = float(sdy[c] / n);
        kx[c] = float(sdyx[c] * invstd * invstd / n);
      }
      forEachElement(d, lo, hi, [&](int64_t i, int64_t c) {
        dx[i] = k[c] * (dy[i] - mdy[c] - (x[i] - mean[c]) * kx[c]);
      });
    });
  };
}

// x viewed as rows × cols, cols the normalised trailing shape.
struct LnDims {
  int64_t rows = 1, cols = 1;
};

LnDims lnDims(const KernelSig& s, const Shape& x) {
  LnDims d;
  int64_t k = s.attrs->i("normalized_dims", 1);
  for (size_t i = 0; i < x.size(); ++i)
    (int64_t(i) < int64_t(x.size()) - k ? d.rows : d.cols) *= x[i];
  return d;
}

KernelFn layerNormReference(const KernelSig& s) {
  LnDims d = lnDims(s, s.in[0].shape);
  bool affine = s.in.size() == 3;
  double eps = s.attrs->f("eps", 1e-5);
  return [d, affine, eps](const KernelIO& io) {
    const float* x = io.in[0].f32();
    const float* w = affine ? io.in[1].f32() : nullptr;
    const float* b = affine ? io.in[2].f32() : nullptr;
    float *y = io.out[0].f32(), *mean = io.out[1].f32(), *var = io.out[2].f32();
    parallelFor(d.rows, grainFor(d.cols), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float* xr = x + r * d.cols;
        float* yr = y + r * d.cols;
        double sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < d.cols; ++j) sum += xr[j];
        double mu = sum / double(d.cols);
#pragma omp simd reduction(+ : sq)
        for (int64_t j = 0; j < d.cols; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
        double v = sq / double(d.cols);
        mean[r] = float(mu), var[r] = float(v);
        float m = float(mu), invstd = float(1.0 / std::sqrt(v + eps));
        if (affine) {
#pragma omp simd
          for (int64_t j = 0; j < d.cols; ++j) yr[j] = (xr[j] - m) * invstd * w[j] + b[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < d.cols; ++j) yr[j] = (xr[j] - m) * invstd;
        }
      }
    });
  };
}

// LayerNormGrad inputs: dy, x, mean, var, [weight]. dx per row; dweight and dbias
// per column band, each band walking the rows in order into double sums.
KernelFn layerNormGradReference(const KernelSig& s) {
  LnDims d = lnDims(s, s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  auto sums = std::make_shared<std::vector<double>>(2 * d.cols);
  return [d, hasWeight, eps, sums](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32();
    const float *mean = io.in[2].f32(), *var = io.in[3].f32();
    const float* w = hasWeight ? io.in[4].f32() : nullptr;
    float *dx = io.out[0].f32(), *dw = io.out[1].f32(), *db = io.out[2].f32();
    auto invstd = [&](int64_t r) { return float(1.0 / std::sqrt(double(var[r]) + eps)); };
    parallelFor(d.rows, grainFor(3 * d.cols), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
        float* dxr = dx + r * d.cols;
        float m = mean[r], is = invstd(r);
        double sg = 0, sgx = 0;  // Σ g and Σ g·x̂, g = dy·w
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < d.cols; ++j) {
          float g = dyr[j] * (w ? w[j] : 1.f);
          sg += g, sgx += g * (xr[j] - m) * is;
        }
        float mg = float(sg / double(d.cols)), mgx = float(sgx / double(d.cols));
#pragma omp simd
        for (int64_t j = 0; j < d.cols; ++j)
          dxr[j] = is * (dyr[j] * (w ? w[j] : 1.f) - mg - (xr[j] - m) * is * mgx);
      }
    });
    double *sw = sums->data(), *sb = sw + d.cols;
    parallelFor(d.cols, d.rows * d.cols < kParallelGrain ? d.cols + 1 : 16,
                [&](int64_t lo, int64_t hi) {
                  std::fill(sw + lo, sw + hi, 0.0);
                  std::fill(sb + lo, sb + hi, 0.0);
                  for (int64_t r = 0; r < d.rows; ++r) {
                    const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
                    float m = mean[r], is = invstd(r);
#pragma omp simd
                    for (int64_t j = lo; j < hi; ++j) {
                      sw[j] += dyr[j] * (xr[j] - m) * is;
                      sb[j] += dyr[j];
                    }
                  }
                  for (int64_t j = lo; j < hi; ++j) dw[j] = float(sw[j]), db[j] = float(sb[j]);
                });
  };
}

// oneDNN -------------------------------------------------------------------------

memory::desc vec(int64_t n) {
  return memory::desc({n}, memory::data_type::f32, memory::format_tag::a);
}

// BatchNorm as N × C × S × 1 in nchw: the same memory as any N × C × … input. With
// S = 1 that is also nhwc, for which oneDNN has JIT code; for S > 1 it has only
// generic code (ncsp_bnorm), and declines. A blocked N × C × H × W input (nChw16c)
// has JIT code.
struct DnnlBn {
  BnDims d;
  memory::desc data, stat;
  float eps;

  explicit DnnlBn(const KernelSig& s, int xIndex)
      : d(bnDims(s.in[xIndex].shape)),
        data(s.in[xIndex].layout == Layout::Blocked16
                 ? activationDesc(s.in[xIndex].shape, Layout::Blocked16)
                 : memory::desc({d.n, d.c, d.s, 1}, memory::data_type::f32,
                                d.s == 1 ? memory::format_tag::nhwc : memory::format_tag::nchw)),
        stat(vec(d.c)),
        eps(float(s.attrs->f("eps", 1e-5))) {}

  dnnl::batch_normalization_forward::primitive_desc forward(dnnl::prop_kind prop,
                                                            Flags flags) const {
    dnnl::batch_normalization_forward::desc desc(prop, data, eps, flags);
    return {desc, userScratchpad(), dnnlEngine()};
  }
  // Always with scale and shift: the op's dweight and dbias outputs exist even
  // without affine, and a scale of ones costs nothing.
  dnnl::batch_normalization_backward::primitive_desc backward() const {
    Flags f = Flags::use_scale | Flags::use_shift;
    dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, data, data, eps, f);
    return {desc, userScratchpad(), dnnlEngine(), forward(dnnl::prop_kind::forward_training, f)};
  }
};

Flags affineFlags(bool affine) {
  return affine ? Flags::use_scale | Flags::use_shift : Flags::none;
}

KernelFn batchNormOneDnn(const KernelSig& s) {
  DnnlBn bn(s, 0);
  BnPorts ports(s.in.size());
  double momentum = s.attrs->f("momentum", 0.1);
  Flags f = affineFlags(ports.affine);
  // Mode is a per-step choice: both primitives are made now.
  auto train = std::make_shared<DnnlCall>(DnnlCall::make<dnnl::batch_normalization_forward>(
      bn.forward(dnnl::prop_kind::forward_training, f)));
  auto eval = std::make_shared<DnnlCall>(DnnlCall::make<dnnl::batch_normalization_forward>(
      bn.forward(dnnl::prop_kind::forward_inference, f | Flags::use_global_stats)));
  for (DnnlCall* c : {train.get(), eval.get()}) {
    c->arg(DNNL_ARG_SRC, bn.data);
    c->arg(DNNL_ARG_DST, bn.data);
    c->arg(DNNL_ARG_MEAN, bn.stat);
    c->arg(DNNL_ARG_VARIANCE, bn.stat);
    if (ports.affine) c->arg(DNNL_ARG_SCALE, bn.stat), c->arg(DNNL_ARG_SHIFT, bn.stat);
  }
  BnDims d = bn.d;
  return [train, eval, ports, d, momentum](const KernelIO& io) {
    bool training = !io.ctx || io.ctx->training;
    float* rm = io.in[ports.rm].f32();
    float* rv = io.in[ports.rv].f32();
    float *bm = io.out[1].f32(), *bv = io.out[2].f32();
    DnnlCall& c = training ? *train : *eval;
    c.set(DNNL_ARG_SRC, io.in[0].data);
    c.set(DNNL_ARG_DST, io.out[0].data);
    c.set(DNNL_ARG_MEAN, training ? bm : rm);
    c.set(DNNL_ARG_VARIANCE, training ? bv : rv);
    if (ports.affine) c.set(DNNL_ARG_SCALE, io.in[1].data), c.set(DNNL_ARG_SHIFT, io.in[2].data);
    c.run();
    if (training) {
      updateRunning(rm, rv, bm, bv, d, momentum);
    } else {
      std::memcpy(bm, rm, sizeof(float) * d.c);
      std::memcpy(bv, rv, sizeof(float) * d.c);
    }
  };
}

// The launch both normalisation backwards share: inputs (dy, x, mean, var[, weight]),
// outputs (dx, dweight, dbias). oneDNN 2.6 insists on a shift input in backward too,
// though it never reads it, and on a scale when there is no weight.
KernelFn normBackwardLaunch(std::shared_ptr<DnnlCall> call, bool hasWeight, int64_t channels) {
  auto ones = std::make_shared<std::vector<float>>(channels, 1.f);
  call->set(DNNL_ARG_SHIFT, ones->data());
  if (!hasWeight) call->set(DNNL_ARG_SCALE, ones->data());
  return [call, hasWeight, ones](const KernelIO& io) {
    call->set(DNNL_ARG_DIFF_DST, io.in[0].data);
    call->set(DNNL_ARG_SRC, io.in[1].data);
    call->set(DNNL_ARG_MEAN, io.in[2].data);
    call->set(DNNL_ARG_VARIANCE, io.in[3].data);
    if (hasWeight) call->set(DNNL_ARG_SCALE, io.in[4].data);
    call->set(DNNL_ARG_DIFF_SRC, io.out[0].data);
    call->set(DNNL_ARG_DIFF_SCALE, io.out[1].data);
    call->set(DNNL_ARG_DIFF_SHIFT, io.out[2].data);
    call->run();
  };
}

KernelFn batchNormGradOneDnn(const KernelSig& s) {
  DnnlBn bn(s, 1);
  bool hasWeight = s.in.size() == 5;
  auto call =
      std::make_shared<DnnlCall>(DnnlCall::make<dnnl::batch_normalization_backward>(bn.backward()));
  for (int a : {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC}) call->arg(a, bn.data);
  for (int a : {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_SCALE, DNNL_ARG_SHIFT,
                DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT})
    call->arg(a, bn.stat);
  return normBackwardLaunch(call, hasWeight, bn.d.c);
}

// LayerNorm as rows × cols.
struct DnnlLn {
  LnDims d;
  memory::desc data, stat, param;
  float eps;

  DnnlLn(const KernelSig& s, int xIndex)
      : d(lnDims(s, s.in[xIndex].shape)),
        data({d.rows, d.cols}, memory::data_type::f32, memory::format_tag::ab),
        stat(vec(d.rows)),
        param(vec(d.cols)),
        eps(float(s.attrs->f("eps", 1e-5))) {}

  dnnl::layer_normalization_forward::primitive_desc forward(Flags flags) const {
    dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_training, data, stat, eps,
                                                 flags);
    return {desc, userScratchpad(), dnnlEngine()};
  }
  // With scale and shift always, as BatchNorm's backward.
  dnnl::layer_normalization_backward::primitive_desc backward() const {
    Flags f = Flags::use_scale | Flags::use_shift;
    dnnl::layer_normalization_backward::desc desc(dnnl::prop_kind::backward, data, data, stat, eps,
                                                  f);
    return {desc, userScratchpad(), dnnlEngine(), forward(f)};
  }
};

KernelFn layerNormOneDnn(const KernelSig& s) {
  DnnlLn ln(s, 0);
  bool affine = s.in.size() == 3;
  auto call = std::make_shared<DnnlCall>(
      DnnlCall::make<dnnl::layer_normalization_forward>(ln.forward(affineFlags(affine))));
  call->arg(DNNL_ARG_SRC, ln.data);
  call->arg(DNNL_ARG_DST, ln.data);
  call->arg(DNNL_ARG_MEAN, ln.stat);
  call->arg(DNNL_ARG_VARIANCE, ln.stat);
  if (affine) call->arg(DNNL_ARG_SCALE, ln.param), call->arg(DNNL_ARG_SHIFT, ln.param);
  return [call, affine](const KernelIO& io) {
    call->set(DNNL_ARG_SRC, io.in[0].data);
    call->set(DNNL_ARG_DST, io.out[0].data);
    call->set(DNNL_ARG_MEAN, io.out[1].data);
    call->set(DNNL_ARG_VARIANCE, io.out[2].data);
    if (affine) call->set(DNNL_ARG_SCALE, io.in[1].data), call->set(DNNL_ARG_SHIFT, io.in[2].data);
    call->run();
  };
}

KernelFn layerNormGradOneDnn(const KernelSig& s) {
  DnnlLn ln(s, 1);
  bool hasWeight = s.in.size() == 5;
  auto call =
      std::make_shared<DnnlCall>(DnnlCall::make<dnnl::layer_normalization_backward>(ln.backward()));
  for (int a : {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC}) call->arg(a, ln.data);
  for (int a : {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE}) call->arg(a, ln.stat);
  for (int a : {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT})
    call->arg(a, ln.param);
  return normBackwardLaunch(call, hasWeight, ln.d.cols);
}

// Declines when the signature is not float, or as dnnlDecline says. oneDNN 2.6's
// generic batch normalisation code for plain layouts (ncsp_bnorm, and nspc_bnorm for
// channel counts its JIT code skips) ran 1.5-2× slower than the reference kernels
// in our single-thread measurements; its JIT code ran about as fast.
template <class Build>
std::function<std::string(const KernelSig&)> declineUnless(Build build) {
  return [build](const KernelSig& s) {
    if (std::string e = declineUnlessFloat(s); !e.empty()) return e;
    return dnnlDecline([&] { return build(s); }, {"ncsp_bnorm", "nspc_bnorm"});
  };
}

}  // namespace

void registerNormalization(KernelRegistry& r) {
  auto cpu = DeviceKind::Cpu;
  r.add("BatchNorm", cpu,
        {"onednn.batch_normalization", declineUnless([](const KernelSig& s) -> Impls {
           DnnlBn bn(s, 0);
           Flags f = affineFlags(s.in.size() == 5);
           return {bn.forward(dnnl::prop_kind::forward_training, f).impl_info_str(),
                   bn.forward(dnnl::prop_kind::forward_inference, f | Flags::use_global_stats)
                       .impl_info_str()};
         }),
         batchNormOneDnn, true});
  r.add("BatchNorm", cpu, kernel("reference.batch_norm", batchNormReference));
  r.add("BatchNormGrad", cpu,
        {"onednn.batch_normalization_backward", declineUnless([](const KernelSig& s) -> Impls {
           return {DnnlBn(s, 1).backward().impl_info_str()};
         }),
         batchNormGradOneDnn, true});
  r.add("BatchNormGrad", cpu, kernel("reference.batch_norm_grad", batchNormGradReference));
  r.add("LayerNorm", cpu,
        {"onednn.layer_normalization", declineUnless([](const KernelSig& s) -> Impls {
           return {DnnlLn(s, 0).forward(affineFlags(s.in.size() == 3)).impl_info_str()};
         }),
         layerNormOneDnn});
  r.add("LayerNorm", cpu, kernel("reference.layer_norm", layerNormReference));
  r.add("LayerNormGrad", cpu,
        {"onednn.layer_normalization_backward", declineUnless([](const KernelSig& s) -> Impls {
           return {DnnlLn(s, 1).backward().impl_info_str()};
         }),
         layerNormGradOneDnn});
  r.add("LayerNormGrad", cpu, kernel("reference.layer_norm_grad", layerNormGradReference));
}

void registerPoolNorm(KernelRegistry& r) {
  registerPooling(r);
  registerNormalization(r);
}

}  // namespace netloom::cpu
