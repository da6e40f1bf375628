// BatchNorm on the CPU (LayerNorm is in layer_norm.cpp), on kernels of our own in both
// activation layouts: they accumulate its statistics and gradient sums in double, in
// an order fixed by the shapes alone, so results are independent of the thread count
// and within float rounding of a float64 computation. oneDNN 2.6's batch
// normalisation sums in float (batch means off by ~1e-4 relative at 32 channels ×
// batch 128, where PyTorch is at 1e-6) and is not used. The running statistics are
// updated here: oneDNN has no notion of them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/functors.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/pool_norm.h"

namespace netloom::cpu {
namespace {

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

// Per-channel working memory, allocated at prepare time; `partial` holds the
// blocked kernels' per-sample sums (two N × C tables).
struct BnScratch {
  std::vector<double> a, b, partial;
  std::vector<float> p, q, r, unused;
  explicit BnScratch(int64_t c, int64_t samples = 0)
      : a(c), b(c), partial(2 * samples * c), p(c), q(c), r(c), unused(2 * c) {}
};

// Per channel, from the shifted sums Σ(x - k) and Σ(x - k)² over n elements: the
// batch mean and biased variance. In double, the shift keeps E[v²] - E[v]² exact
// to far below float rounding.
inline void finishStatistics(int64_t lo, int64_t hi, const double* s1, const double* s2,
                             const float* shift, double n, float* mean, float* var) {
  for (int64_t c = lo; c < hi; ++c) {
    double m = s1[c] / n;
    mean[c] = float(shift[c] + m);
    var[c] = float(std::max(s2[c] / n - m * m, 0.0));
  }
}

// y = (x - mean)·scale + shift with scale = w / √(var + eps), per channel.
inline void affineOf(int64_t lo, int64_t hi, const float* var, const float* w, const float* b,
                     double eps, float* scale, float* shift) {
  for (int64_t c = lo; c < hi; ++c) {
    scale[c] = float(1.0 / std::sqrt(double(var[c]) + eps)) * (w ? w[c] : 1.f);
    shift[c] = b ? b[c] : 0.f;
  }
}

// The backward's per-channel terms from Σ dy and Σ dy·(x - mean):
// dx = k·(dy - mdy - (x - mean)·kx), dweight and dbias.
struct GradTerms {
  float *k, *mdy, *kx;
};
inline void finishGradient(int64_t lo, int64_t hi, const double* sdy, const double* sdyx,
                           const float* var, const float* w, double eps, double n, float* dw,
                           float* db, GradTerms t) {
  for (int64_t c = lo; c < hi; ++c) {
    double invstd = 1.0 / std::sqrt(double(var[c]) + eps);
    db[c] = float(sdy[c]);
    dw[c] = float(sdyx[c] * invstd);
    t.k[c] = float(invstd) * (w ? w[c] : 1.f);
    t.mdy[c] = float(sdy[c] / n);
    t.kx[c] = float(sdyx[c] * invstd * invstd / n);
  }
}

// dx = k·(dy - mdy - (x - mean)·kx) over the channels of the band [lo, hi).
inline void inputGradient(const BnDims& d, int64_t lo, int64_t hi, const float* dy, const float* x,
                          const float* mean, const GradTerms& t, float* dx) {
  forEachElement(d, lo, hi, [&](int64_t i, int64_t c) {
    dx[i] = t.k[c] * (dy[i] - t.mdy[c] - (x[i] - mean[c]) * t.kx[c]);
  });
}

// PyTorch's update: the batch variance enters unbiased. A single element per
// channel has no unbiased variance (PyTorch refuses to train on it); the biased
// one, zero, is used instead of dividing by zero.
void updateRunning(float* rm, float* rv, const float* mean, const float* var, const BnDims& d,
                   double momentum) {
  double unbias = d.count() > 1 ? double(d.count()) / double(d.count() - 1) : 1.0;
  fn::RunningAverage meanAverage{momentum, 1.0}, varAverage{momentum, unbias};
  for (int64_t c = 0; c < d.c; ++c) {
    rm[c] = meanAverage(rm[c], mean[c]);
    rv[c] = varAverage(rv[c], var[c]);
  }
}

// A ReLU fused into the output (the "activation" attribute, set by fusion).
bool fusedRelu(const KernelSig& s) {
  return s.attrs->s("activation", "none") == "relu";
}

// One output element, through the fused ReLU where there is one (NaN kept, as fn::Relu).
inline float outputOf(float y, bool relu) {
  return relu ? fn::Relu{}(y) : y;
}

// BatchNorm inputs: x, [weight, bias], running_mean, running_var.
struct BnPorts {
  bool affine;
  int rm, rv;
  explicit BnPorts(size_t nin) : affine(nin == 5), rm(affine ? 3 : 1), rv(affine ? 4 : 2) {}
};

// A BatchNorm launch's tensors: outputs y, batch mean, batch variance.
struct BnTensors {
  const float *x, *w, *b;
  float *rm, *rv, *y, *bm, *bv;
  BnTensors(const KernelIO& io, const BnPorts& p)
      : x(io.in[0].f32()),
        w(p.affine ? io.in[1].f32() : nullptr),
        b(p.affine ? io.in[2].f32() : nullptr),
        rm(io.in[p.rm].f32()),
        rv(io.in[p.rv].f32()),
        y(io.out[0].f32()),
        bm(io.out[1].f32()),
        bv(io.out[2].f32()) {}
};

// Statistics in one pass over x, as sums of x - k with k the channel's first
// element: in double and shifted, E[(x-k)²] - E[x-k]² keeps its precision.
KernelFn batchNormReference(const KernelSig& s) {
  BnDims d = bnDims(s.in[0].shape);
  BnPorts ports(s.in.size());
  double eps = s.attrs->f("eps", 1e-5), momentum = s.attrs->f("momentum", 0.1);
  auto scratch = std::make_shared<BnScratch>(d.c);
  const bool relu = fusedRelu(s);
  return [d, ports, eps, momentum, scratch, relu](const KernelIO& io) {
    bool training = !io.ctx || io.ctx->training;
    // Named pointers, not a structured binding: lambdas below capture them, which
    // clang before 16 refuses for bindings.
    const BnTensors t(io, ports);
    const float *x = t.x, *w = t.w, *b = t.b;
    float *rm = t.rm, *rv = t.rv, *y = t.y, *bm = t.bm, *bv = t.bv;
    double *s1 = scratch->a.data(), *s2 = scratch->b.data();
    float *scale = scratch->p.data(), *shift = scratch->q.data(), *k = scratch->r.data();
    parallelFor(d.c, grainFor(d.count()), [&](int64_t lo, int64_t hi) {
      if (training) {
        for (int64_t c = lo; c < hi; ++c) k[c] = x[c * d.s];
        channelSums(d, lo, hi, s1, s2, [&](int64_t i, int64_t c) {
          double v = double(x[i]) - k[c];
          return std::pair{v, v * v};
        });
        finishStatistics(lo, hi, s1, s2, k, double(d.count()), bm, bv);
      } else {
        std::copy(rm + lo, rm + hi, bm + lo);
        std::copy(rv + lo, rv + hi, bv + lo);
      }
      affineOf(lo, hi, bv, w, b, eps, scale, shift);
      forEachElement(d, lo, hi, [&](int64_t i, int64_t c) {
        y[i] = outputOf((x[i] - bm[c]) * scale[c] + shift[c], relu);
      });
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
    GradTerms t{scratch->p.data(), scratch->q.data(), scratch->r.data()};
    parallelFor(d.c, grainFor(2 * d.count()), [&](int64_t lo, int64_t hi) {
      channelSums(d, lo, hi, sdy, sdyx, [&](int64_t i, int64_t c) {
        return std::pair{double(dy[i]), double(dy[i]) * (double(x[i]) - mean[c])};
      });
      finishGradient(lo, hi, sdy, sdyx, var, w, eps, double(d.count()), dw, db, t);
      inputGradient(d, lo, hi, dy, x, mean, t, dx);
    });
  };
}

// SyncBatchNorm: the statistics of the whole global batch, from each rank's sums
// added across the ranks (plain layout). The sums are shifted by the running mean,
// which every rank holds alike, so they add up. Backward, the input's gradient takes
// the global sums; the weight's and bias's take this rank's, as the gradient buckets
// add them across the ranks afterwards.
bool syncing(const KernelSig& s) {
  return s.attrs->b("sync") && s.comm && s.comm->size() > 1;
}

std::string declineUnlessSyncing(const KernelSig& s) {
  if (!syncing(s)) return "for a BatchNorm synchronised across ranks";
  if (std::string e = declineUnlessFloat(s); !e.empty()) return e;
  for (const TensorDesc& t : s.in)
    if (t.layout != Layout::Plain) return "takes plain layouts only";
  return {};
}

KernelFn syncBatchNorm(const KernelSig& s) {
  BnDims d = bnDims(s.in[0].shape);
  BnPorts ports(s.in.size());
  double eps = s.attrs->f("eps", 1e-5), momentum = s.attrs->f("momentum", 0.1);
  Communicator* comm = s.comm;
  KernelFn evaluation = batchNormReference(s);
  auto scratch = std::make_shared<BnScratch>(d.c);
  auto sums = std::make_shared<std::vector<double>>(size_t(2 * d.c + 1));
  const bool relu = fusedRelu(s);
  return [d, ports, eps, momentum, comm, evaluation, scratch, sums, relu](const KernelIO& io) {
    if (io.ctx && !io.ctx->training) return evaluation(io);
    const BnTensors t(io, ports);
    const float *x = t.x, *w = t.w, *b = t.b, *rm = t.rm;
    float *y = t.y, *bm = t.bm, *bv = t.bv;
    double *s1 = scratch->a.data(), *s2 = scratch->b.data();
    float *scale = scratch->p.data(), *shift = scratch->q.data();
    parallelFor(d.c, grainFor(d.count()), [&](int64_t lo, int64_t hi) {
      channelSums(d, lo, hi, s1, s2, [&](int64_t i, int64_t c) {
        double v = double(x[i]) - rm[c];
        return std::pair{v, v * v};
      });
    });
    std::vector<double>& all = *sums;
    std::copy(s1, s1 + d.c, all.begin());
    std::copy(s2, s2 + d.c, all.begin() + d.c);
    all[size_t(2 * d.c)] = double(d.count());
    comm->allreduce(all.data(), int64_t(all.size()));
    const double count = all[size_t(2 * d.c)];
    finishStatistics(0, d.c, all.data(), all.data() + d.c, rm, count, bm, bv);
    affineOf(0, d.c, bv, w, b, eps, scale, shift);
    parallelFor(d.c, grainFor(d.count()), [&](int64_t lo, int64_t hi) {
      forEachElement(d, lo, hi, [&](int64_t i, int64_t c) {
        y[i] = outputOf((x[i] - bm[c]) * scale[c] + shift[c], relu);
      });
    });
    BnDims global = d;  // the running variance is unbiased over the global count
    global.n = int64_t(count) / d.s;
    updateRunning(t.rm, t.rv, bm, bv, global, momentum);
  };
}

KernelFn syncBatchNormGrad(const KernelSig& s) {
  BnDims d = bnDims(s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  Communicator* comm = s.comm;
  auto scratch = std::make_shared<BnScratch>(d.c);
  auto sums = std::make_shared<std::vector<double>>(size_t(2 * d.c + 1));
  return [d, hasWeight, eps, comm, scratch, sums](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32();
    const float *mean = io.in[2].f32(), *var = io.in[3].f32();
    const float* w = hasWeight ? io.in[4].f32() : nullptr;
    float *dx = io.out[0].f32(), *dw = io.out[1].f32(), *db = io.out[2].f32();
    double *sdy = scratch->a.data(), *sdyx = scratch->b.data();
    GradTerms t{scratch->p.data(), scratch->q.data(), scratch->r.data()};
    parallelFor(d.c, grainFor(2 * d.count()), [&](int64_t lo, int64_t hi) {
      channelSums(d, lo, hi, sdy, sdyx, [&](int64_t i, int64_t c) {
        return std::pair{double(dy[i]), double(dy[i]) * (double(x[i]) - mean[c])};
      });
    });
    std::vector<double>& all = *sums;
    std::copy(sdy, sdy + d.c, all.begin());
    std::copy(sdyx, sdyx + d.c, all.begin() + d.c);
    all[size_t(2 * d.c)] = double(d.count());
    comm->allreduce(all.data(), int64_t(all.size()));
    // This rank's sums give the weight's and bias's gradients; the global ones the
    // input's (its terms are overwritten by the second call).
    finishGradient(0, d.c, sdy, sdyx, var, w, eps, double(d.count()), dw, db, t);
    float* unused = scratch->unused.data();  // the second call's dw and db
    finishGradient(0, d.c, all.data(), all.data() + d.c, var, w, eps, all[size_t(2 * d.c)], unused,
                   unused + d.c, t);
    parallelFor(d.c, grainFor(2 * d.count()),
                [&](int64_t lo, int64_t hi) { inputGradient(d, lo, hi, dy, x, mean, t, dx); });
  };
}

// nChw16c --------------------------------------------------------------------------
// x[n][c / 16][s][c % 16]: work splits into (sample, 16-channel block) items, each a
// contiguous S × 16 run whose 16 lanes are 16 channels, summed into double vectors.
// Each item's sums go to its own row of an N × C table, added over the samples in
// order afterwards, so every thread count gives the same bits and every core has work
// even with few channels. The sums run in double in one pass, shifted by each
// channel's first element as in the reference.

// Calls f(item, n, c0, base) for each (sample n, block of channels c0 … c0 + 15)
// item, whose S × 16 run starts at flat index `base`. The loops inside the callers
// are written out over 16 local lanes: through a lambda per element they ran 7×
// slower.
template <class F>
inline void forEachRun(const BnDims& d, F f) {
  int64_t blocks = d.c / 16;
  parallelFor(d.n * blocks, grainFor(16 * d.s), [&](int64_t lo, int64_t hi) {
    for (int64_t it = lo; it < hi; ++it) f(it / blocks, (it % blocks) * 16, it * d.s * 16);
  });
}

// Adds the per-sample sums (two N × C tables) over the samples, in order.
void sumSamples(const BnDims& d, const double* pa, const double* pb, double* a, double* b) {
  std::fill(a, a + d.c, 0.0);
  std::fill(b, b + d.c, 0.0);
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c) a[c] += pa[n * d.c + c], b[c] += pb[n * d.c + c];
}

// Per channel, Σ(x - k) and Σ(x - k)² into a and b.
template <class X>
void blockedShiftedSums(const BnDims& d, const X* x, const float* k, BnScratch& scratch, double* a,
                        double* b) {
  double *pa = scratch.partial.data(), *pb = pa + d.n * d.c;
  forEachRun(d, [&](int64_t n, int64_t c0, int64_t base) {
    const X* p = x + base;
    double shift[16], sa[16] = {}, sb[16] = {};
    for (int l = 0; l < 16; ++l) shift[l] = k[c0 + l];
    for (int64_t s = 0; s < d.s; ++s) {
#pragma omp simd
      for (int l = 0; l < 16; ++l) {
        double v = double(load(p, s * 16 + l)) - shift[l];
        sa[l] += v, sb[l] += v * v;
      }
    }
    std::copy(sa, sa + 16, pa + n * d.c + c0);
    std::copy(sb, sb + 16, pb + n * d.c + c0);
  });
  sumSamples(d, pa, pb, a, b);
}

// Per channel, Σ dy and Σ dy·(x - mean) into a and b.
template <class G, class X>
void blockedGradSums(const BnDims& d, const G* dy, const X* x, const float* mean,
                     BnScratch& scratch, double* a, double* b) {
  double *pa = scratch.partial.data(), *pb = pa + d.n * d.c;
  forEachRun(d, [&](int64_t n, int64_t c0, int64_t base) {
    const G* g = dy + base;
    const X* p = x + base;
    double m[16], sa[16] = {}, sb[16] = {};
    for (int l = 0; l < 16; ++l) m[l] = mean[c0 + l];
    for (int64_t s = 0; s < d.s; ++s) {
#pragma omp simd
      for (int l = 0; l < 16; ++l) {
        double gv = load(g, s * 16 + l);
        sa[l] += gv, sb[l] += gv * (double(load(p, s * 16 + l)) - m[l]);
      }
    }
    std::copy(sa, sa + 16, pa + n * d.c + c0);
    std::copy(sb, sb + 16, pb + n * d.c + c0);
  });
  sumSamples(d, pa, pb, a, b);
}

bool blocked(const TensorDesc& t) {
  return t.layout == Layout::Blocked16 && t.shape.size() == 4 && t.shape[1] % 16 == 0;
}

// Declines unless the data ports (`ports` of the inputs, output 0) are nChw16c, in
// float or bf16; the statistics and parameters are float.
std::string declineUnlessBlocked(const KernelSig& s, std::initializer_list<int> ports) {
  for (size_t i = 0; i < s.in.size(); ++i) {
    const bool data = std::find(ports.begin(), ports.end(), int(i)) != ports.end();
    if (s.in[i].dtype != DType::F32 && !(data && s.in[i].dtype == DType::BF16))
      return "takes float32 statistics and parameters, and float32 or bf16 activations";
  }
  for (size_t i = 1; i < s.out.size(); ++i)
    if (s.out[i].dtype != DType::F32) return "writes float32 statistics and sums";
  for (int p : ports)
    if (!blocked(s.in[p])) return "for nChw16c activations; the reference takes plain ones";
  if (!blocked(s.out[0])) return "for nChw16c activations; the reference takes plain ones";
  return {};
}

template <class X, class Y>
KernelFn batchNormBlockedAs(const KernelSig& s) {
  BnDims d = bnDims(s.in[0].shape);
  BnPorts ports(s.in.size());
  double eps = s.attrs->f("eps", 1e-5), momentum = s.attrs->f("momentum", 0.1);
  auto scratch = std::make_shared<BnScratch>(d.c, d.n);
  const bool relu = fusedRelu(s);
  return [d, ports, eps, momentum, scratch, relu](const KernelIO& io) {
    bool training = !io.ctx || io.ctx->training;
    // Named pointers, not a structured binding: lambdas below capture them, which
    // clang before 16 refuses for bindings.
    const BnTensors t(io, ports);
    const X* x = static_cast<const X*>(io.in[0].data);
    Y* y = static_cast<Y*>(io.out[0].data);
    const float *w = t.w, *b = t.b;
    float *rm = t.rm, *rv = t.rv, *bm = t.bm, *bv = t.bv;
    float *scale = scratch->p.data(), *shift = scratch->q.data(), *k = scratch->r.data();
    if (training) {
      for (int64_t c = 0; c < d.c; ++c) k[c] = load(x, (c / 16) * d.s * 16 + c % 16);
      double *s1 = scratch->a.data(), *s2 = scratch->b.data();
      blockedShiftedSums(d, x, k, *scratch, s1, s2);
      finishStatistics(0, d.c, s1, s2, k, double(d.count()), bm, bv);
      updateRunning(rm, rv, bm, bv, d, momentum);
    } else {
      std::copy(rm, rm + d.c, bm);
      std::copy(rv, rv + d.c, bv);
    }
    affineOf(0, d.c, bv, w, b, eps, scale, shift);
    forEachRun(d, [&](int64_t, int64_t c0, int64_t base) {
      float m[16], sc[16], sh[16];
      for (int l = 0; l < 16; ++l) m[l] = bm[c0 + l], sc[l] = scale[c0 + l], sh[l] = shift[c0 + l];
      const X* xs = x + base;
      Y* ys = y + base;
      for (int64_t i = 0; i < d.s * 16; i += 16) {
#pragma omp simd
        for (int l = 0; l < 16; ++l)
          store(ys, i + l, outputOf((load(xs, i + l) - m[l]) * sc[l] + sh[l], relu));
      }
    });
  };
}

KernelFn batchNormBlocked(const KernelSig& s) {
  KernelFn made;
  withElement(s.in[0].dtype, [&](auto* x) {
    withElement(s.out[0].dtype, [&](auto* y) {
      made = batchNormBlockedAs<std::remove_pointer_t<decltype(x)>,
                                std::remove_pointer_t<decltype(y)>>(s);
    });
  });
  return made;
}

template <class G, class X, class D>
KernelFn batchNormGradBlockedAs(const KernelSig& s) {
  BnDims d = bnDims(s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  auto scratch = std::make_shared<BnScratch>(d.c, d.n);
  return [d, hasWeight, eps, scratch](const KernelIO& io) {
    const G* dy = static_cast<const G*>(io.in[0].data);
    const X* x = static_cast<const X*>(io.in[1].data);
    const float *mean = io.in[2].f32(), *var = io.in[3].f32();
    const float* w = hasWeight ? io.in[4].f32() : nullptr;
    D* dx = static_cast<D*>(io.out[0].data);
    float *dw = io.out[1].f32(), *db = io.out[2].f32();
    double *sdy = scratch->a.data(), *sdyx = scratch->b.data();
    GradTerms t{scratch->p.data(), scratch->q.data(), scratch->r.data()};
    blockedGradSums(d, dy, x, mean, *scratch, sdy, sdyx);
    finishGradient(0, d.c, sdy, sdyx, var, w, eps, double(d.count()), dw, db, t);
    forEachRun(d, [&](int64_t, int64_t c0, int64_t base) {
      float k[16], mdy[16], kx[16], m[16];
      for (int l = 0; l < 16; ++l)
        k[l] = t.k[c0 + l], mdy[l] = t.mdy[c0 + l], kx[l] = t.kx[c0 + l], m[l] = mean[c0 + l];
      const G* g = dy + base;
      const X* xs = x + base;
      D* out = dx + base;
      for (int64_t i = 0; i < d.s * 16; i += 16) {
#pragma omp simd
        for (int l = 0; l < 16; ++l)
          store(out, i + l, k[l] * (load(g, i + l) - mdy[l] - (load(xs, i + l) - m[l]) * kx[l]));
      }
    });
  };
}

KernelFn batchNormGradBlocked(const KernelSig& s) {
  KernelFn made;
  withElement(s.in[0].dtype, [&](auto* g) {
    withElement(s.in[1].dtype, [&](auto* x) {
      withElement(s.out[0].dtype, [&](auto* dx) {
        made = batchNormGradBlockedAs<std::remove_pointer_t<decltype(g)>,
                                      std::remove_pointer_t<decltype(x)>,
                                      std::remove_pointer_t<decltype(dx)>>(s);
      });
    });
  });
  return made;
}

// The weight of a FoldBatchNorm in PyTorch's layout.
TensorDesc plainWeight(const KernelSig& s) {
  TensorDesc plain = s.in[0];
  plain.layout = Layout::Plain;
  plain.format.clear();
  return plain;
}

// FoldBatchNorm's inputs: weight, running_mean, running_var, [bias], [γ, β]; outputs
// the folded weight (plain) and bias (fn::FoldBatchNorm, BatchNorm's own scale). A
// packed weight is converted to PyTorch's layout first, by a reorder prepared here.
KernelFn foldBatchNorm(const KernelSig& s) {
  const TensorDesc weight = s.in[0];
  KernelFn unpack =
      weight.layout == Layout::Plain ? nullptr : layoutConverter(weight, plainWeight(s));
  const int64_t c = weight.shape[0], row = numel(weight.shape) / std::max<int64_t>(1, c);
  const bool bias = s.attrs->b("bias"), affine = s.attrs->b("affine");
  const double eps = s.attrs->f("eps", 1e-5);
  const int at = bias ? 4 : 3;
  return [=](const KernelIO& io) {
    const float *mean = io.in[1].f32(), *var = io.in[2].f32();
    const float* b = bias ? io.in[3].f32() : nullptr;
    const float* gamma = affine ? io.in[at].f32() : nullptr;
    const float* beta = affine ? io.in[at + 1].f32() : nullptr;
    float *w = io.out[0].f32(), *bOut = io.out[1].f32();
    if (unpack)
      unpack(KernelIO{io.in, io.out, 1, 1, io.ctx});
    else
      std::copy(io.in[0].f32(), io.in[0].f32() + c * row, w);
    const fn::FoldBatchNorm fold{eps};
    for (int64_t ch = 0; ch < c; ++ch) {
      const float scale = fold.scale(var[ch], gamma ? gamma[ch] : 1.f);
      float* wr = w + ch * row;
      for (int64_t k = 0; k < row; ++k) wr[k] *= scale;
      bOut[ch] = fold.bias(b ? b[ch] : 0.f, mean[ch], scale, beta ? beta[ch] : 0.f);
    }
  };
}

}  // namespace

void registerNormalization(KernelRegistry& r) {
  static constexpr const char* kSyncPlain = "a synchronised BatchNorm takes plain layouts";
  auto cpu = DeviceKind::Cpu;
  r.add("BatchNorm", cpu, {"cpu.sync_batch_norm", declineUnlessSyncing, syncBatchNorm, true});
  KernelImpl blockedForward{"cpu.batch_norm_blocked",
                            [](const KernelSig& s) {
                              return s.attrs->b("sync") ? std::string(kSyncPlain)
                                                        : declineUnlessBlocked(s, {0});
                            },
                            batchNormBlocked, true};
  blockedForward.halfTensors = true;
  r.add("BatchNorm", cpu, std::move(blockedForward));
  r.add("BatchNorm", cpu, kernel("reference.batch_norm", batchNormReference));
  r.add("BatchNormGrad", cpu,
        {"cpu.sync_batch_norm_grad", declineUnlessSyncing, syncBatchNormGrad, true});
  KernelImpl blockedBackward{
      "cpu.batch_norm_grad_blocked",
      [](const KernelSig& s) {
        return s.attrs->b("sync") ? std::string(kSyncPlain) : declineUnlessBlocked(s, {0, 1});
      },
      batchNormGradBlocked, true};
  blockedBackward.halfTensors = true;
  r.add("BatchNormGrad", cpu, std::move(blockedBackward));
  r.add("BatchNormGrad", cpu, kernel("reference.batch_norm_grad", batchNormGradReference));
  KernelImpl fold = kernel("cpu.fold_batch_norm", foldBatchNorm);
  fold.anyLayout = true;  // the weight may be stored packed
  fold.decline = [](const KernelSig& s) -> std::string {
    if (std::string e = declineUnlessFloat(s); !e.empty()) return e;
    for (size_t k = 1; k < s.in.size(); ++k)
      if (s.in[k].layout != Layout::Plain) return "per-channel inputs are plain";
    if (s.out[0].layout != Layout::Plain) return "writes the folded weight plain";
    if (s.in[0].layout != Layout::Plain && !layoutConverter(s.in[0], plainWeight(s)))
      return "no reorder reads the weight's layout '" + layoutName(s.in[0]) + "'";
    return {};
  };
  r.add("FoldBatchNorm", cpu, std::move(fold));
}

void registerPoolNorm(KernelRegistry& r) {
  registerPooling(r);
  registerNormalization(r);
  registerLayerNorm(r);
}

}  // namespace netloom::cpu
