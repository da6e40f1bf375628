// Losses and metrics on CUDA. A team of threads reduces each row in double into the
// launch's workspace, and one block adds the rows in order (launchMean), so a loss is
// the same bits every launch. The per-element math and the NaN rules are the CPU's,
// from kernels/core/functors.h; the upstream gradient is read on the device, and
// nothing waits on the host.
#include <tuple>

#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

// Per row of logits: -log softmax(x)[label], with label smoothing ε:
// (1 - ε)·nll + ε·(lse - mean(x)). The softmax's log Σ exp runs in double as on the
// CPU. A label outside the classes makes the row NaN, poisoning the loss visibly.
template <int kThreads>
__global__ void crossEntropyKernel(const float* x, const int32_t* label, int64_t b, int64_t c,
                                   double eps, int32_t ignore, double* per, double* kept) {
  using T = Team<kThreads>;
  for (int64_t r = T::first(); r < b; r += T::stride()) {
    const float* xr = x + r * c;
    int32_t l = label[r];
    if (T::lane() == 0) kept[r] = l == ignore ? 0.0 : 1.0;
    if (l == ignore) {
      if (T::lane() == 0) per[r] = 0;
      continue;
    }
    if (l < 0 || l >= c) {
      if (T::lane() == 0) per[r] = NAN;
      continue;
    }
    float m = -INFINITY;
    for (int64_t j = T::lane(); j < c; j += kThreads) m = fmaxf(m, xr[j]);
    m = teamReduce<kThreads>(m, MaxOp{});
    double s = 0, total = 0;
    for (int64_t j = T::lane(); j < c; j += kThreads) {
      s += exp(double(xr[j] - m));
      total += xr[j];
    }
    s = teamReduce<kThreads>(s, SumOp{});
    double lse = double(m) + log(s), nll = lse - xr[l];
    if (eps > 0) {
      total = teamReduce<kThreads>(total, SumOp{});
      nll = (1 - eps) * nll + eps * (lse - total / double(c));
    }
    if (T::lane() == 0) per[r] = nll;
  }
}

// The rows whose label is not `ignore`, counted by one block (a count is exact in
// any order).
__global__ void countKeptKernel(const int32_t* label, int64_t b, int32_t ignore, double* counted) {
  double n = 0;
  for (int64_t r = threadIdx.x; r < b; r += kBlock) n += label[r] != ignore;
  n = teamReduce<kBlock>(n, SumOp{});
  if (threadIdx.x == 0) *counted = n;
}

// d loss / d logits per row: the softmax (its sum in float, as on the CPU) less the
// smoothed target, scaled by dloss / counted rows; zero on an ignored row.
template <int kThreads>
__global__ void crossEntropyGradKernel(const float* dloss, const float* x, const int32_t* label,
                                       int64_t b, int64_t c, float eps, int32_t ignore,
                                       const double* counted, float* dx) {
  using T = Team<kThreads>;
  fn::XentGrad grad = fn::XentGrad::make(eps, c, *dloss / float(*counted));
  for (int64_t r = T::first(); r < b; r += T::stride()) {
    const float* xr = x + r * c;
    float* dr = dx + r * c;
    int64_t l = label[r];
    if (l == ignore) {
      for (int64_t j = T::lane(); j < c; j += kThreads) dr[j] = 0.f;
      continue;
    }
    float m = -INFINITY;
    for (int64_t j = T::lane(); j < c; j += kThreads) m = fmaxf(m, xr[j]);
    m = teamReduce<kThreads>(m, MaxOp{});
    float sum = 0.f;
    for (int64_t j = T::lane(); j < c; j += kThreads) sum += (dr[j] = expf(xr[j] - m));
    sum = teamReduce<kThreads>(sum, SumOp{});
    float inv = 1.f / sum;
    for (int64_t j = T::lane(); j < c; j += kThreads) dr[j] = grad(dr[j], inv, j == l);
  }
}

// 1 per row whose label ranks among the top k, else 0 (a label outside the classes
// is a miss).
template <int kThreads>
__global__ void topKKernel(const float* x, const int32_t* label, int64_t b, int64_t c, int64_t k,
                           double* hit) {
  using T = Team<kThreads>;
  for (int64_t r = T::first(); r < b; r += T::stride()) {
    const float* xr = x + r * c;
    int32_t l = label[r];
    if (l < 0 || l >= c) {
      if (T::lane() == 0) hit[r] = 0;
      continue;
    }
    fn::RanksAbove above{xr[l], l};
    long long better = 0;
    for (int64_t j = T::lane(); j < c; j += kThreads) better += above(xr[j], j);
    better = teamReduce<kThreads>(better, SumOp{});
    if (T::lane() == 0) hit[r] = better < k ? 1.0 : 0.0;
  }
}

// Element i of a loss's per-element term over two equally long tensors, viewed as
// rows of `per` elements.
template <class F>
struct PairTerm {
  F f;
  const float *a, *b;
  int64_t per;
  __device__ double operator()(int64_t r, int64_t j) const {
    int64_t i = r * per + j;
    return f(a[i], b[i]);
  }
};

// A loss's gradient, from the upstream scalar read on the device: make(dloss) gives
// the element functor.
template <class Make>
__global__ void lossGradKernel(Make make, const float* dloss, const float* a, const float* b,
                               float* d, int64_t n) {
  auto f = make(*dloss);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    d[i] = f(a[i], b[i]);
}

struct MakeMseGrad {
  float n;
  __device__ fn::MseGrad operator()(float dloss) const { return {2.f * dloss / n}; }
};
struct MakeBceGrad {
  float n;
  bool logits, wrtTarget;
  __device__ fn::BceGrad operator()(float dloss) const { return {dloss / n, logits, wrtTarget}; }
};

// Inputs (dloss, x, target), output d: one thread per element.
template <class Make>
KernelFn lossGrad(const KernelSig& s, Make make) {
  cudaStream_t st = streamOf(s);
  return [make, st](const KernelIO& io) {
    int64_t n = io.out[0].numel();
    if (n == 0) return;
    lossGradKernel<<<gridFor(n), kBlock, 0, st>>>(make, io.in[0].f32(), io.in[1].f32(),
                                                  io.in[2].f32(), io.out[0].f32(), n);
    NL_CHECK_LAUNCH(lossGradKernel);
  };
}

// Rows as the CPU's losses split them: the first dimension (at least one row).
struct LossRows {
  int64_t n, rows, per;
  explicit LossRows(const Shape& x)
      : n(numel(x)), rows(std::max<int64_t>(1, x.empty() ? 1 : x[0])), per(n / rows) {}
};

// Mean over all elements of f(prediction, target): per-row sums, then their mean.
template <class F>
KernelFn elementLoss(const KernelSig& s, F f) {
  LossRows d(s.in[0].shape);
  cudaStream_t st = streamOf(s);
  return [d, f, st](const KernelIO& io) {
    auto* per = static_cast<double*>(io.workspace);
    sumRows(d.rows, d.per, PairTerm<F>{f, io.in[0].f32(), io.in[1].f32(), d.per}, StoreDouble{per},
            st);
    launchMean(per, d.rows, double(d.n), io.out[0].f32(), st);
  };
}

// Rows of logits, classes on the last axis.
struct XentDims {
  int64_t rows, classes;
  int32_t ignore;
  XentDims(const KernelSig& s, size_t logits)
      : rows(numel(s.in[logits].shape) / s.in[logits].shape.back()),
        classes(s.in[logits].shape.back()),
        ignore(int32_t(s.attrs->i("ignore_index", -100))) {}
};

// Workspace: each row's loss, then whether it counted.
KernelFn crossEntropy(const KernelSig& s) {
  const XentDims d(s, 0);
  double eps = s.attrs->f("label_smoothing");
  cudaStream_t st = streamOf(s);
  return [d, eps, st](const KernelIO& io) {
    auto* per = static_cast<double*>(io.workspace);
    double* kept = per + std::max<int64_t>(1, d.rows);
    if (d.rows > 0)
      NL_LAUNCH_ROWS(crossEntropyKernel, d.rows, d.classes, st, io.in[0].f32(), io.in[1].i32(),
                     d.rows, d.classes, eps, d.ignore, per, kept);
    launchMean(per, d.rows, double(d.rows), io.out[0].f32(), st, kept);
  };
}

// Workspace: the count of rows whose label counts.
KernelFn crossEntropyGrad(const KernelSig& s) {
  const XentDims d(s, 1);
  float eps = float(s.attrs->f("label_smoothing"));
  cudaStream_t st = streamOf(s);
  return [d, eps, st](const KernelIO& io) {
    if (d.rows == 0) return;
    auto* counted = static_cast<double*>(io.workspace);
    countKeptKernel<<<1, kBlock, 0, st>>>(io.in[2].i32(), d.rows, d.ignore, counted);
    NL_CHECK_LAUNCH(countKeptKernel);
    NL_LAUNCH_ROWS(crossEntropyGradKernel, d.rows, d.classes, st, io.in[0].f32(), io.in[1].f32(),
                   io.in[2].i32(), d.rows, d.classes, eps, d.ignore, counted, io.out[0].f32());
  };
}

KernelFn topK(const KernelSig& s, int64_t k) {
  const int64_t c = s.in[0].shape.back(), b = numel(s.in[0].shape) / std::max<int64_t>(1, c);
  cudaStream_t st = streamOf(s);
  return [b, c, k, st](const KernelIO& io) {
    auto* hit = static_cast<double*>(io.workspace);
    if (b > 0) NL_LAUNCH_ROWS(topKKernel, b, c, st, io.in[0].f32(), io.in[1].i32(), b, c, k, hit);
    launchMean(hit, b, double(b), io.out[0].f32(), st);
  };
}

KernelFn mse(const KernelSig& s) {
  return elementLoss(s, fn::SquaredError{});
}
KernelFn mseGrad(const KernelSig& s) {
  return lossGrad(s, MakeMseGrad{float(numel(s.in[1].shape))});
}
KernelFn bce(const KernelSig& s) {
  return elementLoss(s, fn::BceTerm{s.attrs->b("from_logits")});
}
KernelFn bceGrad(const KernelSig& s) {
  return lossGrad(s, MakeBceGrad{float(numel(s.in[1].shape)), s.attrs->b("from_logits"),
                                 s.attrs->b("wrt_target")});
}
KernelFn accuracy(const KernelSig& s) {
  return topK(s, 1);
}
KernelFn topKAccuracy(const KernelSig& s) {
  return topK(s, s.attrs->i("k"));
}

// One double per row of the first input (at least one): the per-row values.
int64_t perRowBytes(const KernelSig& s) {
  return std::max<int64_t>(1, LossRows(s.in[0].shape).rows) * int64_t(sizeof(double));
}

}  // namespace

void registerLosses(KernelRegistry& r) {
  auto add = [&](const char* op, const char* name, KernelFn (*make)(const KernelSig&),
                 bool perRow) {
    KernelImpl k = plainKernel(name, make);
    if (perRow) k.workspace = perRowBytes;
    r.add(op, DeviceKind::Cuda, std::move(k));
  };
  KernelImpl xent = plainKernel("cuda.softmax_cross_entropy", crossEntropy);
  xent.workspace = [](const KernelSig& s) {
    return 2 * std::max<int64_t>(1, XentDims(s, 0).rows) * int64_t(sizeof(double));
  };
  r.add("SoftmaxCrossEntropy", DeviceKind::Cuda, std::move(xent));
  KernelImpl xentGrad = plainKernel("cuda.softmax_cross_entropy_grad", crossEntropyGrad);
  xentGrad.workspace = [](const KernelSig&) { return int64_t(sizeof(double)); };
  r.add("SoftmaxCrossEntropyGrad", DeviceKind::Cuda, std::move(xentGrad));
  add("MSELoss", "cuda.mse", mse, true);
  add("MSELossGrad", "cuda.mse_grad", mseGrad, false);
  add("BCELoss", "cuda.bce", bce, true);
  add("BCELossGrad", "cuda.bce_grad", bceGrad, false);
  // One double per position scored (batch × …), each row of classes.
  for (auto [op, name, make] : {std::tuple{"Accuracy", "cuda.accuracy", accuracy},
                                std::tuple{"TopKAccuracy", "cuda.top_k_accuracy", topKAccuracy}}) {
    KernelImpl k = plainKernel(name, make);
    k.workspace = [](const KernelSig& s) {
      return std::max<int64_t>(1, numel(s.in[0].shape) / s.in[0].shape.back()) *
             int64_t(sizeof(double));
    };
    r.add(op, DeviceKind::Cuda, std::move(k));
  }
}

}  // namespace netloom::cuda
