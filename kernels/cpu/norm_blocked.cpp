// BatchNorm on nChw16c activations, float or bf16, for the CPU (norm.cpp registers
// them beside the plain and synchronised kernels).
#include <algorithm>
#include <type_traits>

#include "kernels/cpu/batch_norm_math.h"
#include "kernels/cpu/half.h"

namespace netloom::cpu {
namespace {

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

}  // namespace

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

}  // namespace netloom::cpu
