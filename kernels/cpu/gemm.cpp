// Matrix products on the CPU: oneDNN's sgemm first (tuned, JIT-dispatched per CPU),
// a plain reference last. Linear adds its bias and optional ReLU in one pass over
// the output while it is still in cache.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>

#include "kernels/core/functors.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

struct GemmDims {
  int64_t m, n, k, lda, ldb;
  bool ta, tb;
};

// Every dimension but the last (a zero-wide last dimension still has its rows).
int64_t rowsOf(const Shape& s) {
  return numel(Shape(s.begin(), s.end() - 1));
}

// A viewed as rows × last dimension; likewise B.
GemmDims matmulDims(const Shape& a, const Shape& b, bool ta, bool tb) {
  int64_t aCols = a.back(), aRows = rowsOf(a);
  int64_t bCols = b.back(), bRows = rowsOf(b);
  return {ta ? aCols : aRows, tb ? bRows : bCols, ta ? aRows : aCols, aCols, bCols, ta, tb};
}

// Below this many FLOPs a product runs on one thread: waking the others and
// splitting costs more than it saves. A 64 × 10 × 128 product takes 2 µs alone and
// 6 µs on two threads; a 64 × 128 × 256 one gains 1.3× alone on two threads, yet the
// MLP trains faster with it on one (the woken thread then competes with the loader's).
constexpr double kSerialGemmFlops = 8e6;

// Rows [lo, hi) of C, or its columns, on the calling thread alone.
void sgemmPart(const GemmDims& d, const float* a, const float* b, float* c, bool rows, int64_t lo,
               int64_t hi) {
  if (hi <= lo) return;
  const char ta = d.ta ? 'T' : 'N', tb = d.tb ? 'T' : 'N';
  if (rows)  // row i of op(A): row i of A, or column i of the stored Aᵀ
    dnnl_sgemm(ta, tb, hi - lo, d.n, d.k, 1.f, a + (d.ta ? lo : lo * d.lda), d.lda, b, d.ldb, 0.f,
               c + lo * d.n, d.n);
  else  // column j of op(B): column j of B, or row j of the stored Bᵀ
    dnnl_sgemm(ta, tb, d.m, hi - lo, d.k, 1.f, a, d.lda, b + (d.tb ? lo * d.ldb : lo), d.ldb, 0.f,
               c + lo, d.n);
}

// oneDNN's sgemm, parallelised here rather than by oneDNN: a small product runs on
// one thread; a larger one is cut along its longer output side into one band per
// thread, each band a one-thread sgemm. For the short, wide products of a training
// step (64 rows) oneDNN's own split scales poorly (a 64 × 256 × 784 product: 1.4×
// on two threads; cut here: 1.7×). No band splits the inner dimension, so every
// element of C is summed in the same order whatever the thread count.
void gemmOneDnn(const GemmDims& d, const float* a, const float* b, float* c) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool rows = d.m >= d.n;
  const int64_t side = rows ? d.m : d.n, unit = 16;  // bands of whole 16-float vectors
  const int64_t units = (side + unit - 1) / unit;
  const int parts = int(std::min<int64_t>(threads, units));
  if (parts <= 1 || 2.0 * double(d.m) * double(d.n) * double(d.k) < kSerialGemmFlops) {
    omp_set_num_threads(1);
    sgemmPart(d, a, b, c, true, 0, d.m);
    omp_set_num_threads(threads);
    return;
  }
#pragma omp parallel num_threads(parts)
  {
    omp_set_num_threads(1);  // each band is one thread's
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = std::min(side, units * t / nt * unit);
    const int64_t hi = std::min(side, units * (t + 1) / nt * unit);
    sgemmPart(d, a, b, c, rows, lo, hi);
  }
}

void gemmReference(const GemmDims& d, const float* a, const float* b, float* c) {
  parallelFor(d.m, 4, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        float acc = 0.f;
        for (int64_t p = 0; p < d.k; ++p) {
          float av = d.ta ? a[p * d.lda + i] : a[i * d.lda + p];
          float bv = d.tb ? b[j * d.ldb + p] : b[p * d.ldb + j];
          acc += av * bv;
        }
        c[i * d.n + j] = acc;
      }
  });
}

using GemmFn = void (*)(const GemmDims&, const float*, const float*, float*);

std::string declineNonFloat(const KernelSig& s) {
  for (const auto& t : s.in)
    if (t.dtype != DType::F32) return "oneDNN sgemm takes float32 only";
  return {};
}

// y = x·Wᵀ (+ b) (then ReLU), x viewed as rows × in.
KernelFn makeLinear(const KernelSig& s, GemmFn gemm) {
  GemmDims d = matmulDims(s.in[0].shape, s.in[1].shape, false, true);
  bool relu = s.attrs->s("activation") == "relu";
  bool bias = s.in.size() > 2;
  return [d, relu, bias, gemm](const KernelIO& io) {
    float* y = io.out[0].f32();
    gemm(d, io.in[0].f32(), io.in[1].f32(), y);
    if (!bias && !relu) return;
    const float* b = bias ? io.in[2].f32() : nullptr;
    parallelFor(d.m, std::max<int64_t>(1, kParallelGrain / d.n), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        float* row = y + i * d.n;
        if (b) {
#pragma omp simd
          for (int64_t j = 0; j < d.n; ++j) row[j] += b[j];
        }
        if (relu) {
#pragma omp simd
          for (int64_t j = 0; j < d.n; ++j) row[j] = fn::Relu{}(row[j]);
        }
      }
    });
  };
}

KernelFn makeMatMul(const KernelSig& s, GemmFn gemm) {
  GemmDims d =
      matmulDims(s.in[0].shape, s.in[1].shape, s.attrs->b("trans_a"), s.attrs->b("trans_b"));
  return
      [d, gemm](const KernelIO& io) { gemm(d, io.in[0].f32(), io.in[1].f32(), io.out[0].f32()); };
}

}  // namespace

void registerGemm(KernelRegistry& r) {
  r.add("Linear", DeviceKind::Cpu, {"onednn.sgemm+bias", declineNonFloat, [](const KernelSig& s) {
                                      return makeLinear(s, gemmOneDnn);
                                    }});
  r.add("Linear", DeviceKind::Cpu, kernel("reference.linear", [](const KernelSig& s) {
          return makeLinear(s, gemmReference);
        }));
  r.add("MatMul", DeviceKind::Cpu, {"onednn.sgemm", declineNonFloat, [](const KernelSig& s) {
                                      return makeMatMul(s, gemmOneDnn);
                                    }});
  r.add("MatMul", DeviceKind::Cpu, kernel("reference.matmul", [](const KernelSig& s) {
          return makeMatMul(s, gemmReference);
        }));

  // Column sums: each thread owns a band of columns and walks all rows, so no
  // reduction across threads is needed and the result is thread-count independent.
  r.add("ReduceRows", DeviceKind::Cpu,
        kernel("cpu.reduce_rows", [](const KernelSig& s) -> KernelFn {
          int64_t n = s.in[0].shape.back(), rows = numel(s.in[0].shape) / n;
          return [n, rows](const KernelIO& io) {
            const float* x = io.in[0].f32();
            float* y = io.out[0].f32();
            parallelFor(n, rows * n < kParallelGrain ? n + 1 : 16, [&](int64_t lo, int64_t hi) {
              for (int64_t j = lo; j < hi; ++j) y[j] = 0.f;
              for (int64_t i = 0; i < rows; ++i) {
                const float* row = x + i * n;
#pragma omp simd
                for (int64_t j = lo; j < hi; ++j) y[j] += row[j];
              }
            });
          };
        }));
}

}  // namespace netloom::cpu
