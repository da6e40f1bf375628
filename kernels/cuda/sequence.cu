// The sequence ops on CUDA: Transpose, SumTo, Embedding, PositionEmbedding and
// RotaryEmbedding with their gradients. Index maps and angles come from
// kernels/core/sequence_math.h, as on the CPU; every sum is taken by one thread in
// the CPU's order, so the results are the CPU's.
#include <vector>

#include "kernels/core/sequence_plan.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

template <class U>
__global__ void transposeKernel(const U* x, U* y, int64_t n, fn::Permutation p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[p.source(i)];
}

KernelFn transpose(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  const fn::Permutation p = permutation(x, s.attrs->ints("perm"));
  const int64_t n = numel(x);
  const size_t es = dtypeSize(s.in[0].dtype);
  cudaStream_t stream = streamOf(s);
  return [p, n, es, stream](const KernelIO& io) {
    if (n == 0) return;
    if (es == 4)
      transposeKernel<<<gridFor(n), kBlock, 0, stream>>>(
          static_cast<const uint32_t*>(io.in[0].data), static_cast<uint32_t*>(io.out[0].data), n,
          p);
    else
      transposeKernel<<<gridFor(n), kBlock, 0, stream>>>(
          static_cast<const uint8_t*>(io.in[0].data), static_cast<uint8_t*>(io.out[0].data), n, p);
    NL_CHECK_LAUNCH(transposeKernel);
  };
}

__global__ void sumToKernel(const float* x, float* y, SumPlan p) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < p.outputs;
       o += int64_t(gridDim.x) * blockDim.x) {
    const float* base = x + p.kept.source(o);
    double sum = 0;
    for (int64_t r = 0; r < p.terms; ++r) sum += base[p.reduced.source(r)];
    y[o] = float(sum);
  }
}

KernelFn sumTo(const KernelSig& s) {
  const SumPlan p = sumPlan(s.in[0].shape, s.out[0].shape);
  cudaStream_t stream = streamOf(s);
  return [p, stream](const KernelIO& io) {
    if (p.outputs == 0) return;
    sumToKernel<<<gridFor(p.outputs), kBlock, 0, stream>>>(io.in[0].f32(), io.out[0].f32(), p);
    NL_CHECK_LAUNCH(sumToKernel);
  };
}

struct EmbeddingDims {
  int64_t n, rows, dim, pad, first, total;
  EmbeddingDims(const KernelSig& s, size_t ids)
      : n(numel(s.in[ids].shape)),
        rows(s.attrs->i("num_embeddings")),
        dim(s.attrs->i("embedding_dim")),
        pad(s.attrs->i("padding_idx")),
        first(s.attrs->i("__first_row", 0)),
        total(s.attrs->i("__table_rows", rows)) {}
};

__global__ void embeddingKernel(const int32_t* ids, const float* table, float* y, EmbeddingDims d) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < d.n * d.dim;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / d.dim, j = e - i * d.dim;
    const int64_t row = fn::embeddingRow(ids[i], d.first, d.rows, d.total);
    y[e] = row >= 0 ? table[row * d.dim + j] : row == fn::kNoRow ? NAN : 0.f;
  }
}

// One thread per column walks every id in order, as the CPU's bands do.
__global__ void embeddingGradKernel(const float* dy, const int32_t* ids, float* dw,
                                    EmbeddingDims d) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < d.dim;
       j += int64_t(gridDim.x) * blockDim.x) {
    for (int64_t r = 0; r < d.rows; ++r) dw[r * d.dim + j] = 0.f;
    for (int64_t i = 0; i < d.n; ++i) {
      const int64_t row = fn::embeddingRow(ids[i], d.first, d.rows, d.total);
      if (row < 0 || ids[i] == d.pad) continue;
      dw[row * d.dim + j] += dy[i * d.dim + j];
    }
  }
}

KernelFn embedding(const KernelSig& s) {
  const EmbeddingDims d(s, 0);
  cudaStream_t st = streamOf(s);
  return [d, st](const KernelIO& io) {
    if (d.n == 0) return;
    embeddingKernel<<<gridFor(d.n * d.dim), kBlock, 0, st>>>(io.in[0].i32(), io.in[1].f32(),
                                                             io.out[0].f32(), d);
    NL_CHECK_LAUNCH(embeddingKernel);
  };
}

KernelFn embeddingGrad(const KernelSig& s) {
  const EmbeddingDims d(s, 1);
  cudaStream_t st = streamOf(s);
  return [d, st](const KernelIO& io) {
    embeddingGradKernel<<<gridFor(d.dim), kBlock, 0, st>>>(io.in[0].f32(), io.in[1].i32(),
                                                           io.out[0].f32(), d);
    NL_CHECK_LAUNCH(embeddingGradKernel);
  };
}

// y = x + rows[t], the rows a learned table or the sinusoids (table null).
__global__ void positionKernel(const float* x, const float* table, float* y, int64_t n,
                               int64_t tokens, int64_t channels, const int32_t* first) {
  const int64_t at = first ? *first : 0;  // generation: the step's position
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = e % channels, t = at + (e / channels) % tokens;
    y[e] = x[e] + (table ? table[t * channels + c] : fn::sinusoid(t, c, channels));
  }
}

__global__ void positionGradKernel(const float* dy, float* dw, int64_t batch, int64_t tokens,
                                   int64_t channels, int64_t rows) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < rows * channels;
       k += int64_t(gridDim.x) * blockDim.x) {
    if (k >= tokens * channels) {
      dw[k] = 0.f;
      continue;
    }
    double sum = 0;
    for (int64_t b = 0; b < batch; ++b) sum += dy[b * tokens * channels + k];
    dw[k] = float(sum);
  }
}

// `at`: the first position is the input after x (generation), read on the device.
KernelFn positionEmbedding(const KernelSig& s, bool at) {
  const Shape& x = s.in[0].shape;
  const int64_t n = numel(x), t = x[1], c = x[2];
  const size_t table = at ? 2 : 1;
  cudaStream_t st = streamOf(s);
  return [n, t, c, at, table, st](const KernelIO& io) {
    if (n == 0) return;
    positionKernel<<<gridFor(n), kBlock, 0, st>>>(
        io.in[0].f32(), io.nin > table ? io.in[table].f32() : nullptr, io.out[0].f32(), n, t, c,
        at ? io.in[1].i32() : nullptr);
    NL_CHECK_LAUNCH(positionKernel);
  };
}

KernelFn positionEmbeddingGrad(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  const int64_t b = x[0], t = x[1], c = x[2], rows = s.out[0].shape[0];
  cudaStream_t st = streamOf(s);
  return [b, t, c, rows, st](const KernelIO& io) {
    positionGradKernel<<<gridFor(rows * c), kBlock, 0, st>>>(io.in[0].f32(), io.out[0].f32(), b, t,
                                                             c, rows);
    NL_CHECK_LAUNCH(positionGradKernel);
  };
}

__global__ void rotaryKernel(const float* x, float* y, int64_t rows, int64_t tokens, fn::Rotary rot,
                             float sign, const int32_t* first) {
  const int64_t half = rot.half, at = first ? *first : 0;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < rows * half;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / half, i = e - r * half;
    const float* xr = x + r * 2 * half;
    float* yr = y + r * 2 * half;
    rot(xr[i], xr[i + half], at + r % tokens, i, sign, yr[i], yr[i + half]);
  }
}

KernelFn rotary(const KernelSig& s, float sign, bool at = false) {
  const Shape& x = s.in[0].shape;
  const int64_t rows = x[0] * x[1] * x[2], tokens = x[2];
  const fn::Rotary rot{float(s.attrs->f("base", 10000.0)), x[3] / 2};
  cudaStream_t st = streamOf(s);
  return [rows, tokens, rot, sign, at, st](const KernelIO& io) {
    if (rows * rot.half == 0) return;
    rotaryKernel<<<gridFor(rows * rot.half), kBlock, 0, st>>>(
        io.in[0].f32(), io.out[0].f32(), rows, tokens, rot, sign, at ? io.in[1].i32() : nullptr);
    NL_CHECK_LAUNCH(rotaryKernel);
  };
}

}  // namespace

void registerSequence(KernelRegistry& r) {
  auto add = [&](const char* op, const char* name, std::function<KernelFn(const KernelSig&)> make) {
    r.add(op, DeviceKind::Cuda, plainKernel(name, std::move(make)));
  };
  add("Transpose", "cuda.transpose", transpose);
  add("SumTo", "cuda.sum_to", sumTo);
  add("Embedding", "cuda.embedding", embedding);
  add("EmbeddingGrad", "cuda.embedding_grad", embeddingGrad);
  add("PositionEmbedding", "cuda.position_embedding",
      [](const KernelSig& s) { return positionEmbedding(s, false); });
  add("PositionEmbeddingAt", "cuda.position_embedding_at",
      [](const KernelSig& s) { return positionEmbedding(s, true); });
  add("PositionEmbeddingGrad", "cuda.position_embedding_grad", positionEmbeddingGrad);
  add("RotaryEmbedding", "cuda.rotary", [](const KernelSig& s) { return rotary(s, 1.f); });
  add("RotaryEmbeddingGrad", "cuda.rotary_grad",
      [](const KernelSig& s) { return rotary(s, -1.f); });
  add("RotaryEmbeddingAt", "cuda.rotary_at",
      [](const KernelSig& s) { return rotary(s, 1.f, true); });
}

}  // namespace netloom::cuda
