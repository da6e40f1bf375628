// Scaled dot-product attention on the CPU, blocked as FlashAttention is (Dao et al.,
// 2022): a block of queries walks the keys a block at a time with an online
// softmax, so no head's T × S matrix is ever held, only a block of it. The forward
// keeps each query's log-sum-exp; the backward recomputes each block's
// probabilities from it. The forward runs blocks of queries in parallel; the
// backward runs each (batch, head) on one thread, which then owns its dq, dk and dv
// and sums them in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/core/attention_plan.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

constexpr int64_t kQueryBlock = 16;
constexpr int64_t kKeyBlock = 64;

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The view of one (batch, head): its rows of q, k, v and its mask.
struct Head {
  const AttentionPlan& p;
  int64_t b, h;
  const float *q, *k, *v;
  fn::AttentionMaskView mask;

  Head(const AttentionPlan& plan, int64_t bh, const float* q0, const float* k0, const float* v0,
       const fn::AttentionMaskView& m)
      : p(plan),
        b(bh / plan.h),
        h(bh % plan.h),
        q(q0 + bh * plan.t * plan.d),
        k(k0 + bh * plan.s * plan.d),
        v(v0 + bh * plan.s * plan.dv),
        mask(m) {}

  // Scores of queries [i0, i1) against keys [j0, j1), -inf where hidden, into
  // `out` (row stride kKeyBlock).
  void scores(int64_t i0, int64_t i1, int64_t j0, int64_t j1, const fn::AttentionMask& am,
              float* out) const {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = out + (i - i0) * kKeyBlock;
      for (int64_t j = j0; j < j1; ++j) {
        const float m = mask.at(b, h, i, j);
        row[j - j0] = am.hidden(i, j) || m == -INFINITY
                          ? -INFINITY
                          : dot(q + i * p.d, k + j * p.d, p.d) * p.scale + m;
      }
    }
  }
  // The last key block that query rows [i0, i1) can see.
  int64_t keyEnd(int64_t i1) const { return p.causal ? std::min(p.s, i1) : p.s; }
};

// Inputs q, k, v[, mask]; outputs y, lse.
KernelFn attentionForward(const KernelSig& sig) {
  const AttentionPlan p = AttentionPlan::of(sig, 0);
  const int64_t blocks = (p.t + kQueryBlock - 1) / kQueryBlock;
  return [p, blocks](const KernelIO& io) {
    const fn::AttentionMask am = p.settings(io.ctx->seed, io.ctx->step, io.ctx->training);
    const fn::AttentionMaskView mask = p.maskView(p.hasMask ? io.in[3].data : nullptr);
    const float *q0 = io.in[0].f32(), *k0 = io.in[1].f32(), *v0 = io.in[2].f32();
    float *y0 = io.out[0].f32(), *lse0 = io.out[1].f32();
    parallelFor(p.b * p.h * blocks, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> s(size_t(kQueryBlock * kKeyBlock)), acc(size_t(kQueryBlock * p.dv));
      fn::OnlineSoftmax row[kQueryBlock];
      for (int64_t item = lo; item < hi; ++item) {
        const int64_t bh = item / blocks, i0 = (item % blocks) * kQueryBlock;
        const int64_t i1 = std::min(p.t, i0 + kQueryBlock), n = i1 - i0;
        const Head head(p, bh, q0, k0, v0, mask);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t r = 0; r < n; ++r) row[r] = fn::OnlineSoftmax{};
        for (int64_t j0 = 0; j0 < head.keyEnd(i1); j0 += kKeyBlock) {
          const int64_t j1 = std::min(p.s, j0 + kKeyBlock);
          head.scores(i0, i1, j0, j1, am, s.data());
          for (int64_t r = 0; r < n; ++r) {
            float* sr = s.data() + r * kKeyBlock;
            float* ar = acc.data() + r * p.dv;
            float top = -INFINITY;
            for (int64_t j = 0; j < j1 - j0; ++j) top = std::max(top, sr[j]);
            const float f = row[r].rescale(top);
            if (f != 1.f)
              for (int64_t c = 0; c < p.dv; ++c) ar[c] *= f;
            for (int64_t j = 0; j < j1 - j0; ++j) {
              const float w = row[r].weight(sr[j]);
              row[r].l += w;
              const float wd = am.drop(w, bh * p.t + i0 + r, j0 + j, p.s);
              if (wd == 0.f) continue;
              const float* vj = head.v + (j0 + j) * p.dv;
#pragma omp simd
              for (int64_t c = 0; c < p.dv; ++c) ar[c] += wd * vj[c];
            }
          }
        }
        for (int64_t r = 0; r < n; ++r) {
          const int64_t i = bh * p.t + i0 + r;
          const float inv = row[r].l > 0.f ? 1.f / row[r].l : 0.f;
          for (int64_t c = 0; c < p.dv; ++c) y0[i * p.dv + c] = acc[size_t(r * p.dv + c)] * inv;
          lse0[i] = row[r].logSumExp();
        }
      }
    });
  };
}

// One (batch, head) of the backward pass: dq, dk and dv of its rows.
struct HeadGrad {
  const AttentionPlan& p;
  const Head& head;
  const fn::AttentionMask& am;
  const float *dy, *y, *lse;
  float *dq, *dk, *dv;
  int64_t bh;
  std::vector<float>& s;
  std::vector<float>& rowDot;  // D_i = Σ dy_i · y_i

  void run() const {
    std::fill(dq, dq + p.t * p.d, 0.f);
    std::fill(dk, dk + p.s * p.d, 0.f);
    std::fill(dv, dv + p.s * p.dv, 0.f);
    for (int64_t i = 0; i < p.t; ++i) rowDot[size_t(i)] = dot(dy + i * p.dv, y + i * p.dv, p.dv);
    for (int64_t i0 = 0; i0 < p.t; i0 += kQueryBlock) {
      const int64_t i1 = std::min(p.t, i0 + kQueryBlock);
      for (int64_t j0 = 0; j0 < head.keyEnd(i1); j0 += kKeyBlock)
        block(i0, i1, j0, std::min(p.s, j0 + kKeyBlock));
    }
  }

  void block(int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    head.scores(i0, i1, j0, j1, am, s.data());
    for (int64_t i = i0; i < i1; ++i) {
      const float* sr = s.data() + (i - i0) * kKeyBlock;
      const float* dyi = dy + i * p.dv;
      const float* qi = head.q + i * p.d;
      float* dqi = dq + i * p.d;
      for (int64_t j = j0; j < j1; ++j) {
        const float sc = sr[j - j0];
        const float prob = sc == -INFINITY ? 0.f : std::exp(sc - lse[i]);
        if (prob == 0.f) continue;
        const float* vj = head.v + j * p.dv;
        const int64_t bhRow = bh * p.t + i;
        const float kept = am.drop(1.f, bhRow, j, p.s);  // 0, or the dropout scale
        float* dvj = dv + j * p.dv;
        const float pd = prob * kept;
        if (pd != 0.f) {
#pragma omp simd
          for (int64_t c = 0; c < p.dv; ++c) dvj[c] += pd * dyi[c];
        }
        const float dprob = dot(dyi, vj, p.dv) * kept;
        const float ds = prob * (dprob - rowDot[size_t(i)]) * p.scale;
        const float* kj = head.k + j * p.d;
        float* dkj = dk + j * p.d;
#pragma omp simd
        for (int64_t c = 0; c < p.d; ++c) {
          dqi[c] += ds * kj[c];
          dkj[c] += ds * qi[c];
        }
      }
    }
  }
};

// Inputs dy, q, k, v, y, lse[, mask]; outputs dq, dk, dv.
KernelFn attentionBackward(const KernelSig& sig) {
  const AttentionPlan p = AttentionPlan::of(sig, 1);
  return [p](const KernelIO& io) {
    const fn::AttentionMask am = p.settings(io.ctx->seed, io.ctx->step, io.ctx->training);
    const fn::AttentionMaskView mask = p.maskView(p.hasMask ? io.in[6].data : nullptr);
    const float *dy0 = io.in[0].f32(), *q0 = io.in[1].f32(), *k0 = io.in[2].f32();
    const float *v0 = io.in[3].f32(), *y0 = io.in[4].f32(), *lse0 = io.in[5].f32();
    float *dq0 = io.out[0].f32(), *dk0 = io.out[1].f32(), *dv0 = io.out[2].f32();
    parallelFor(p.b * p.h, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> s(size_t(kQueryBlock * kKeyBlock)), rowDot(size_t(p.t));
      for (int64_t bh = lo; bh < hi; ++bh) {
        const Head head(p, bh, q0, k0, v0, mask);
        HeadGrad g{p,
                   head,
                   am,
                   dy0 + bh * p.t * p.dv,
                   y0 + bh * p.t * p.dv,
                   lse0 + bh * p.t,
                   dq0 + bh * p.t * p.d,
                   dk0 + bh * p.s * p.d,
                   dv0 + bh * p.s * p.dv,
                   bh,
                   s,
                   rowDot};
        g.run();
      }
    });
  };
}

// Inputs q, k, v (one token each), position, k_cache, v_cache; outputs y, lse. The
// token's keys and values go into the caches at its position, then it attends to
// positions 0..position, one online softmax per (batch, head).
KernelFn cachedAttention(const KernelSig& sig) {
  const Shape &q = sig.in[0].shape, &v = sig.in[2].shape, &kc = sig.in[4].shape;
  const int64_t heads = q[0] * q[1], d = q[3], dv = v[3], slots = kc[2];
  const double given = sig.attrs->f("scale", 0.0);
  const float scale = float(given > 0 ? given : 1.0 / std::sqrt(double(d)));
  return [heads, d, dv, slots, scale](const KernelIO& io) {
    const int64_t pos = io.in[3].i32()[0];
    if (pos < 0 || pos >= slots)
      throw std::runtime_error("position " + std::to_string(pos) + " is past the KV cache's " +
                               std::to_string(slots) + " positions");
    const float *q0 = io.in[0].f32(), *k0 = io.in[1].f32(), *v0 = io.in[2].f32();
    float *kc = io.in[4].f32(), *vc = io.in[5].f32();
    float *y = io.out[0].f32(), *lse = io.out[1].f32();
    parallelFor(heads, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> acc(static_cast<size_t>(dv));
      for (int64_t bh = lo; bh < hi; ++bh) {
        float* kh = kc + bh * slots * d;
        float* vh = vc + bh * slots * dv;
        std::copy(k0 + bh * d, k0 + (bh + 1) * d, kh + pos * d);
        std::copy(v0 + bh * dv, v0 + (bh + 1) * dv, vh + pos * dv);
        fn::OnlineSoftmax row;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t j = 0; j <= pos; ++j) {
          const float s = dot(q0 + bh * d, kh + j * d, d) * scale;
          const float f = row.rescale(s);
          if (f != 1.f)
            for (float& a : acc) a *= f;
          const float w = row.weight(s);
          row.l += w;
#pragma omp simd
          for (int64_t c = 0; c < dv; ++c) acc[size_t(c)] += w * vh[j * dv + c];
        }
        for (int64_t c = 0; c < dv; ++c) y[bh * dv + c] = acc[size_t(c)] / row.l;
        lse[bh] = row.logSumExp();
      }
    });
  };
}

}  // namespace

void registerAttention(KernelRegistry& r) {
  r.add("CachedAttention", DeviceKind::Cpu, kernel("cpu.cached_attention", cachedAttention));
  r.add("ScaledDotProductAttention", DeviceKind::Cpu,
        kernel("cpu.flash_attention", attentionForward));
  r.add("ScaledDotProductAttentionGrad", DeviceKind::Cpu,
        kernel("cpu.flash_attention_backward", attentionBackward));
}

}  // namespace netloom::cpu
