// The sequence ops on the CPU: Transpose, SumTo, Embedding, PositionEmbedding and
// RotaryEmbedding with their gradients. Index maps and angles come from
// kernels/core/sequence_math.h, which the CUDA kernels share. Every reduction is
// owned by one thread and summed in a fixed order, so results do not depend on the
// thread count.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/core/sequence_plan.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

// Axes that stay last and in order (attention's [0, 2, 1, 3] keeps the head size
// last) are copied as whole runs, with one index computation per run.
KernelFn transpose(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  std::vector<int64_t> perm = s.attrs->ints("perm");
  int64_t run = 1;
  while (perm.size() > 1 && perm.back() == int64_t(perm.size()) - 1) {
    run *= x[perm.size() - 1];
    perm.pop_back();
  }
  // Over the leading axes, strides in runs; times the run, in elements.
  fn::Permutation p = permutation(Shape(x.begin(), x.begin() + long(perm.size())), perm);
  for (int d = 0; d < p.rank; ++d) p.strides[d] *= run;
  const int64_t es = int64_t(dtypeSize(s.in[0].dtype)), bytes = run * es;
  const int64_t runs = run > 0 ? numel(s.out[0].shape) / run : 0;
  return [p, es, bytes, runs](const KernelIO& io) {
    const char* x = static_cast<const char*>(io.in[0].data);
    char* y = static_cast<char*>(io.out[0].data);
    parallelFor(runs, std::max<int64_t>(1, 4 * kParallelGrain / std::max<int64_t>(bytes, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r)
                    std::memcpy(y + r * bytes, x + p.source(r) * es, size_t(bytes));
                });
  };
}

KernelFn sumTo(const KernelSig& s) {
  const SumPlan p = sumPlan(s.in[0].shape, s.out[0].shape);
  return [p](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(p.outputs, std::max<int64_t>(1, kParallelGrain / p.terms),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t o = lo; o < hi; ++o) {
                    const float* base = x + p.kept.source(o);
                    double sum = 0;
                    for (int64_t r = 0; r < p.terms; ++r) sum += base[p.reduced.source(r)];
                    y[o] = float(sum);
                  }
                });
  };
}

// The part of the table a kernel holds: all of it, or (split by the vocabulary) the
// rows from `first` on of a table of `total`.
struct TablePart {
  int64_t rows, dim, first, total;
  explicit TablePart(const Attrs& a)
      : rows(a.i("num_embeddings")),
        dim(a.i("embedding_dim")),
        first(a.i("__first_row", 0)),
        total(a.i("__table_rows", rows)) {}
};

KernelFn embedding(const KernelSig& s) {
  const TablePart t(*s.attrs);
  const int64_t n = numel(s.in[0].shape);
  return [t, n](const KernelIO& io) {
    const int32_t* ids = io.in[0].i32();
    const float* table = io.in[1].f32();
    float* y = io.out[0].f32();
    parallelFor(n, std::max<int64_t>(1, kParallelGrain / t.dim), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t row = fn::embeddingRow(ids[i], t.first, t.rows, t.total);
        float* yr = y + i * t.dim;
        if (row < 0) {  // an id past the table poisons the output visibly
          std::fill(yr, yr + t.dim, row == fn::kNoRow ? NAN : 0.f);
          continue;
        }
        std::memcpy(yr, table + row * t.dim, size_t(t.dim) * sizeof(float));
      }
    });
  };
}

// Each thread owns a band of the table's columns and walks every id in order, so
// the sums are the same for any thread count; the padding row stays zero.
KernelFn embeddingGrad(const KernelSig& s) {
  const TablePart t(*s.attrs);
  const int64_t pad = s.attrs->i("padding_idx"), n = numel(s.in[1].shape);
  return [t, pad, n](const KernelIO& io) {
    const float* dy = io.in[0].f32();
    const int32_t* ids = io.in[1].i32();
    float* dw = io.out[0].f32();
    const int64_t dim = t.dim;
    parallelFor(dim, n * dim < kParallelGrain ? dim + 1 : 16, [&](int64_t lo, int64_t hi) {
      for (int64_t r = 0; r < t.rows; ++r) std::fill(dw + r * dim + lo, dw + r * dim + hi, 0.f);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = fn::embeddingRow(ids[i], t.first, t.rows, t.total);
        if (at < 0 || ids[i] == pad) continue;
        float* row = dw + at * dim;
        const float* g = dy + i * dim;
#pragma omp simd
        for (int64_t j = lo; j < hi; ++j) row[j] += g[j];
      }
    });
  };
}

// y = x + rows[first + t]; the sinusoids are computed once, at plan time, for every
// position there can be. `at`: the first position is the input after x (generation).
KernelFn positionEmbedding(const KernelSig& s, bool at) {
  const Shape& x = s.in[0].shape;
  const int64_t b = x[0], t = x[1], c = x[2], maxLen = s.attrs->i("max_len", t);
  const bool learned = s.in.size() > (at ? 2u : 1u);
  auto table = std::make_shared<std::vector<float>>();
  if (!learned) {
    table->resize(size_t(maxLen * c));
    for (int64_t p = 0; p < maxLen; ++p)
      for (int64_t j = 0; j < c; ++j) (*table)[size_t(p * c + j)] = fn::sinusoid(p, j, c);
  }
  return [b, t, c, maxLen, at, learned, table](const KernelIO& io) {
    const int64_t first = at ? io.in[1].i32()[0] : 0;
    if (first < 0 || first + t > maxLen)
      throw std::runtime_error("position " + std::to_string(first + t - 1) + " is past max_len " +
                               std::to_string(maxLen));
    const float* rows0 = learned ? io.in[at ? 2 : 1].f32() : table->data();
    const float* rows = rows0 + first * c;
    const float* xs = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(b * t, std::max<int64_t>(1, kParallelGrain / c), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const float* r = rows + (i % t) * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) y[i * c + j] = xs[i * c + j] + r[j];
      }
    });
  };
}

KernelFn positionEmbeddingGrad(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  const int64_t b = x[0], t = x[1], c = x[2], rows = s.out[0].shape[0];
  return [b, t, c, rows](const KernelIO& io) {
    const float* dy = io.in[0].f32();
    float* dw = io.out[0].f32();
    std::fill(dw + t * c, dw + rows * c, 0.f);
    parallelFor(t * c, kParallelGrain / std::max<int64_t>(1, b), [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        double sum = 0;
        for (int64_t n = 0; n < b; ++n) sum += dy[n * t * c + k];
        dw[k] = float(sum);
      }
    });
  };
}

// Each (batch, head, token) row's pairs turned by sign·angle; `at`: positions start
// at the input after x (generation).
KernelFn rotary(const KernelSig& s, float sign, bool at = false) {
  const Shape& x = s.in[0].shape;
  const int64_t rows = x[0] * x[1] * x[2], tokens = x[2], half = x[3] / 2;
  const fn::Rotary rot{float(s.attrs->f("base", 10000.0)), half};
  return [rows, tokens, half, rot, sign, at](const KernelIO& io) {
    const int64_t first = at ? io.in[1].i32()[0] : 0;
    const float* xs = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(rows, std::max<int64_t>(1, kParallelGrain / (2 * half)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    const float* xr = xs + r * 2 * half;
                    float* yr = y + r * 2 * half;
                    for (int64_t i = 0; i < half; ++i)
                      rot(xr[i], xr[i + half], first + r % tokens, i, sign, yr[i], yr[i + half]);
                  }
                });
  };
}

}  // namespace

void registerSequence(KernelRegistry& r) {
  auto add = [&](const char* op, const char* name, std::function<KernelFn(const KernelSig&)> make) {
    r.add(op, DeviceKind::Cpu, kernel(name, std::move(make)));
  };
  // It moves bytes, so bf16 tensors too, keeping the type.
  KernelImpl moves = kernel("cpu.transpose", transpose);
  moves.halfTensors = true;
  moves.decline = [](const KernelSig& s) -> std::string {
    return s.in[0].dtype == s.out[0].dtype ? "" : "moves elements without changing their type";
  };
  r.add("Transpose", DeviceKind::Cpu, std::move(moves));
  add("SumTo", "cpu.sum_to", sumTo);
  add("Embedding", "cpu.embedding", embedding);
  add("EmbeddingGrad", "cpu.embedding_grad", embeddingGrad);
  add("PositionEmbedding", "cpu.position_embedding",
      [](const KernelSig& s) { return positionEmbedding(s, false); });
  add("PositionEmbeddingAt", "cpu.position_embedding_at",
      [](const KernelSig& s) { return positionEmbedding(s, true); });
  add("PositionEmbeddingGrad", "cpu.position_embedding_grad", positionEmbeddingGrad);
  add("RotaryEmbedding", "cpu.rotary", [](const KernelSig& s) { return rotary(s, 1.f); });
  add("RotaryEmbeddingGrad", "cpu.rotary_grad", [](const KernelSig& s) { return rotary(s, -1.f); });
  add("RotaryEmbeddingAt", "cpu.rotary_at",
      [](const KernelSig& s) { return rotary(s, 1.f, true); });
}

}  // namespace netloom::cpu
