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
#include "kernels/core/fast_math.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/small_gemm.h"

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
  // `out` (row stride kKeyBlock): one small product Q·Kᵀ, reading the head's keys
  // transposed in `kT` (head size × S, laid out once per head by transposeKeys).
  void scores(int64_t i0, int64_t i1, int64_t j0, int64_t j1, const fn::AttentionMask& am,
              const float* kT, float* out) const {
    const int64_t n = j1 - j0;
    smallGemm(q + i0 * p.d, p.d, kT + j0, p.s, out, kKeyBlock, i1 - i0, n, p.d, false);
    for (int64_t i = i0; i < i1; ++i) {
      float* row = out + (i - i0) * kKeyBlock;
      if (!p.hasMask) {  // keys past the query hidden where causal, in one vector pass
        const int64_t seen = p.causal ? i - j0 : n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) row[j] = j > seen ? -INFINITY : row[j] * p.scale;
        continue;
      }
      for (int64_t j = j0; j < j1; ++j) {
        const float m = mask.at(b, h, i, j);
        row[j - j0] = am.hidden(i, j) || m == -INFINITY ? -INFINITY : row[j - j0] * p.scale + m;
      }
    }
  }
  // The head's keys (or values, `width` wide) as columns: width × S.
  void transposeKeys(const float* rows, int64_t width, float* t) const {
    transposeInto(rows, width, p.s, width, t, p.s);
  }
  // The last key block that query rows [i0, i1) can see.
  int64_t keyEnd(int64_t i1) const {
    return p.causal ? std::min(p.s, i1) : p.s;
  }
};

// Each pool thread's slice of a launch's workspace, `floats` long; planned for the
// threads there were when the program was compiled. A thread past those (the pool
// grew since) uses a vector of its own.
class ThreadScratch {
 public:
  ThreadScratch(const KernelIO& io, int64_t floats)
      : m_base(static_cast<float*>(io.workspace)),
        m_floats(floats),
        m_slices(io.workspace ? io.workspaceBytes / (floats * int64_t(sizeof(float))) : 0) {}
  static int64_t bytes(int64_t floats) {
    return int64_t(omp_get_max_threads()) * floats * int64_t(sizeof(float));
  }
  float* mine(std::vector<float>& own) const {
    const int t = omp_get_thread_num();
    if (t < m_slices) return m_base + t * m_floats;
    own.resize(size_t(m_floats));
    return own.data();
  }

 private:
  float* m_base;
  int64_t m_floats, m_slices;
};

// A thread's scratch in the forward pass: a block of scores, the rows' sums of
// weighted values, and the head's keys transposed (O(S), never S × S).
int64_t forwardScratch(const AttentionPlan& p) {
  return kQueryBlock * kKeyBlock + kQueryBlock * p.dv + p.d * p.s;
}

// Inputs q, k, v[, mask]; outputs y, lse.
KernelFn attentionForward(const KernelSig& sig) {
  const AttentionPlan p = AttentionPlan::of(sig, 0);
  const int64_t blocks = (p.t + kQueryBlock - 1) / kQueryBlock;
  return [p, blocks](const KernelIO& io) {
    const ThreadScratch scratch(io, forwardScratch(p));
    const fn::AttentionMask am = p.settings(io.ctx->seed, io.ctx->step, io.ctx->training);
    const fn::AttentionMaskView mask = p.maskView(p.hasMask ? io.in[3].data : nullptr);
    const float *q0 = io.in[0].f32(), *k0 = io.in[1].f32(), *v0 = io.in[2].f32();
    float *y0 = io.out[0].f32(), *lse0 = io.out[1].f32();
    parallelFor(p.b * p.h * blocks, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> own;
      float* const sBlock = scratch.mine(own);
      float* const accRows = sBlock + kQueryBlock * kKeyBlock;
      float* const kT = accRows + kQueryBlock * p.dv;
      fn::OnlineSoftmax row[kQueryBlock];
      int64_t transposedHead = -1;  // a thread's items are consecutive: mostly one head
      for (int64_t item = lo; item < hi; ++item) {
        const int64_t bh = item / blocks, i0 = (item % blocks) * kQueryBlock;
        const int64_t i1 = std::min(p.t, i0 + kQueryBlock), n = i1 - i0;
        const Head head(p, bh, q0, k0, v0, mask);
        if (bh != transposedHead) head.transposeKeys(head.k, p.d, kT), transposedHead = bh;
        std::fill(accRows, accRows + kQueryBlock * p.dv, 0.f);
        for (int64_t r = 0; r < n; ++r) row[r] = fn::OnlineSoftmax{};
        for (int64_t j0 = 0; j0 < head.keyEnd(i1); j0 += kKeyBlock) {
          const int64_t j1 = std::min(p.s, j0 + kKeyBlock);
          head.scores(i0, i1, j0, j1, am, kT, sBlock);
          for (int64_t r = 0; r < n; ++r) {
            float* sr = sBlock + r * kKeyBlock;
            float* ar = accRows + r * p.dv;  // rescaled here, added to after the rows
            float top = -INFINITY;
            for (int64_t j = 0; j < j1 - j0; ++j) top = std::max(top, sr[j]);
            const float f = row[r].rescale(top);
            if (f != 1.f)
              for (int64_t c = 0; c < p.dv; ++c) ar[c] *= f;
            // The block's weights e^(s - m) in one vectorised pass (hidden keys 0).
            const float m = row[r].m;
            float sum = 0.f;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < j1 - j0; ++j) {
              sr[j] = sr[j] == -INFINITY ? 0.f : fm::exp(sr[j] - m);
              sum += sr[j];
            }
            row[r].l += sum;
            if (am.dropP > 0.f)
              for (int64_t j = 0; j < j1 - j0; ++j)
                sr[j] = am.drop(sr[j], bh * p.t + i0 + r, j0 + j, p.s);
          }
          // The rows' weighted values: acc += P · V of the block.
          smallGemm(sBlock, kKeyBlock, head.v + j0 * p.dv, p.dv, accRows, p.dv, n, p.dv, j1 - j0,
                    true);
        }
        for (int64_t r = 0; r < n; ++r) {
          const int64_t i = bh * p.t + i0 + r;
          const float inv = row[r].l > 0.f ? 1.f / row[r].l : 0.f;
          for (int64_t c = 0; c < p.dv; ++c) y0[i * p.dv + c] = accRows[r * p.dv + c] * inv;
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
  float* s;       // a block of scores, then of dP, then one transposed
  float* t;       // the head's keys and values transposed
  float* rowDot;  // D_i = Σ dy_i · y_i

  void run() const {
    std::fill(dq, dq + p.t * p.d, 0.f);
    std::fill(dk, dk + p.s * p.d, 0.f);
    std::fill(dv, dv + p.s * p.dv, 0.f);
    for (int64_t i = 0; i < p.t; ++i) rowDot[i] = dot(dy + i * p.dv, y + i * p.dv, p.dv);
    head.transposeKeys(head.k, p.d, t);
    head.transposeKeys(head.v, p.dv, t + p.d * p.s);
    for (int64_t i0 = 0; i0 < p.t; i0 += kQueryBlock) {
      const int64_t i1 = std::min(p.t, i0 + kQueryBlock);
      for (int64_t j0 = 0; j0 < head.keyEnd(i1); j0 += kKeyBlock)
        block(i0, i1, j0, std::min(p.s, j0 + kKeyBlock));
    }
  }

  // One block of queries [i0, i1) and keys [j0, j1): the probabilities P again from
  // the scores and lse, dP = dY·Vᵀ, dS = P ⊙ (dP − D) · scale, then dQ += dS·K,
  // dK += dSᵀ·Q and dV += Pᵀ·dY, each a small product (with dropout, P and dP
  // as the forward's kept weights saw them).
  void block(int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    const int64_t n = i1 - i0, nk = j1 - j0;
    const float *kT = t, *vT = kT + p.d * p.s;
    float *dp = s + kQueryBlock * kKeyBlock, *flipped = dp + kQueryBlock * kKeyBlock;
    head.scores(i0, i1, j0, j1, am, kT, s);
    smallGemm(dy + i0 * p.dv, p.dv, vT + j0, p.s, dp, kKeyBlock, n, nk, p.dv, false);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = i0 + r;
      float *pr = s + r * kKeyBlock, *dpr = dp + r * kKeyBlock;
      const float l = lse[i], d = rowDot[i], scale = p.scale;
      if (am.dropP <= 0.f) {
#pragma omp simd
        for (int64_t j = 0; j < nk; ++j) {
          const float prob = pr[j] == -INFINITY ? 0.f : fm::exp(pr[j] - l);
          pr[j] = prob;
          dpr[j] = prob * (dpr[j] - d) * scale;
        }
        continue;
      }
      for (int64_t j = 0; j < nk; ++j) {
        const float prob = pr[j] == -INFINITY ? 0.f : fm::exp(pr[j] - l);
        const float kept = am.drop(1.f, bh * p.t + i, j0 + j, p.s);  // 0, or the scale
        pr[j] = prob * kept;
        dpr[j] = prob * (dpr[j] * kept - d) * scale;
      }
    }
    smallGemm(dp, kKeyBlock, head.k + j0 * p.d, p.d, dq + i0 * p.d, p.d, n, p.d, nk, true);
    transposeInto(dp, kKeyBlock, n, nk, flipped, kQueryBlock);
    smallGemm(flipped, kQueryBlock, head.q + i0 * p.d, p.d, dk + j0 * p.d, p.d, nk, p.d, n, true);
    transposeInto(s, kKeyBlock, n, nk, flipped, kQueryBlock);
    smallGemm(flipped, kQueryBlock, dy + i0 * p.dv, p.dv, dv + j0 * p.dv, p.dv, nk, p.dv, n, true);
  }
};

// Inputs dy, q, k, v, y, lse[, mask]; outputs dq, dk, dv.
// A thread's scratch in the backward pass: blocks of P, dS and one transposed, the
// head's keys and values transposed, and every query row's D_i: O(block + S + T).
int64_t backwardScratch(const AttentionPlan& p) {
  return 3 * kQueryBlock * kKeyBlock + (p.d + p.dv) * p.s + p.t;
}

KernelFn attentionBackward(const KernelSig& sig) {
  const AttentionPlan p = AttentionPlan::of(sig, 1);
  return [p](const KernelIO& io) {
    const ThreadScratch scratch(io, backwardScratch(p));
    const fn::AttentionMask am = p.settings(io.ctx->seed, io.ctx->step, io.ctx->training);
    const fn::AttentionMaskView mask = p.maskView(p.hasMask ? io.in[6].data : nullptr);
    const float *dy0 = io.in[0].f32(), *q0 = io.in[1].f32(), *k0 = io.in[2].f32();
    const float *v0 = io.in[3].f32(), *y0 = io.in[4].f32(), *lse0 = io.in[5].f32();
    float *dq0 = io.out[0].f32(), *dk0 = io.out[1].f32(), *dv0 = io.out[2].f32();
    parallelFor(p.b * p.h, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> own;
      float* const sBlock = scratch.mine(own);
      float* const t = sBlock + 3 * kQueryBlock * kKeyBlock;
      float* const rowDot = t + (p.d + p.dv) * p.s;
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
                   sBlock,
                   t,
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
  // Each pool thread's scratch is planned in the arena, so the memory plan and the fit
  // check count it: O(block + T) floats a thread, never a T×T matrix.
  KernelImpl forward = kernel("cpu.flash_attention", attentionForward);
  forward.workspace = [](const KernelSig& s) {
    return ThreadScratch::bytes(forwardScratch(AttentionPlan::of(s, 0)));
  };
  r.add("ScaledDotProductAttention", DeviceKind::Cpu, std::move(forward));
  KernelImpl backward = kernel("cpu.flash_attention_backward", attentionBackward);
  backward.workspace = [](const KernelSig& s) {
    return ThreadScratch::bytes(backwardScratch(AttentionPlan::of(s, 1)));
  };
  r.add("ScaledDotProductAttentionGrad", DeviceKind::Cpu, std::move(backward));
}

}  // namespace netloom::cpu
