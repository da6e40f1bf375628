// BatchNorm on the CPU (LayerNorm is in layer_norm.cpp), on kernels of our own in both
// activation layouts: they accumulate its statistics and gradient sums in double, in
// an order fixed by the shapes alone, so results are independent of the thread count
// and within float rounding of a float64 computation. oneDNN 2.6's batch
// normalisation sums in float (batch means off by ~1e-4 relative at 32 channels ×
// batch 128, where PyTorch is at 1e-6) and is not used. The running statistics are
// updated here: oneDNN has no notion of them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/core/communicator.h"
#include "kernels/core/functors.h"
#include "kernels/cpu/batch_norm_math.h"

namespace netloom::cpu {
namespace {

// Statistics in one pass over x, as sums of x - k with k the channel's first
// element: in double and shifted, E[(x-k)²] - E[x-k]² keeps its precision.
KernelFn batchNormReference(const KernelSig& s) {
  BnDims d = bnDims(s.in[0].shape);
  BnPorts ports(s.in.size());
  double eps = s.attrs->f("eps", 1e-5), momentum = s.attrs->f("momentum", 0.1);
  auto scratch = std::make_shared<BnScratch>(d.c);
  const bool relu = fusedRelu(s);
  return [d, ports, eps, momentum, scratch, relu](const KernelIO& io) {
    bool training = !io.ctx || io.ctx->training;
    // Named pointers, not a structured binding: lambdas below capture them, which
    // clang before 16 refuses for bindings.
    const BnTensors t(io, ports);
    const float *x = t.x, *w = t.w, *b = t.b;
    float *rm = t.rm, *rv = t.rv, *y = t.y, *bm = t.bm, *bv = t.bv;
    double *s1 = scratch->a.data(), *s2 = scratch->b.data();
    float *scale = scratch->p.data(), *shift = scratch->q.data(), *k = scratch->r.data();
    parallelFor(d.c, grainFor(d.count()), [&](int64_t lo, int64_t hi) {
      if (training) {
        for (int64_t c = lo; c < hi; ++c) k[c] = x[c * d.s];
        channelSums(d, lo, hi, s1, s2, [&](int64_t i, int64_t c) {
          double v = double(x[i]) - k[c];
          return std::pair{v, v * v};
        });
        finishStatistics(lo, hi, s1, s2, k, double(d.count()), bm, bv);
      } else {
        std::copy(rm + lo, rm + hi, bm + lo);
        std::copy(rv + lo, rv + hi, bv + lo);
      }
      affineOf(lo, hi, bv, w, b, eps, scale, shift);
      forEachElement(d, lo, hi, [&](int64_t i, int64_t c) {
        y[i] = outputOf((x[i] - bm[c]) * scale[c] + shift[c], relu);
      });
    });
    if (training) updateRunning(rm, rv, bm, bv, d, momentum);
  };
}

// BatchNormGrad inputs: dy, x, batch_mean, batch_var, [weight]; training formulas:
// dx = w·invstd·(dy - mean(dy) - (x - mean)·invstd²·mean(dy·(x - mean))).
KernelFn batchNormGradReference(const KernelSig& s) {
  BnDims d = bnDims(s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  auto scratch = std::make_shared<BnScratch>(d.c);
  return [d, hasWeight, eps, scratch](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32();
    const float *mean = io.in[2].f32(), *var = io.in[3].f32();
    const float* w = hasWeight ? io.in[4].f32() : nullptr;
    float *dx = io.out[0].f32(), *dw = io.out[1].f32(), *db = io.out[2].f32();
    double *sdy = scratch->a.data(), *sdyx = scratch->b.data();  // Σ dy, Σ dy·(x - mean)
    GradTerms t{scratch->p.data(), scratch->q.data(), scratch->r.data()};
    parallelFor(d.c, grainFor(2 * d.count()), [&](int64_t lo, int64_t hi) {
      channelSums(d, lo, hi, sdy, sdyx, [&](int64_t i, int64_t c) {
        return std::pair{double(dy[i]), double(dy[i]) * (double(x[i]) - mean[c])};
      });
      finishGradient(lo, hi, sdy, sdyx, var, w, eps, double(d.count()), dw, db, t);
      inputGradient(d, lo, hi, dy, x, mean, t, dx);
    });
  };
}

// SyncBatchNorm: the statistics of the whole global batch, from each rank's sums
// added across the ranks (plain layout). The sums are shifted by the running mean,
// which every rank holds alike, so they add up. Backward, the input's gradient takes
// the global sums; the weight's and bias's take this rank's, as the gradient buckets
// add them across the ranks afterwards.
bool syncing(const KernelSig& s) {
  return s.attrs->b("sync") && s.comm && s.comm->size() > 1;
}

std::string declineUnlessSyncing(const KernelSig& s) {
  if (!syncing(s)) return "for a BatchNorm synchronised across ranks";
  if (std::string e = declineUnlessFloat(s); !e.empty()) return e;
  for (const TensorDesc& t : s.in)
    if (t.layout != Layout::Plain) return "takes plain layouts only";
  return {};
}

KernelFn syncBatchNorm(const KernelSig& s) {
  BnDims d = bnDims(s.in[0].shape);
  BnPorts ports(s.in.size());
  double eps = s.attrs->f("eps", 1e-5), momentum = s.attrs->f("momentum", 0.1);
  Communicator* comm = s.comm;
  KernelFn evaluation = batchNormReference(s);
  auto scratch = std::make_shared<BnScratch>(d.c);
  auto sums = std::make_shared<std::vector<double>>(size_t(2 * d.c + 1));
  const bool relu = fusedRelu(s);
  return [d, ports, eps, momentum, comm, evaluation, scratch, sums, relu](const KernelIO& io) {
    if (io.ctx && !io.ctx->training) return evaluation(io);
    const BnTensors t(io, ports);
    const float *x = t.x, *w = t.w, *b = t.b, *rm = t.rm;
    float *y = t.y, *bm = t.bm, *bv = t.bv;
    double *s1 = scratch->a.data(), *s2 = scratch->b.data();
    float *scale = scratch->p.data(), *shift = scratch->q.data();
    parallelFor(d.c, grainFor(d.count()), [&](int64_t lo, int64_t hi) {
      channelSums(d, lo, hi, s1, s2, [&](int64_t i, int64_t c) {
        double v = double(x[i]) - rm[c];
        return std::pair{v, v * v};
      });
    });
    std::vector<double>& all = *sums;
    std::copy(s1, s1 + d.c, all.begin());
    std::copy(s2, s2 + d.c, all.begin() + d.c);
    all[size_t(2 * d.c)] = double(d.count());
    comm->allreduce(all.data(), int64_t(all.size()));
    const double count = all[size_t(2 * d.c)];
    finishStatistics(0, d.c, all.data(), all.data() + d.c, rm, count, bm, bv);
    affineOf(0, d.c, bv, w, b, eps, scale, shift);
    parallelFor(d.c, grainFor(d.count()), [&](int64_t lo, int64_t hi) {
      forEachElement(d, lo, hi, [&](int64_t i, int64_t c) {
        y[i] = outputOf((x[i] - bm[c]) * scale[c] + shift[c], relu);
      });
    });
    BnDims global = d;  // the running variance is unbiased over the global count
    global.n = int64_t(count) / d.s;
    updateRunning(t.rm, t.rv, bm, bv, global, momentum);
  };
}

KernelFn syncBatchNormGrad(const KernelSig& s) {
  BnDims d = bnDims(s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  Communicator* comm = s.comm;
  auto scratch = std::make_shared<BnScratch>(d.c);
  auto sums = std::make_shared<std::vector<double>>(size_t(2 * d.c + 1));
  return [d, hasWeight, eps, comm, scratch, sums](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32();
    const float *mean = io.in[2].f32(), *var = io.in[3].f32();
    const float* w = hasWeight ? io.in[4].f32() : nullptr;
    float *dx = io.out[0].f32(), *dw = io.out[1].f32(), *db = io.out[2].f32();
    double *sdy = scratch->a.data(), *sdyx = scratch->b.data();
    GradTerms t{scratch->p.data(), scratch->q.data(), scratch->r.data()};
    parallelFor(d.c, grainFor(2 * d.count()), [&](int64_t lo, int64_t hi) {
      channelSums(d, lo, hi, sdy, sdyx, [&](int64_t i, int64_t c) {
        return std::pair{double(dy[i]), double(dy[i]) * (double(x[i]) - mean[c])};
      });
    });
    std::vector<double>& all = *sums;
    std::copy(sdy, sdy + d.c, all.begin());
    std::copy(sdyx, sdyx + d.c, all.begin() + d.c);
    all[size_t(2 * d.c)] = double(d.count());
    comm->allreduce(all.data(), int64_t(all.size()));
    // This rank's sums give the weight's and bias's gradients; the global ones the
    // input's (its terms are overwritten by the second call).
    finishGradient(0, d.c, sdy, sdyx, var, w, eps, double(d.count()), dw, db, t);
    float* unused = scratch->unused.data();  // the second call's dw and db
    finishGradient(0, d.c, all.data(), all.data() + d.c, var, w, eps, all[size_t(2 * d.c)], unused,
                   unused + d.c, t);
    parallelFor(d.c, grainFor(2 * d.count()),
                [&](int64_t lo, int64_t hi) { inputGradient(d, lo, hi, dy, x, mean, t, dx); });
  };
}

// The weight of a FoldBatchNorm in PyTorch's layout.
TensorDesc plainWeight(const KernelSig& s) {
  TensorDesc plain = s.in[0];
  plain.layout = Layout::Plain;
  plain.format.clear();
  return plain;
}

// FoldBatchNorm's inputs: weight, running_mean, running_var, [bias], [γ, β]; outputs
// the folded weight (plain) and bias (fn::FoldBatchNorm, BatchNorm's own scale). A
// packed weight is converted to PyTorch's layout first, by a reorder prepared here.
KernelFn foldBatchNorm(const KernelSig& s) {
  const TensorDesc weight = s.in[0];
  KernelFn unpack =
      weight.layout == Layout::Plain ? nullptr : layoutConverter(weight, plainWeight(s));
  const int64_t c = weight.shape[0], row = numel(weight.shape) / std::max<int64_t>(1, c);
  const bool bias = s.attrs->b("bias"), affine = s.attrs->b("affine");
  const double eps = s.attrs->f("eps", 1e-5);
  const int at = bias ? 4 : 3;
  return [=](const KernelIO& io) {
    const float *mean = io.in[1].f32(), *var = io.in[2].f32();
    const float* b = bias ? io.in[3].f32() : nullptr;
    const float* gamma = affine ? io.in[at].f32() : nullptr;
    const float* beta = affine ? io.in[at + 1].f32() : nullptr;
    float *w = io.out[0].f32(), *bOut = io.out[1].f32();
    if (unpack)
      unpack(KernelIO{io.in, io.out, 1, 1, io.ctx});
    else
      std::copy(io.in[0].f32(), io.in[0].f32() + c * row, w);
    const fn::FoldBatchNorm fold{eps};
    for (int64_t ch = 0; ch < c; ++ch) {
      const float scale = fold.scale(var[ch], gamma ? gamma[ch] : 1.f);
      float* wr = w + ch * row;
      for (int64_t k = 0; k < row; ++k) wr[k] *= scale;
      bOut[ch] = fold.bias(b ? b[ch] : 0.f, mean[ch], scale, beta ? beta[ch] : 0.f);
    }
  };
}

}  // namespace

void registerNormalization(KernelRegistry& r) {
  static constexpr const char* kSyncPlain = "a synchronised BatchNorm takes plain layouts";
  auto cpu = DeviceKind::Cpu;
  r.add("BatchNorm", cpu, {"cpu.sync_batch_norm", declineUnlessSyncing, syncBatchNorm, true});
  KernelImpl blockedForward{"cpu.batch_norm_blocked",
                            [](const KernelSig& s) {
                              return s.attrs->b("sync") ? std::string(kSyncPlain)
                                                        : declineUnlessBlocked(s, {0});
                            },
                            batchNormBlocked, true};
  blockedForward.halfTensors = true;
  r.add("BatchNorm", cpu, std::move(blockedForward));
  r.add("BatchNorm", cpu, kernel("reference.batch_norm", batchNormReference));
  r.add("BatchNormGrad", cpu,
        {"cpu.sync_batch_norm_grad", declineUnlessSyncing, syncBatchNormGrad, true});
  KernelImpl blockedBackward{
      "cpu.batch_norm_grad_blocked",
      [](const KernelSig& s) {
        return s.attrs->b("sync") ? std::string(kSyncPlain) : declineUnlessBlocked(s, {0, 1});
      },
      batchNormGradBlocked, true};
  blockedBackward.halfTensors = true;
  r.add("BatchNormGrad", cpu, std::move(blockedBackward));
  r.add("BatchNormGrad", cpu, kernel("reference.batch_norm_grad", batchNormGradReference));
  KernelImpl fold = kernel("cpu.fold_batch_norm", foldBatchNorm);
  fold.anyLayout = true;  // the weight may be stored packed
  fold.decline = [](const KernelSig& s) -> std::string {
    if (std::string e = declineUnlessFloat(s); !e.empty()) return e;
    for (size_t k = 1; k < s.in.size(); ++k)
      if (s.in[k].layout != Layout::Plain) return "per-channel inputs are plain";
    if (s.out[0].layout != Layout::Plain) return "writes the folded weight plain";
    if (s.in[0].layout != Layout::Plain && !layoutConverter(s.in[0], plainWeight(s)))
      return "no reorder reads the weight's layout '" + layoutName(s.in[0]) + "'";
    return {};
  };
  r.add("FoldBatchNorm", cpu, std::move(fold));
}

void registerPoolNorm(KernelRegistry& r) {
  registerPooling(r);
  registerNormalization(r);
  registerLayerNorm(r);
}

}  // namespace netloom::cpu
