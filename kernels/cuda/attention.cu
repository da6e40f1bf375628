// Scaled dot-product attention on CUDA, flash-style: a block of queries (one per
// thread) walks the keys a tile at a time through shared memory with the online
// softmax of kernels/core/sequence_math.h, which the CPU kernel runs too; no head's
// T × S matrix is ever held. The forward keeps each query's log-sum-exp. The
// backward recomputes the probabilities tile by tile in two kernels with no atomics:
// one thread per key sums its dk and dv over the queries, one thread per query its
// dq over the keys, each in a fixed order. Head sizes up to 128.
#include <algorithm>
#include <cmath>

#include "kernels/core/attention_plan.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

constexpr int kRows = 64;       // queries (or keys) per block, one per thread
constexpr int kKeyTile = 32;    // keys staged in shared memory at a time
constexpr int kQueryTile = 16;  // queries staged at a time in the dk/dv kernel
constexpr int kMaxHead = 128;

// Dropout's stream for this step, read on the device: a replayed CUDA Graph keeps
// the launch's arguments, so the step's seed must not be one of them.
__device__ inline fn::AttentionMask atStep(fn::AttentionMask am, const DeviceStepValues* step,
                                           uint64_t salt) {
  if (am.dropP > 0.f) am.dropKey = hashCombine(step->seed, hashCombine(uint64_t(step->step), salt));
  return am;
}

struct Views {
  const float *q, *k, *v;
  fn::AttentionMaskView mask;
};

__device__ inline float score(const AttentionPlan& p, const fn::AttentionMask& am, const Views& w,
                              int64_t b, int64_t h, const float* qi, const float* kj, int64_t i,
                              int64_t j) {
  if (j >= p.s || am.hidden(i, j)) return -INFINITY;
  const float m = w.mask.at(b, h, i, j);
  if (m == -INFINITY) return -INFINITY;
  float s = 0.f;
  for (int64_t c = 0; c < p.d; ++c) s += qi[c] * kj[c];
  return s * p.scale + m;
}

// Rows [j0, j0 + kKeyTile) of a (batch, head)'s keys and values into shared memory.
__device__ inline void stageKeys(const AttentionPlan& p, const float* k, const float* v, int64_t j0,
                                 float (*ks)[kMaxHead], float (*vs)[kMaxHead]) {
  for (int64_t e = threadIdx.x; e < kKeyTile * p.d; e += blockDim.x) {
    const int64_t r = e / p.d, c = e - r * p.d;
    ks[r][c] = j0 + r < p.s ? k[(j0 + r) * p.d + c] : 0.f;
  }
  for (int64_t e = threadIdx.x; e < kKeyTile * p.dv; e += blockDim.x) {
    const int64_t r = e / p.dv, c = e - r * p.dv;
    vs[r][c] = j0 + r < p.s ? v[(j0 + r) * p.dv + c] : 0.f;
  }
}

__global__ void forwardKernel(AttentionPlan p, fn::AttentionMask am, const DeviceStepValues* step,
                              Views w, float* y, float* lse) {
  am = atStep(am, step, p.salt);
  __shared__ float ks[kKeyTile][kMaxHead], vs[kKeyTile][kMaxHead];
  const int64_t bh = blockIdx.y, b = bh / p.h, h = bh % p.h;
  const int64_t i = int64_t(blockIdx.x) * kRows + threadIdx.x;
  const bool active = i < p.t;
  const float* k = w.k + bh * p.s * p.d;
  const float* v = w.v + bh * p.s * p.dv;
  float qi[kMaxHead], acc[kMaxHead];
  for (int64_t c = 0; c < p.d; ++c) qi[c] = active ? w.q[(bh * p.t + i) * p.d + c] : 0.f;
  for (int64_t c = 0; c < p.dv; ++c) acc[c] = 0.f;
  fn::OnlineSoftmax row;
  const int64_t last = int64_t(blockIdx.x) * kRows + kRows;
  const int64_t keyEnd = p.causal ? (last < p.s ? last : p.s) : p.s;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kKeyTile) {
    stageKeys(p, k, v, j0, ks, vs);
    __syncthreads();
    if (active) {
      float sc[kKeyTile], top = -INFINITY;
      for (int jj = 0; jj < kKeyTile; ++jj) {
        sc[jj] = score(p, am, w, b, h, qi, ks[jj], i, j0 + jj);
        top = fmaxf(top, sc[jj]);
      }
      const float f = row.rescale(top);
      if (f != 1.f)
        for (int64_t c = 0; c < p.dv; ++c) acc[c] *= f;
      for (int jj = 0; jj < kKeyTile; ++jj) {
        const float wt = row.weight(sc[jj]);
        row.l += wt;
        const float wd = am.drop(wt, bh * p.t + i, j0 + jj, p.s);
        if (wd != 0.f)
          for (int64_t c = 0; c < p.dv; ++c) acc[c] += wd * vs[jj][c];
      }
    }
    __syncthreads();
  }
  if (!active) return;
  const float inv = row.l > 0.f ? 1.f / row.l : 0.f;
  for (int64_t c = 0; c < p.dv; ++c) y[(bh * p.t + i) * p.dv + c] = acc[c] * inv;
  lse[bh * p.t + i] = row.logSumExp();
}

// D_i = dy_i · y_i per query row.
__global__ void rowDotKernel(const float* dy, const float* y, int64_t rows, int64_t dv,
                             float* out) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int64_t c = 0; c < dv; ++c) s += dy[r * dv + c] * y[r * dv + c];
    out[r] = s;
  }
}

struct GradViews {
  const float *dy, *lse, *rowDot;
  float *dq, *dk, *dv;
};

// One thread per key j: dv_j = Σ_i p_ij·kept·dy_i, dk_j = Σ_i ds_ij·q_i.
__global__ void keyGradKernel(AttentionPlan p, fn::AttentionMask am, const DeviceStepValues* step,
                              Views w, GradViews g) {
  am = atStep(am, step, p.salt);
  __shared__ float qs[kQueryTile][kMaxHead], dys[kQueryTile][kMaxHead];
  __shared__ float lses[kQueryTile], dots[kQueryTile];
  const int64_t bh = blockIdx.y, b = bh / p.h, h = bh % p.h;
  const int64_t j = int64_t(blockIdx.x) * kRows + threadIdx.x;
  const bool active = j < p.s;
  float kj[kMaxHead], vj[kMaxHead], dk[kMaxHead], dv[kMaxHead];
  for (int64_t c = 0; c < p.d; ++c)
    kj[c] = active ? w.k[(bh * p.s + j) * p.d + c] : 0.f, dk[c] = 0.f;
  for (int64_t c = 0; c < p.dv; ++c)
    vj[c] = active ? w.v[(bh * p.s + j) * p.dv + c] : 0.f, dv[c] = 0.f;
  const int64_t first = p.causal ? int64_t(blockIdx.x) * kRows / kQueryTile * kQueryTile : 0;
  for (int64_t i0 = first; i0 < p.t; i0 += kQueryTile) {
    for (int64_t e = threadIdx.x; e < kQueryTile * p.d; e += blockDim.x) {
      const int64_t r = e / p.d, c = e - r * p.d;
      qs[r][c] = i0 + r < p.t ? w.q[(bh * p.t + i0 + r) * p.d + c] : 0.f;
    }
    for (int64_t e = threadIdx.x; e < kQueryTile * p.dv; e += blockDim.x) {
      const int64_t r = e / p.dv, c = e - r * p.dv;
      dys[r][c] = i0 + r < p.t ? g.dy[(bh * p.t + i0 + r) * p.dv + c] : 0.f;
    }
    if (threadIdx.x < kQueryTile) {
      const int64_t i = i0 + threadIdx.x;
      lses[threadIdx.x] = i < p.t ? g.lse[bh * p.t + i] : INFINITY;
      dots[threadIdx.x] = i < p.t ? g.rowDot[bh * p.t + i] : 0.f;
    }
    __syncthreads();
    for (int r = 0; active && r < kQueryTile && i0 + r < p.t; ++r) {
      const int64_t i = i0 + r;
      const float sc = score(p, am, w, b, h, qs[r], kj, i, j);
      const float prob = sc == -INFINITY ? 0.f : expf(sc - lses[r]);
      if (prob == 0.f) continue;
      const float kept = am.drop(1.f, bh * p.t + i, j, p.s);
      float dprob = 0.f;
      for (int64_t c = 0; c < p.dv; ++c) {
        dv[c] += prob * kept * dys[r][c];
        dprob += dys[r][c] * vj[c];
      }
      const float ds = prob * (dprob * kept - dots[r]) * p.scale;
      for (int64_t c = 0; c < p.d; ++c) dk[c] += ds * qs[r][c];
    }
    __syncthreads();
  }
  if (!active) return;
  for (int64_t c = 0; c < p.d; ++c) g.dk[(bh * p.s + j) * p.d + c] = dk[c];
  for (int64_t c = 0; c < p.dv; ++c) g.dv[(bh * p.s + j) * p.dv + c] = dv[c];
}

// One thread per query i: dq_i = Σ_j ds_ij·k_j.
__global__ void queryGradKernel(AttentionPlan p, fn::AttentionMask am, const DeviceStepValues* step,
                                Views w, GradViews g) {
  am = atStep(am, step, p.salt);
  __shared__ float ks[kKeyTile][kMaxHead], vs[kKeyTile][kMaxHead];
  const int64_t bh = blockIdx.y, b = bh / p.h, h = bh % p.h;
  const int64_t i = int64_t(blockIdx.x) * kRows + threadIdx.x;
  const bool active = i < p.t;
  float qi[kMaxHead], dyi[kMaxHead], dq[kMaxHead];
  for (int64_t c = 0; c < p.d; ++c)
    qi[c] = active ? w.q[(bh * p.t + i) * p.d + c] : 0.f, dq[c] = 0.f;
  for (int64_t c = 0; c < p.dv; ++c) dyi[c] = active ? g.dy[(bh * p.t + i) * p.dv + c] : 0.f;
  const float lse = active ? g.lse[bh * p.t + i] : INFINITY;
  const float rowDot = active ? g.rowDot[bh * p.t + i] : 0.f;
  const int64_t last = int64_t(blockIdx.x) * kRows + kRows;
  const int64_t keyEnd = p.causal ? (last < p.s ? last : p.s) : p.s;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kKeyTile) {
    stageKeys(p, w.k + bh * p.s * p.d, w.v + bh * p.s * p.dv, j0, ks, vs);
    __syncthreads();
    for (int jj = 0; active && jj < kKeyTile; ++jj) {
      const int64_t j = j0 + jj;
      const float sc = score(p, am, w, b, h, qi, ks[jj], i, j);
      const float prob = sc == -INFINITY ? 0.f : expf(sc - lse);
      if (prob == 0.f) continue;
      const float kept = am.drop(1.f, bh * p.t + i, j, p.s);
      float dprob = 0.f;
      for (int64_t c = 0; c < p.dv; ++c) dprob += dyi[c] * vs[jj][c];
      const float ds = prob * (dprob * kept - rowDot) * p.scale;
      for (int64_t c = 0; c < p.d; ++c) dq[c] += ds * ks[jj][c];
    }
    __syncthreads();
  }
  if (!active) return;
  for (int64_t c = 0; c < p.d; ++c) g.dq[(bh * p.t + i) * p.d + c] = dq[c];
}

dim3 gridOf(int64_t rows, const AttentionPlan& p) {
  return dim3(unsigned((rows + kRows - 1) / kRows), unsigned(p.b * p.h));
}

KernelFn forward(const KernelSig& sig) {
  const AttentionPlan p = AttentionPlan::of(sig, 0);
  cudaStream_t st = streamOf(sig);
  return [p, st](const KernelIO& io) {
    if (p.b * p.h * p.t == 0) return;
    const fn::AttentionMask am = p.settings(0, 0, io.ctx->training);
    const Views w{io.in[0].f32(), io.in[1].f32(), io.in[2].f32(),
                  p.maskView(p.hasMask ? io.in[3].data : nullptr)};
    forwardKernel<<<gridOf(p.t, p), kRows, 0, st>>>(p, am, io.stepValues, w, io.out[0].f32(),
                                                    io.out[1].f32());
    NL_CHECK_LAUNCH(forwardKernel);
  };
}

// Workspace: each query row's D_i.
KernelFn backward(const KernelSig& sig) {
  const AttentionPlan p = AttentionPlan::of(sig, 1);
  cudaStream_t st = streamOf(sig);
  return [p, st](const KernelIO& io) {
    const int64_t rows = p.b * p.h * p.t;
    if (rows == 0) return;
    const fn::AttentionMask am = p.settings(0, 0, io.ctx->training);
    const Views w{io.in[1].f32(), io.in[2].f32(), io.in[3].f32(),
                  p.maskView(p.hasMask ? io.in[6].data : nullptr)};
    auto* rowDot = static_cast<float*>(io.workspace);
    rowDotKernel<<<gridFor(rows), kBlock, 0, st>>>(io.in[0].f32(), io.in[4].f32(), rows, p.dv,
                                                   rowDot);
    NL_CHECK_LAUNCH(rowDotKernel);
    const GradViews g{io.in[0].f32(),  io.in[5].f32(),  rowDot,
                      io.out[0].f32(), io.out[1].f32(), io.out[2].f32()};
    keyGradKernel<<<gridOf(p.s, p), kRows, 0, st>>>(p, am, io.stepValues, w, g);
    NL_CHECK_LAUNCH(keyGradKernel);
    queryGradKernel<<<gridOf(p.t, p), kRows, 0, st>>>(p, am, io.stepValues, w, g);
    NL_CHECK_LAUNCH(queryGradKernel);
  };
}

// q and v sit at inputs 0 and 2 of the forward op, 1 and 3 of its gradient (after dy).
std::string declineHead(const KernelSig& sig, size_t first) {
  const Shape &q = sig.in[first].shape, &v = sig.in[first + 2].shape;
  if (q[3] > kMaxHead || v[3] > kMaxHead) return "head size over " + std::to_string(kMaxHead);
  if (q[0] * q[1] > 65535) return "more than 65535 batch × heads";
  return {};
}

// Generation: one thread block per (batch, head) writes the token's key and value
// into the caches at its position (read on the device), then its threads share out
// positions 0..position: each keeps an online softmax over its share, and thread 0
// merges them in thread order. Head sizes up to 128.
__global__ void cachedKernel(const float* q, const float* k, const float* v,
                             const int32_t* position, float* kc, float* vc, float* y, float* lse,
                             int64_t d, int64_t dv, int64_t slots, float scale) {
  __shared__ float ms[kRows], ls[kRows], accs[kRows][kMaxHead];
  const int64_t bh = blockIdx.x, pos = *position;
  if (pos < 0 || pos >= slots) return;  // checked on the host before the step
  float* kh = kc + bh * slots * d;
  float* vh = vc + bh * slots * dv;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) kh[pos * d + c] = k[bh * d + c];
  for (int64_t c = threadIdx.x; c < dv; c += blockDim.x) vh[pos * dv + c] = v[bh * dv + c];
  __syncthreads();
  fn::OnlineSoftmax row;
  float acc[kMaxHead];
  for (int64_t c = 0; c < dv; ++c) acc[c] = 0.f;
  for (int64_t j = threadIdx.x; j <= pos; j += blockDim.x) {
    float s = 0.f;
    for (int64_t c = 0; c < d; ++c) s += q[bh * d + c] * kh[j * d + c];
    s *= scale;
    const float f = row.rescale(s);
    if (f != 1.f)
      for (int64_t c = 0; c < dv; ++c) acc[c] *= f;
    const float w = row.weight(s);
    row.l += w;
    for (int64_t c = 0; c < dv; ++c) acc[c] += w * vh[j * dv + c];
  }
  ms[threadIdx.x] = row.m;
  ls[threadIdx.x] = row.l;
  for (int64_t c = 0; c < dv; ++c) accs[threadIdx.x][c] = acc[c];
  __syncthreads();
  if (threadIdx.x != 0) return;
  fn::OnlineSoftmax all;
  float out[kMaxHead];
  for (int64_t c = 0; c < dv; ++c) out[c] = 0.f;
  for (int t = 0; t < int(blockDim.x); ++t) {
    if (ls[t] == 0.f) continue;
    const float f = all.rescale(ms[t]);
    if (f != 1.f)
      for (int64_t c = 0; c < dv; ++c) out[c] *= f;
    const float w = expf(ms[t] - all.m);
    all.l += ls[t] * w;
    for (int64_t c = 0; c < dv; ++c) out[c] += accs[t][c] * w;
  }
  for (int64_t c = 0; c < dv; ++c) y[bh * dv + c] = out[c] / all.l;
  lse[bh] = all.logSumExp();
}

// Inputs q, k, v, position, k_cache, v_cache; outputs y, lse.
KernelFn cached(const KernelSig& sig) {
  const Shape &q = sig.in[0].shape, &v = sig.in[2].shape, &kc = sig.in[4].shape;
  const int64_t heads = q[0] * q[1], d = q[3], dv = v[3], slots = kc[2];
  const double given = sig.attrs->f("scale", 0.0);
  const float scale = float(given > 0 ? given : 1.0 / std::sqrt(double(d)));
  cudaStream_t st = streamOf(sig);
  return [heads, d, dv, slots, scale, st](const KernelIO& io) {
    cachedKernel<<<unsigned(heads), kRows, 0, st>>>(
        io.in[0].f32(), io.in[1].f32(), io.in[2].f32(), io.in[3].i32(), io.in[4].f32(),
        io.in[5].f32(), io.out[0].f32(), io.out[1].f32(), d, dv, slots, scale);
    NL_CHECK_LAUNCH(cachedKernel);
  };
}

}  // namespace

void registerAttention(KernelRegistry& r) {
  r.add("CachedAttention", DeviceKind::Cuda,
        KernelImpl{"cuda.cached_attention", [](const KernelSig& s) { return declineHead(s, 0); },
                   cached});
  r.add("ScaledDotProductAttention", DeviceKind::Cuda,
        KernelImpl{"cuda.flash_attention", [](const KernelSig& s) { return declineHead(s, 0); },
                   forward});
  KernelImpl grad{"cuda.flash_attention_backward",
                  [](const KernelSig& s) { return declineHead(s, 1); }, backward};
  grad.workspace = [](const KernelSig& s) {
    const Shape& q = s.in[1].shape;
    return std::max<int64_t>(1, q[0] * q[1] * q[2]) * int64_t(sizeof(float));
  };
  r.add("ScaledDotProductAttentionGrad", DeviceKind::Cuda, std::move(grad));
}

}  // namespace netloom::cuda
