// The math of the sequence ops written once for host and device: axis permutation
// and broadcast index maps, RMSNorm's per-element steps, rotary and sinusoidal
// position angles, and attention's online softmax. CPU kernels and CUDA kernels both
// call these, so the CPU suites check what a GPU runs.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/core/rng.h"

namespace netloom::fn {

constexpr int kMaxRank = 8;

// Output element `at` of a permuted tensor reads input element source(at): `dims`
// are the output's sizes and `strides` the input strides of each output axis.
struct Permutation {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  NL_HD int64_t source(int64_t at) const {
    int64_t from = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t i = at % dims[d];
      at /= dims[d];
      from += i * strides[d];
    }
    return from;
  }
};

// Input element `at` of a tensor broadcast from (or summed to) a smaller shape
// lands on target(at) of it: `dims` are the large shape's sizes and `strides` the
// small tensor's strides for them, 0 on a broadcast axis.
using BroadcastIndex = Permutation;

// RMSNorm -------------------------------------------------------------------------
// y = x / rms · w with rms = sqrt(mean(x²) + eps); the row's 1/rms is kept.
struct RmsNormApply {
  float invrms;
  NL_HD float operator()(float x, float w) const { return x * invrms * w; }
};
// dx = invrms·(g - x̂·mean(g·x̂)) with g = dy·w and x̂ = x·invrms.
struct RmsNormGradApply {
  float invrms, mgx;
  NL_HD float operator()(float dy, float x, float w) const {
    return invrms * (dy * w - x * invrms * mgx);
  }
};

// Embedding rows ------------------------------------------------------------------
// Where id `id` reads in a table part of `rows` rows starting at row `first` of a
// whole table of `total` rows (split by the vocabulary, each rank holds one part):
// its row in the part; kOtherPart for a row another part holds (it reads zero, a
// partial sum's share); kNoRow for an id outside the whole table (it reads NaN).
constexpr int64_t kOtherPart = -1, kNoRow = -2;
NL_HD inline int64_t embeddingRow(int64_t id, int64_t first, int64_t rows, int64_t total) {
  if (id < 0 || id >= total) return kNoRow;
  return id >= first && id < first + rows ? id - first : kOtherPart;
}

// Positions -----------------------------------------------------------------------
// The angle of frequency pair i (of `pairs`) at position `pos`: pos · base^(-i/pairs),
// as rotary embeddings and sinusoidal encodings both define it.
NL_HD inline float positionAngle(int64_t pos, int64_t i, int64_t pairs, float base) {
  return float(double(pos) * exp(-log(double(base)) * double(i) / double(pairs)));
}

// Sinusoidal encoding (Vaswani et al.): even channels sin, odd channels cos of the
// angle of their pair, for `channels` channels at base 10000.
NL_HD inline float sinusoid(int64_t pos, int64_t channel, int64_t channels) {
  const int64_t pairs = (channels + 1) / 2;
  const float a = positionAngle(pos, channel / 2, pairs, 10000.f);
  return channel % 2 == 0 ? sinf(a) : cosf(a);
}

// Rotary embedding, the rotate-half form (GPT-NeoX, LLaMA): channel i < D/2 pairs
// with channel i + D/2, turned by the angle of pair i at the token's position. The
// gradient turns dy back by the same angle (sign -1).
struct Rotary {
  float base;
  int64_t half;  // D / 2
  NL_HD void operator()(float x1, float x2, int64_t pos, int64_t i, float sign, float& y1,
                        float& y2) const {
    const float a = positionAngle(pos, i, half, base);
    const float c = cosf(a), s = sign * sinf(a);
    y1 = x1 * c - x2 * s;
    y2 = x2 * c + x1 * s;
  }
};

// Attention ------------------------------------------------------------------------
// One query row's softmax over keys met in blocks: the running maximum m and sum l
// of e^(s - m). Scores of -inf (masked) weigh nothing; a row with every key masked
// ends with l = 0, and its output is zero.
struct OnlineSoftmax {
  float m = -INFINITY, l = 0.f;
  // Takes the block maximum `blockMax`; returns the factor the row's accumulators
  // are multiplied by before the block's terms are added.
  NL_HD float rescale(float blockMax) {
    if (blockMax <= m) return 1.f;
    const float f = m == -INFINITY ? 0.f : expf(m - blockMax);
    l *= f;
    m = blockMax;
    return f;
  }
  NL_HD float weight(float s) const { return s == -INFINITY ? 0.f : expf(s - m); }
  // log Σ e^s, kept for the backward pass; +inf for a row with no key, so that its
  // probabilities e^(s - lse) recompute as zero.
  NL_HD float logSumExp() const { return l > 0.f ? m + logf(l) : INFINITY; }
};

// Where attention's masks and dropout act. `shift` is S - T for causal attention
// aligned at the bottom right; PyTorch's is_causal aligns at the top left (0).
struct AttentionMask {
  bool causal = false;
  float dropP = 0.f, dropScale = 1.f;
  uint64_t dropKey = 0;
  NL_HD bool hidden(int64_t i, int64_t j) const { return causal && j > i; }
  // Inverted dropout of probability (row `bhRow` of all B·H·T, key j of S).
  NL_HD float drop(float p, int64_t bhRow, int64_t j, int64_t keys) const {
    if (dropP <= 0.f) return p;
    return uniformAt(dropKey, uint64_t(bhRow * keys + j)) < dropP ? 0.f : p * dropScale;
  }
};

// An attention mask as the scores [B, H, T, S] read it: strides 0 on its broadcast
// axes; a float mask is added, an int32 one hides the keys where it is 0.
struct AttentionMaskView {
  const float* f = nullptr;
  const int32_t* i = nullptr;
  int64_t sb = 0, sh = 0, st = 0;
  NL_HD float at(int64_t b, int64_t h, int64_t q, int64_t k) const {
    const int64_t o = b * sb + h * sh + q * st + k;
    if (f) return f[o];
    if (i) return i[o] != 0 ? 0.f : -INFINITY;
    return 0.f;
  }
};

}  // namespace netloom::fn
