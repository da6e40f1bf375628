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
  // `out` (row stride kKeyBlock). The key block is laid out transposed in `kT` (head
  // size × kKeyBlock) first, so each query's scores are sums of whole vectors of keys,
  // never a horizontal sum per pair.
  void scores(int64_t i0, int64_t i1, int64_t j0, int64_t j1, const fn::AttentionMask& am,
              float* kT, float* out) const {
    const int64_t n = j1 - j0;
    transposed(k, j0, j1, p.d, kT);
    for (int64_t i = i0; i < i1; ++i) {
      float* row = out + (i - i0) * kKeyBlock;
      rowTimes(q + i * p.d, kT, n, p.d, row);
      for (int64_t j = j0; j < j1; ++j) {
        const float m = mask.at(b, h, i, j);
        row[j - j0] = am.hidden(i, j) || m == -INFINITY ? -INFINITY : row[j - j0] * p.scale + m;
      }
    }
  }
  // Rows [j0, j1) of `rows` (width `width`) as columns of `t` (width × kKeyBlock).
  static void transposed(const float* rows, int64_t j0, int64_t j1, int64_t width, float* t) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t c = 0; c < width; ++c) t[c * kKeyBlock + (j - j0)] = rows[j * width + c];
  }
  // out[j] = a · column j of `t`, for j < n.
  static void rowTimes(const float* a, const float* t, int64_t n, int64_t width, float* out) {
    std::fill(out, out + n, 0.f);
    for (int64_t c = 0; c < width; ++c) {
      const float ac = a[c];
      const float* tc = t + c * kKeyBlock;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) out[j] += ac * tc[j];
    }
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
// weighted values, a key block transposed.
int64_t forwardScratch(const AttentionPlan& p) {
  return kQueryBlock * kKeyBlock + kQueryBlock * p.dv + p.d * kKeyBlock;
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
      for (int64_t item = lo; item < hi; ++item) {
        const int64_t bh = item / blocks, i0 = (item % blocks) * kQueryBlock;
        const int64_t i1 = std::min(p.t, i0 + kQueryBlock), n = i1 - i0;
        const Head head(p, bh, q0, k0, v0, mask);
        std::fill(accRows, accRows + kQueryBlock * p.dv, 0.f);
        for (int64_t r = 0; r < n; ++r) row[r] = fn::OnlineSoftmax{};
        for (int64_t j0 = 0; j0 < head.keyEnd(i1); j0 += kKeyBlock) {
          const int64_t j1 = std::min(p.s, j0 + kKeyBlock);
          head.scores(i0, i1, j0, j1, am, kT, sBlock);
          for (int64_t r = 0; r < n; ++r) {
            float* sr = sBlock + r * kKeyBlock;
            float* ar = accRows + r * p.dv;
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
            for (int64_t j = 0; j < j1 - j0; ++j) {
              const float wd = am.drop(sr[j], bh * p.t + i0 + r, j0 + j, p.s);
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
  float* s;       // a block of scores
  float* t;       // the key and value blocks transposed
  float* rowDot;  // D_i = Σ dy_i · y_i

  void run() const {
    std::fill(dq, dq + p.t * p.d, 0.f);
    std::fill(dk, dk + p.s * p.d, 0.f);
    std::fill(dv, dv + p.s * p.dv, 0.f);
    for (int64_t i = 0; i < p.t; ++i) rowDot[i] = dot(dy + i * p.dv, y + i * p.dv, p.dv);
    for (int64_t i0 = 0; i0 < p.t; i0 += kQueryBlock) {
      const int64_t i1 = std::min(p.t, i0 + kQueryBlock);
      for (int64_t j0 = 0; j0 < head.keyEnd(i1); j0 += kKeyBlock)
        block(i0, i1, j0, std::min(p.s, j0 + kKeyBlock));
    }
  }

  void block(int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    float *kT = t, *vT = kT + p.d * kKeyBlock;
    head.scores(i0, i1, j0, j1, am, kT, s);
    Head::transposed(head.v, j0, j1, p.dv, vT);
    float dp[kKeyBlock];  // dy_i · v_j for the block's keys
    for (int64_t i = i0; i < i1; ++i) {
      const float* sr = s + (i - i0) * kKeyBlock;
      const float* dyi = dy + i * p.dv;
      Head::rowTimes(dyi, vT, j1 - j0, p.dv, dp);
      const float* qi = head.q + i * p.d;
      float* dqi = dq + i * p.d;
      float probs[kKeyBlock];  // e^(s - lse) in one vectorised pass (hidden keys 0)
      const float l = lse[i];
#pragma omp simd
      for (int64_t j = 0; j < j1 - j0; ++j)
        probs[j] = sr[j] == -INFINITY ? 0.f : fm::exp(sr[j] - l);
      for (int64_t j = j0; j < j1; ++j) {
        const float prob = probs[j - j0];
        if (prob == 0.f) continue;
        const int64_t bhRow = bh * p.t + i;
        const float kept = am.drop(1.f, bhRow, j, p.s);  // 0, or the dropout scale
        float* dvj = dv + j * p.dv;
        const float pd = prob * kept;
        if (pd != 0.f) {
#pragma omp simd
          for (int64_t c = 0; c < p.dv; ++c) dvj[c] += pd * dyi[c];
        }
        const float dprob = dp[j - j0] * kept;
        const float ds = prob * (dprob - rowDot[i]) * p.scale;
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
// A thread's scratch in the backward pass: a block of scores, a key and a value
// block transposed, and every query row's D_i.
int64_t backwardScratch(const AttentionPlan& p) {
  return kQueryBlock * kKeyBlock + (p.d + p.dv) * kKeyBlock + p.t;
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
      float* const t = sBlock + kQueryBlock * kKeyBlock;
      float* const rowDot = t + (p.d + p.dv) * kKeyBlock;
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
