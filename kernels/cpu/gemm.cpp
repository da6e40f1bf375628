// Matrix products on the CPU: oneDNN's f32 GEMM first (its matmul primitive, prepared
// at plan time), a plain reference last. Linear adds its bias and optional ReLU
// in one pass over the output while it is still in cache.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include "kernels/core/functors.h"
#include "kernels/core/sequence_plan.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/half.h"

namespace netloom::cpu {
namespace {

struct GemmDims {
  int64_t m, n, k, lda, ldb;
  bool ta, tb;
};

// Work on a block of C, rows [r0, r1) × columns [c0, c1), run by the thread that just
// computed it, while it is in that thread's cache: Linear's bias and ReLU.
using Epilogue = std::function<void(int64_t r0, int64_t r1, int64_t c0, int64_t c1)>;

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
// splitting costs more than it saves (a 64 × 10 × 128 product, 0.16 MFLOP, takes
// about 3 µs either way; a 64 × 128 × 256 one, 4 MFLOP, 39 µs on one thread and 32 µs
// on two).
constexpr double kSerialGemmFlops = 1e6;

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

// How a product is cut into bands for `threads` threads, one band per core of this
// machine (not per thread: a run on fewer threads takes several bands each, so its sums
// are the same on any number of threads above one), in whole 16-float vectors, never
// along the inner dimension. Into bands of whole rows of C where C is larger than A and
// B together (a weight's gradient, whose update then reads each thread's rows from that
// thread's cache), or where column bands would be under 128 wide and there are rows
// enough (oneDNN's code for a narrow band is slow: a 64 × 64 × 256 band took 31.5 µs on
// one thread, a 32 × 128 × 256 one 23.9 µs); else along C's longer side (the bands then
// read less of A and B together). One part (not cut) on one thread, where a band of
// another width can sum in another order (oneDNN blocks the inner dimension by the
// band's width) but two bands run 6% slower than the whole; and for a product under
// kSerialGemmFlops or a side of one vector.
struct BandSplit {
  bool rows;
  int64_t side, units;
  int parts;
  BandSplit(const GemmDims& d, int threads)
      : rows(d.m >= d.n || d.m * d.n > d.k * (d.m + d.n) ||
             (d.n < 128 * omp_get_num_procs() && d.m >= 16 * omp_get_num_procs())),
        side(rows ? d.m : d.n),
        units((side + 15) / 16) {
    parts = threads <= 1 ? 1 : int(std::min<int64_t>(omp_get_num_procs(), units));
    if (2.0 * double(d.m) * double(d.n) * double(d.k) < kSerialGemmFlops) parts = 1;
  }
  // Where band t of `of` starts (band `of` - 1 ends at bound(of, of)).
  int64_t bound(int t, int of) const { return std::min(side, units * t / of * 16); }
};

// oneDNN's sgemm, parallelised here rather than by oneDNN: a small product runs on
// one thread; a larger one is cut into BandSplit's bands, each a one-thread sgemm,
// shared out between the threads. For the short, wide products of a training step
// (64 rows) oneDNN's own split scales poorly (a 64 × 256 × 784 product: 1.4× on two
// threads; cut here: 1.7×).
void gemmOneDnn(const GemmDims& d, const float* a, const float* b, float* c,
                const Epilogue& then = {}) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const BandSplit split(d, threads);
  if (split.parts <= 1) {
    omp_set_num_threads(1);
    sgemmPart(d, a, b, c, true, 0, d.m);
    omp_set_num_threads(threads);
    if (then) then(0, d.m, 0, d.n);
    return;
  }
#pragma omp parallel num_threads(std::min(threads, split.parts))
  {
    omp_set_num_threads(1);  // each band is one thread's
    for (int t = omp_get_thread_num(); t < split.parts; t += omp_get_num_threads()) {
      const int64_t lo = split.bound(t, split.parts), hi = split.bound(t + 1, split.parts);
      sgemmPart(d, a, b, c, split.rows, lo, hi);
      if (then && lo < hi) split.rows ? then(lo, hi, 0, d.n) : then(0, d.m, lo, hi);
    }
  }
  omp_set_num_threads(threads);
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

// oneDNN's matmul primitive for one product, prepared once with the plan's shapes,
// and one per band where the product is split between threads as gemmOneDnn splits
// it (the same bands, so the same sums whatever the thread count). dnnl_sgemm
// dispatches again at every call, which costs most after a product of another shape:
// a 64 × 10 × 128 product (a classifier's last layer) took 19 µs right after a
// 64 × 128 × 256 one, and 2.5 µs as a prepared primitive. Every primitive is made for
// one thread, and each band runs on its own.
class PreparedGemm {
 public:
  // `operands`: the type of A and B (f32, or bf16 from mixed precision's CastBf16); C
  // is f32 either way.
  explicit PreparedGemm(const GemmDims& d,
                        dnnl::memory::data_type operands = dnnl::memory::data_type::f32)
      : m_d(d), m_type(operands), m_bytes(dnnl::memory::data_type_size(operands)) {
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    struct Restore {
      int threads;
      ~Restore() { omp_set_num_threads(threads); }
    } restore{threads};
    m_whole = band(true, 0, d.m);
    const BandSplit split(d, threads);
    if (split.parts <= 1) return;
    for (int t = 0; t < split.parts; ++t)
      m_bands.push_back(
          band(split.rows, split.bound(t, split.parts), split.bound(t + 1, split.parts)));
  }

  // The implementation oneDNN chose for the whole product ("brg:avx512_core", ...).
  std::string impl() const { return m_whole.impl; }

  // The bands on the threads there are (each thread takes every n-th band, so all
  // are done, the same way, however many the runtime gives), or the whole product
  // where it is not cut. Each band's `then` runs on the thread that computed it,
  // right after.
  void run(const void* a, const void* b, float* c, const Epilogue& then) {
    if (m_bands.size() <= 1) {  // on this thread alone: oneDNN's own split (its gemm-based
      const int had = omp_get_max_threads();  // matmul, without AVX-512) sums in another order
      omp_set_num_threads(1);
      m_whole.run(a, b, c, then);
      return omp_set_num_threads(had);
    }
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    const int team = int(std::min<size_t>(size_t(threads), m_bands.size()));
    if (team == 1) {
      for (Band& band : m_bands) band.run(a, b, c, then);
      return;
    }
#pragma omp parallel num_threads(team)
    for (size_t k = size_t(omp_get_thread_num()); k < m_bands.size();
         k += size_t(omp_get_num_threads()))
      m_bands[k].run(a, b, c, then);
  }

 private:
  struct Band {
    DnnlCall call;
    std::string impl;
    int64_t a = 0, b = 0, c = 0;  // where the band's operands start, in elements
    int64_t m = 0, n = 0, ldc = 0;
    int64_t row = 0, col = 0;  // its first element of C
    size_t bytes = 4;          // of an element of A and B
    bool empty = false;
    void run(const void* pa, const void* pb, float* pc, const Epilogue& then) {
      if (empty) return;
      if (call.empty()) {  // no inner dimension: C is zero
        for (int64_t i = 0; i < m; ++i) std::fill_n(pc + c + i * ldc, n, 0.f);
      } else {
        call.set(DNNL_ARG_SRC, static_cast<const char*>(pa) + size_t(a) * bytes);
        call.set(DNNL_ARG_WEIGHTS, static_cast<const char*>(pb) + size_t(b) * bytes);
        call.set(DNNL_ARG_DST, pc + c);
        call.run();
      }
      if (then) then(row, row + m, col, col + n);
    }
  };

  // Rows [lo, hi) of C, or its columns: op(A) is m × k, op(B) k × n, each a view of
  // the stored matrix through strides.
  Band band(bool rows, int64_t lo, int64_t hi) const {
    using dnnl::memory;
    const GemmDims& d = m_d;
    Band out;
    const int64_t m = rows ? hi - lo : d.m, n = rows ? d.n : hi - lo;
    out.empty = m <= 0 || n <= 0;
    if (out.empty) return out;
    out.a = rows ? (d.ta ? lo : lo * d.lda) : 0;
    out.b = rows ? 0 : (d.tb ? lo * d.ldb : lo);
    out.c = rows ? lo * d.n : lo;
    out.row = rows ? lo : 0;
    out.col = rows ? 0 : lo;
    out.m = m;
    out.n = n;
    out.ldc = d.n;
    out.bytes = m_bytes;
    if (d.k == 0) return out;
    const memory::desc a({m, d.k}, m_type, d.ta ? memory::dims{1, d.lda} : memory::dims{d.lda, 1});
    const memory::desc b({d.k, n}, m_type, d.tb ? memory::dims{1, d.ldb} : memory::dims{d.ldb, 1});
    const memory::desc c({m, n}, memory::data_type::f32, memory::dims{d.n, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), userScratchpad(), dnnlEngine());
    out.impl = pd.impl_info_str();
    out.call = DnnlCall::make<dnnl::matmul>(pd);
    out.call.arg(DNNL_ARG_SRC, a);
    out.call.arg(DNNL_ARG_WEIGHTS, b);
    out.call.arg(DNNL_ARG_DST, c);
    return out;
  }

  GemmDims m_d;
  dnnl::memory::data_type m_type;
  size_t m_bytes;
  Band m_whole;
  std::vector<Band> m_bands;
};

// A product's launch: given A, B (float, or bf16 for the bf16 kernels), C and what
// to do to each block of C once computed (may be empty).
using Gemm = std::function<void(const void*, const void*, float*, const Epilogue&)>;
using GemmMaker = Gemm (*)(const GemmDims&);

// oneDNN's f32 product: the prepared primitive, or its sgemm call where the primitive
// would be oneDNN's reference code (or it has none).
Gemm onednnGemm(const GemmDims& d) {
  std::shared_ptr<PreparedGemm> plan;
  try {
    plan = std::make_shared<PreparedGemm>(d);
  } catch (const dnnl::error&) {
  }
  if (!plan || plan->impl().rfind("ref", 0) == 0)
    return [d](const void* a, const void* b, float* c, const Epilogue& then) {
      gemmOneDnn(d, static_cast<const float*>(a), static_cast<const float*>(b), c, then);
    };
  return [plan](const void* a, const void* b, float* c, const Epilogue& then) {
    plan->run(a, b, c, then);
  };
}
Gemm referenceGemm(const GemmDims& d) {
  return [d](const void* a, const void* b, float* c, const Epilogue& then) {
    gemmReference(d, static_cast<const float*>(a), static_cast<const float*>(b), c);
    if (then) then(0, d.m, 0, d.n);
  };
}
// oneDNN's product of bf16 operands into float (its bf16 kernels decline where the CPU
// has no fast one).
Gemm bf16Gemm(const GemmDims& d) {
  auto plan = std::make_shared<PreparedGemm>(d, dnnl::memory::data_type::bf16);
  return [plan](const void* a, const void* b, float* c, const Epilogue& then) {
    plan->run(a, b, c, then);
  };
}

// What --explain says of the oneDNN kernel prepared for `d`.
std::string onednnDetail(const GemmDims& d) {
  try {
    const std::string impl = PreparedGemm(d).impl();
    if (impl.rfind("ref", 0) != 0)
      return "oneDNN matmul primitive (" + (impl.empty() ? std::string("empty") : impl) +
             "), prepared once";
  } catch (const dnnl::error&) {
  }
  return "dnnl_sgemm at each launch";
}

// Mixed precision's bf16 operands (CastBf16) into a float product: both operands bf16,
// a bias float, and a CPU where oneDNN has a fast bf16 kernel (AVX512_BF16, AMX).
std::string declineUnlessBf16(const KernelSig& s, const GemmDims& d) {
  if (s.in.size() < 2 || s.in[0].dtype != DType::BF16 || s.in[1].dtype != DType::BF16)
    return "takes bf16 operands only";
  for (size_t i = 2; i < s.in.size(); ++i)
    if (s.in[i].dtype != DType::F32) return "takes a float bias only";
  if (s.out[0].dtype != DType::F32) return "writes float32 only";
  if (!cpuHasBf16Units()) return "this CPU has no bf16 units (AVX512_BF16 or AMX)";
  try {
    const std::string impl = PreparedGemm(d, dnnl::memory::data_type::bf16).impl();
    if (impl.rfind("ref", 0) == 0)
      return "oneDNN has no fast bf16 product on this CPU (it would run " + impl + ")";
  } catch (const dnnl::error& e) {
    return std::string("oneDNN has no bf16 product here: ") + e.what();
  }
  return {};
}

std::string bf16Detail(const GemmDims& d) {
  return "oneDNN matmul primitive (" + PreparedGemm(d, dnnl::memory::data_type::bf16).impl() +
         ") on bf16 operands, into float, prepared once";
}

GemmDims linearDims(const KernelSig& s) {
  return matmulDims(s.in[0].shape, s.in[1].shape, false, true);
}
GemmDims matmulDims(const KernelSig& s) {
  return matmulDims(s.in[0].shape, s.in[1].shape, s.attrs->b("trans_a"), s.attrs->b("trans_b"));
}

// y = x·Wᵀ (+ b) (then ReLU), x viewed as rows × in: the bias and ReLU on each band
// of y as soon as it is computed, by the thread that computed it.
KernelFn makeLinear(const KernelSig& s, GemmMaker make) {
  GemmDims d = linearDims(s);
  bool relu = s.attrs->s("activation") == "relu";
  bool bias = s.in.size() > 2;
  return [d, relu, bias, gemm = make(d)](const KernelIO& io) {
    float* y = io.out[0].f32();
    if (!bias && !relu) return gemm(io.in[0].data, io.in[1].data, y, {});
    const float* b = bias ? io.in[2].f32() : nullptr;
    gemm(io.in[0].data, io.in[1].data, y, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      for (int64_t i = r0; i < r1; ++i) {
        float* row = y + i * d.n;
        if (b) {
#pragma omp simd
          for (int64_t j = c0; j < c1; ++j) row[j] += b[j];
        }
        if (relu) {
#pragma omp simd
          for (int64_t j = c0; j < c1; ++j) row[j] = fn::Relu{}(row[j]);
        }
      }
    });
  };
}

KernelFn makeMatMul(const KernelSig& s, GemmMaker make) {
  return [gemm = make(matmulDims(s))](const KernelIO& io) {
    gemm(io.in[0].data, io.in[1].data, io.out[0].f32(), {});
  };
}

// BatchMatMul: one product per output batch entry, each operand's matrix found
// through its broadcast strides (0 on an axis it lacks or has as 1).
struct BatchedGemm {
  GemmDims d;
  int64_t batches = 1, aMat = 0, bMat = 0, cMat = 0;
  fn::BroadcastIndex aIdx, bIdx;
};

BatchedGemm batchedGemm(const KernelSig& s) {
  const Shape &a = s.in[0].shape, &b = s.in[1].shape, &y = s.out[0].shape;
  BatchedGemm g;
  g.d = matmulDims(Shape{a[a.size() - 2], a.back()}, Shape{b[b.size() - 2], b.back()},
                   s.attrs->b("trans_a"), s.attrs->b("trans_b"));
  const Shape batch(y.begin(), y.end() - 2);
  g.batches = numel(batch);
  g.aMat = a[a.size() - 2] * a.back();
  g.bMat = b[b.size() - 2] * b.back();
  g.cMat = g.d.m * g.d.n;
  g.aIdx = batchStrides(a, batch);
  g.bIdx = batchStrides(b, batch);
  return g;
}

KernelFn makeBatchMatMul(const KernelSig& s, bool reference) {
  const BatchedGemm g = batchedGemm(s);
  return [g, reference](const KernelIO& io) {
    const float *a = io.in[0].f32(), *b = io.in[1].f32();
    float* c = io.out[0].f32();
    auto one = [&](int64_t e) {
      const float* ae = a + g.aIdx.source(e) * g.aMat;
      const float* be = b + g.bIdx.source(e) * g.bMat;
      if (reference)
        gemmReference(g.d, ae, be, c + e * g.cMat);
      else
        sgemmPart(g.d, ae, be, c + e * g.cMat, true, 0, g.d.m);
    };
    if (reference) {  // gemmReference splits each product's rows between threads
      for (int64_t e = 0; e < g.batches; ++e) one(e);
      return;
    }
    if (g.batches == 1) return gemmOneDnn(g.d, a, b, c);
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
      omp_set_num_threads(1);  // each product is one thread's
#pragma omp for schedule(static)
      for (int64_t e = 0; e < g.batches; ++e) one(e);
    }
    omp_set_num_threads(threads);
  };
}

// Column sums of a rows × n tensor of X (float or bf16) into n floats.
template <class X>
KernelFn reduceRows(const KernelSig& s) {
  int64_t n = s.in[0].shape.back(), rows = numel(s.in[0].shape) / n;
  return [n, rows](const KernelIO& io) {
    const X* x = static_cast<const X*>(io.in[0].data);
    float* y = io.out[0].f32();
    parallelFor(n, rows * n < kParallelGrain ? n + 1 : 16, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) y[j] = 0.f;
      for (int64_t i = 0; i < rows; ++i) {
        const X* row = x + i * n;
#pragma omp simd
        for (int64_t j = lo; j < hi; ++j) y[j] += load(row, j);
      }
    });
  };
}

}  // namespace

void registerGemm(KernelRegistry& r) {
  r.add("BatchMatMul", DeviceKind::Cpu,
        KernelImpl{"onednn.sgemm_batched", declineUnlessFloat,
                   [](const KernelSig& s) { return makeBatchMatMul(s, false); }});
  r.add("BatchMatMul", DeviceKind::Cpu, kernel("reference.batch_matmul", [](const KernelSig& s) {
          return makeBatchMatMul(s, true);
        }));
  // Each product: oneDNN in float, oneDNN on bf16 operands (mixed precision's), then
  // the reference loops (float only).
  struct Product {
    const char *op, *suffix, *reference;
    GemmDims (*dims)(const KernelSig&);
    KernelFn (*make)(const KernelSig&, GemmMaker);
  };
  for (const Product& p : {Product{"Linear", "+bias", "reference.linear", linearDims, makeLinear},
                           Product{"MatMul", "", "reference.matmul", matmulDims, makeMatMul}}) {
    KernelImpl f32{std::string("onednn.sgemm") + p.suffix, declineUnlessFloat,
                   [p](const KernelSig& s) { return p.make(s, onednnGemm); }};
    f32.detail = [p](const KernelSig& s) { return onednnDetail(p.dims(s)); };
    r.add(p.op, DeviceKind::Cpu, std::move(f32));
    KernelImpl b16{std::string("onednn.bf16_gemm") + p.suffix,
                   [p](const KernelSig& s) { return declineUnlessBf16(s, p.dims(s)); },
                   [p](const KernelSig& s) { return p.make(s, bf16Gemm); }};
    b16.detail = [p](const KernelSig& s) { return bf16Detail(p.dims(s)); };
    b16.halfTensors = true;
    r.add(p.op, DeviceKind::Cpu, std::move(b16));
    KernelImpl ref =
        kernel(p.reference, [p](const KernelSig& s) { return p.make(s, referenceGemm); });
    ref.decline = declineUnlessFloat;
    r.add(p.op, DeviceKind::Cpu, std::move(ref));
  }

  // Column sums: each thread owns a band of columns and walks all rows, so no
  // reduction across threads is needed and the result is thread-count independent.
  // The rows are float or bf16 (a bf16 gradient's bias gradient), the sums float.
  KernelImpl columns = kernel("cpu.reduce_rows", [](const KernelSig& s) -> KernelFn {
    KernelFn made;
    withElement(s.in[0].dtype,
                [&](auto* type) { made = reduceRows<ElementOf<decltype(type)>>(s); });
    return made;
  });
  columns.halfTensors = true;
  columns.decline = [](const KernelSig& s) -> std::string {
    return s.out[0].dtype == DType::F32 ? "" : "sums into float32";
  };
  r.add("ReduceRows", DeviceKind::Cpu, std::move(columns));
}

}  // namespace netloom::cpu
