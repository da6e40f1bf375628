// What the CPU's BatchNorm kernels share (norm.cpp: plain layouts and synchronised;
// norm_blocked.cpp: nChw16c): the dimensions, the per-channel working memory, and the
// statistics and gradient terms from the sums, in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/core/functors.h"
#include "kernels/cpu/pool_norm.h"

namespace netloom::cpu {

// x viewed as N × C × S (S: the product of the dimensions after C).
struct BnDims {
  int64_t n = 1, c = 1, s = 1;
  int64_t count() const { return n * s; }  // elements per channel
};

inline BnDims bnDims(const Shape& x) {
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
inline void channelSums(const BnDims& d, int64_t lo, int64_t hi, double* a, double* b, Term term) {
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
inline void updateRunning(float* rm, float* rv, const float* mean, const float* var,
                          const BnDims& d, double momentum) {
  double unbias = d.count() > 1 ? double(d.count()) / double(d.count() - 1) : 1.0;
  fn::RunningAverage meanAverage{momentum, 1.0}, varAverage{momentum, unbias};
  for (int64_t c = 0; c < d.c; ++c) {
    rm[c] = meanAverage(rm[c], mean[c]);
    rv[c] = varAverage(rv[c], var[c]);
  }
}

// A ReLU fused into the output (the "activation" attribute, set by fusion).
inline bool fusedRelu(const KernelSig& s) {
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

// The nChw16c kernels (norm_blocked.cpp): x, y, dy and dx float or bf16.
// Declines unless the data ports (`ports` of the inputs, output 0) are nChw16c.
std::string declineUnlessBlocked(const KernelSig& s, std::initializer_list<int> ports);
KernelFn batchNormBlocked(const KernelSig& s);
KernelFn batchNormGradBlocked(const KernelSig& s);

}  // namespace netloom::cpu
