// Op-harness cases for the sequence and attention ops (Transpose, BatchMatMul,
// Embedding, PositionEmbedding, RotaryEmbedding, RMSNorm, ScaledDotProductAttention,
// and cross-entropy over a sequence). The references are written from the published
// definitions (PyTorch's permute, matmul broadcasting, RoFormer's rotation, softmax
// attention over a whole row) in double, sharing no code with the kernels.
#pragma once

#include <algorithm>
#include <cmath>

#include "op_harness.h"

namespace harness {

namespace seq_ref {

inline std::vector<int64_t> strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// y[i0, …] = x[i_perm…]: walk the output's multi-index.
inline Vec transpose(const RefArgs& a, const std::vector<int64_t>& perm) {
  const Shape& x = a.inShapes[0];
  Shape y;
  for (int64_t p : perm) y.push_back(x[size_t(p)]);
  const auto xs = strides(x);
  Vec out(size_t(count(y)));
  std::vector<int64_t> idx(y.size(), 0);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t from = 0;
    for (size_t d = 0; d < y.size(); ++d) from += idx[d] * xs[size_t(perm[d])];
    out[o] = a.in[0][size_t(from)];
    for (size_t d = y.size(); d-- > 0;)
      if (++idx[d] < y[d])
        break;
      else
        idx[d] = 0;
  }
  return out;
}

// torch.matmul over the last two axes, the batch axes broadcast NumPy's way.
inline Vec batchMatMul(const RefArgs& a, bool ta, bool tb) {
  const Shape &as = a.inShapes[0], &bs = a.inShapes[1];
  const int64_t ar = as[as.size() - 2], ac = as.back(), br = bs[bs.size() - 2], bc = bs.back();
  const int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  const size_t rank = std::max(as.size(), bs.size()) - 2;
  auto dimOf = [&](const Shape& s, size_t i) {  // batch axis i of `rank`, aligned right
    const size_t lead = rank - (s.size() - 2);
    return i < lead ? int64_t(1) : s[i - lead];
  };
  Shape batch(rank);
  for (size_t i = 0; i < rank; ++i) batch[i] = std::max(dimOf(as, i), dimOf(bs, i));
  const int64_t batches = count(batch);
  Vec y(size_t(batches * m * n));
  for (int64_t e = 0; e < batches; ++e) {
    int64_t rest = e, ae = 0, be = 0, aStride = 1, bStride = 1;
    for (size_t i = rank; i-- > 0;) {
      const int64_t idx = rest % batch[i];
      rest /= batch[i];
      if (dimOf(as, i) != 1) ae += idx * aStride;
      if (dimOf(bs, i) != 1) be += idx * bStride;
      aStride *= dimOf(as, i);
      bStride *= dimOf(bs, i);
    }
    const double* A = &a.in[0][size_t(ae * ar * ac)];
    const double* B = &a.in[1][size_t(be * br * bc)];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (ta ? A[p * ac + i] : A[i * ac + p]) * (tb ? B[j * bc + p] : B[p * bc + j]);
        y[size_t((e * m + i) * n + j)] = s;
      }
  }
  return y;
}

// The padding row is zero, as initialised and never trained: the reference holds it
// so, and its finite differences are zero as its gradient is.
// A part of the table split by the vocabulary holds the rows from __first_row on;
// an id of a row it does not hold reads zero.
inline Vec embedding(const RefArgs& a, int64_t dim, int64_t pad) {
  const int64_t first = a.local ? a.local->i("__first_row", 0) : 0, rows = a.paramShapes[0][0];
  Vec y;
  for (double v : a.in[0]) {
    const int64_t id = int64_t(v), row = id - first;
    for (int64_t j = 0; j < dim; ++j)
      y.push_back(id == pad || row < 0 || row >= rows ? 0.0 : a.params[0][size_t(row * dim + j)]);
  }
  return y;
}

inline Vec positions(const RefArgs& a, bool learned) {
  const Shape& x = a.inShapes[0];
  const int64_t t = x[1], c = x[2];
  Vec y = a.in[0];
  for (size_t e = 0; e < y.size(); ++e) {
    const int64_t ch = int64_t(e) % c, p = (int64_t(e) / c) % t;
    const double angle = double(p) / std::pow(10000.0, double(2 * (ch / 2)) / double(c + c % 2));
    y[e] += learned ? a.params[0][size_t(p * c + ch)]
                    : (ch % 2 == 0 ? std::sin(angle) : std::cos(angle));
  }
  return y;
}

// RoFormer's rotation, rotate-half form: pair (i, i + D/2) turned by pos·base^(-2i/D).
inline Vec rotary(const RefArgs& a, double base) {
  const Shape& x = a.inShapes[0];
  const int64_t t = x[2], d = x[3], half = d / 2;
  Vec y(a.in[0].size());
  for (size_t r = 0; r < y.size() / size_t(d); ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(int64_t(r) % t) * std::pow(base, -2.0 * double(i) / double(d));
      const double x1 = a.in[0][r * size_t(d) + size_t(i)];
      const double x2 = a.in[0][r * size_t(d) + size_t(i + half)];
      y[r * size_t(d) + size_t(i)] = x1 * std::cos(angle) - x2 * std::sin(angle);
      y[r * size_t(d) + size_t(i + half)] = x2 * std::cos(angle) + x1 * std::sin(angle);
    }
  return y;
}

inline Vec rmsNorm(const RefArgs& a, int64_t dims, double eps) {
  const Shape& x = a.inShapes[0];
  int64_t cols = 1;
  for (int64_t i = 0; i < dims; ++i) cols *= x[x.size() - 1 - size_t(i)];
  Vec y(a.in[0].size());
  for (size_t r = 0; r < y.size() / size_t(cols); ++r) {
    double sq = 0;
    for (int64_t j = 0; j < cols; ++j) sq += std::pow(a.in[0][r * size_t(cols) + size_t(j)], 2);
    const double inv = 1 / std::sqrt(sq / double(cols) + eps);
    for (int64_t j = 0; j < cols; ++j)
      y[r * size_t(cols) + size_t(j)] = a.in[0][r * size_t(cols) + size_t(j)] * inv *
                                        (a.params.empty() ? 1.0 : a.params[0][size_t(j)]);
  }
  return y;
}

struct Attention {
  bool causal = false;
  double scale = 0;  // 0: 1/sqrt(D)
};

// softmax(q·kᵀ·scale + mask)·v over each whole row of scores; a float mask (input 3)
// is added, an int32 one (0/1) hides where it is 0; a row with no key left gives 0.
inline Vec attention(const RefArgs& a, const Attention& at) {
  const Shape &q = a.inShapes[0], &k = a.inShapes[1], &v = a.inShapes[2];
  const int64_t b = q[0], h = q[1], t = q[2], d = q[3], s = k[2], dv = v[3];
  const double scale = at.scale > 0 ? at.scale : 1 / std::sqrt(double(d));
  const bool hasMask = a.in.size() > 3;
  const Shape m = hasMask ? a.inShapes[3] : Shape{};
  Vec y(size_t(b * h * t * dv), 0.0);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t i = 0; i < t; ++i) {
        std::vector<double> sc(size_t(s), -INFINITY);
        double top = -INFINITY;
        for (int64_t j = 0; j < s; ++j) {
          if (at.causal && j > i) continue;
          double add = 0;
          if (hasMask) {
            const int64_t mi = ((m[0] == 1 ? 0 : n) * m[1] + (m[1] == 1 ? 0 : hh)) * m[2] * m[3] +
                               (m[2] == 1 ? 0 : i) * m[3] + j;
            add =
                !a.isLabels[3] ? a.in[3][size_t(mi)] : (a.in[3][size_t(mi)] != 0 ? 0.0 : -INFINITY);
            if (add == -INFINITY) continue;
          }
          double dotv = 0;
          for (int64_t c = 0; c < d; ++c)
            dotv += a.in[0][size_t(((n * h + hh) * t + i) * d + c)] *
                    a.in[1][size_t(((n * h + hh) * s + j) * d + c)];
          sc[size_t(j)] = dotv * scale + add;
          top = std::max(top, sc[size_t(j)]);
        }
        if (top == -INFINITY) continue;
        double sum = 0;
        for (double& e : sc) sum += (e = e == -INFINITY ? 0.0 : std::exp(e - top));
        for (int64_t j = 0; j < s; ++j)
          for (int64_t c = 0; c < dv; ++c)
            y[size_t(((n * h + hh) * t + i) * dv + c)] +=
                sc[size_t(j)] / sum * a.in[2][size_t(((n * h + hh) * s + j) * dv + c)];
      }
  return y;
}

// Mean cross-entropy over the rows whose label is not `ignore`, classes last.
inline Vec sequenceCrossEntropy(const RefArgs& a, int64_t ignore, double eps) {
  const int64_t c = a.inShapes[0].back(), rows = int64_t(a.in[0].size()) / c;
  double total = 0, counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t l = int64_t(a.in[1][size_t(r)]);
    if (l == ignore) continue;
    const double* x = &a.in[0][size_t(r * c)];
    double top = *std::max_element(x, x + c), s = 0, mean = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - top), mean += x[j] / double(c);
    const double lse = top + std::log(s);
    total += (1 - eps) * (lse - x[l]) + eps * (lse - mean);
    counted += 1;
  }
  return {total / counted};
}

}  // namespace seq_ref

inline std::vector<std::pair<std::string, OpCase>> sequenceCases() {
  using namespace seq_ref;
  using I = int64_t;
  std::vector<std::pair<std::string, OpCase>> c;
  auto add = [&](std::string name, OpCase oc) { c.push_back({std::move(name), std::move(oc)}); };

  auto perm = [](std::vector<int64_t> p) {
    return [p](const RefArgs& a) { return transpose(a, p); };
  };
  add("transpose 0 2 1", {"Transpose", {{"perm", Shape{0, 2, 1}}}, {{{2, 3, 4}}}, perm({0, 2, 1})});
  add("transpose heads",
      {"Transpose", {{"perm", Shape{0, 2, 1, 3}}}, {{{2, 3, 4, 5}}}, perm({0, 2, 1, 3})});
  add("transpose 0 3 1 2",
      {"Transpose", {{"perm", Shape{0, 3, 1, 2}}}, {{{2, 3, 2, 4}}}, perm({0, 3, 1, 2})});

  auto bmm = [](bool ta, bool tb) {
    return [ta, tb](const RefArgs& a) { return batchMatMul(a, ta, tb); };
  };
  add("batch matmul", {"BatchMatMul", {}, {{{2, 3, 4}}, {{2, 4, 5}}}, bmm(false, false)});
  add("batch matmul trans_b",
      {"BatchMatMul", {{"trans_b", true}}, {{{2, 2, 3, 4}}, {{2, 2, 5, 4}}}, bmm(false, true)});
  add("batch matmul trans_a",
      {"BatchMatMul", {{"trans_a", true}}, {{{2, 4, 3}}, {{2, 4, 5}}}, bmm(true, false)});
  add("batch matmul both", {"BatchMatMul",
                            {{"trans_a", true}, {"trans_b", true}},
                            {{{2, 4, 3}}, {{2, 5, 4}}},
                            bmm(true, true)});
  add("batch matmul broadcast",
      {"BatchMatMul", {}, {{{2, 1, 3, 4}}, {{2, 3, 4, 2}}}, bmm(false, false)});

  add("embedding", {"Embedding",
                    {{"num_embeddings", I(7)}, {"embedding_dim", I(4)}},
                    {{{3, 5}, Fill::Labels, 7}},
                    [](const RefArgs& a) { return embedding(a, 4, -1); }});
  add("embedding padding_idx",
      {"Embedding",
       {{"num_embeddings", I(6)}, {"embedding_dim", I(3)}, {"padding_idx", I(2)}},
       {{{4, 6}, Fill::Labels, 6}},
       [](const RefArgs& a) { return embedding(a, 3, 2); }});

  add("position learned",
      {"PositionEmbedding", {{"max_len", I(8)}}, {{{2, 5, 4}}}, [](const RefArgs& a) {
         return positions(a, true);
       }});
  add("position sinusoidal", {"PositionEmbedding",
                              {{"kind", std::string("sinusoidal")}},
                              {{{2, 5, 6}}},
                              [](const RefArgs& a) { return positions(a, false); }});

  add("rotary", {"RotaryEmbedding", {}, {{{2, 2, 5, 6}}}, [](const RefArgs& a) {
                   return rotary(a, 10000.0);
                 }});
  add("rotary base 100",
      {"RotaryEmbedding", {{"base", 100.0}}, {{{1, 3, 9, 4}}}, [](const RefArgs& a) {
         return rotary(a, 100.0);
       }});

  auto rms = [](int64_t dims) {
    return [dims](const RefArgs& a) { return rmsNorm(a, dims, 1e-6); };
  };
  add("rmsnorm last dim", {"RMSNorm", {}, {{{4, 6}}}, rms(1)});
  add("rmsnorm two dims", {"RMSNorm", {{"normalized_dims", I(2)}}, {{{2, 3, 5}}}, rms(2)});
  add("rmsnorm no affine", {"RMSNorm", {{"affine", false}}, {{{3, 7}}}, rms(1)});

  auto att = [](Attention at) { return [at](const RefArgs& a) { return attention(a, at); }; };
  const std::vector<InputSpec> qkv = {{{2, 2, 5, 4}}, {{2, 2, 5, 4}}, {{2, 2, 5, 3}}};
  add("attention", {"ScaledDotProductAttention", {}, qkv, att({})});
  add("attention causal", {"ScaledDotProductAttention", {{"causal", true}}, qkv, att({true})});
  add("attention scale", {"ScaledDotProductAttention", {{"scale", 0.3}}, qkv, att({false, 0.3})});
  add("attention more keys causal", {"ScaledDotProductAttention",
                                     {{"causal", true}},
                                     {{{1, 2, 4, 3}}, {{1, 2, 7, 3}}, {{1, 2, 7, 2}}},
                                     att({true})});
  // Past one block of queries (16) and of keys (64): the online softmax across blocks.
  add("attention long", {"ScaledDotProductAttention",
                         {{"causal", true}},
                         {{{1, 1, 40, 3}}, {{1, 1, 70, 3}}, {{1, 1, 70, 2}}},
                         att({true})});
  add("attention float mask",
      {"ScaledDotProductAttention",
       {},
       {{{2, 2, 5, 4}}, {{2, 2, 6, 4}}, {{2, 2, 6, 3}}, {.shape = {2, 1, 5, 6}, .constant = true}},
       att({})});
  add("attention padding mask",
      {"ScaledDotProductAttention",
       {{"causal", true}},
       {{{2, 2, 5, 4}}, {{2, 2, 5, 4}}, {{2, 2, 5, 3}}, {{2, 1, 1, 5}, Fill::Labels, 2}},
       att({true})});

  add("cross entropy sequence",
      {"SoftmaxCrossEntropy", {}, {{{2, 3, 5}}, {{2, 3}, Fill::Labels, 5}}, [](const RefArgs& a) {
         return sequenceCrossEntropy(a, -100, 0);
       }});
  add("cross entropy ignore_index",
      {"SoftmaxCrossEntropy",
       {{"ignore_index", I(1)}, {"label_smoothing", 0.1}},
       {{{3, 4, 4}}, {{3, 4}, Fill::Labels, 4}},
       [](const RefArgs& a) { return sequenceCrossEntropy(a, 1, 0.1); }});
  return c;
}

}  // namespace harness
