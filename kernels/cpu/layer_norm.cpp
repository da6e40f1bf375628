// LayerNorm on the CPU: oneDNN's primitives first, plain references last; the
// references own each row per thread and reduce the parameter gradients per column
// band.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/core/functors.h"
#include "kernels/cpu/pool_norm.h"

namespace netloom::cpu {
namespace {

using dnnl::memory;
using Flags = dnnl::normalization_flags;
using Impls = std::vector<std::string>;

// x viewed as rows × cols, cols the normalised trailing shape.
struct LnDims {
  int64_t rows = 1, cols = 1;
};

LnDims lnDims(const KernelSig& s, const Shape& x) {
  LnDims d;
  int64_t k = s.attrs->i("normalized_dims", 1);
  for (size_t i = 0; i < x.size(); ++i)
    (int64_t(i) < int64_t(x.size()) - k ? d.rows : d.cols) *= x[i];
  return d;
}

KernelFn layerNormReference(const KernelSig& s) {
  LnDims d = lnDims(s, s.in[0].shape);
  bool affine = s.in.size() == 3;
  double eps = s.attrs->f("eps", 1e-5);
  return [d, affine, eps](const KernelIO& io) {
    const float* x = io.in[0].f32();
    const float* w = affine ? io.in[1].f32() : nullptr;
    const float* b = affine ? io.in[2].f32() : nullptr;
    float *y = io.out[0].f32(), *mean = io.out[1].f32(), *var = io.out[2].f32();
    parallelFor(d.rows, grainFor(d.cols), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float* xr = x + r * d.cols;
        float* yr = y + r * d.cols;
        double sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < d.cols; ++j) sum += xr[j];
        double mu = sum / double(d.cols);
#pragma omp simd reduction(+ : sq)
        for (int64_t j = 0; j < d.cols; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
        double v = sq / double(d.cols);
        mean[r] = float(mu), var[r] = float(v);
        fn::LayerNormApply norm{float(mu), float(1.0 / std::sqrt(v + eps))};
        if (affine) {
#pragma omp simd
          for (int64_t j = 0; j < d.cols; ++j) yr[j] = norm(xr[j], w[j], b[j]);
        } else {
#pragma omp simd
          for (int64_t j = 0; j < d.cols; ++j) yr[j] = norm(xr[j]);
        }
      }
    });
  };
}

// LayerNormGrad inputs: dy, x, mean, var, [weight]. dx per row; dweight and dbias
// per column band, each band walking the rows in order into double sums.
KernelFn layerNormGradReference(const KernelSig& s) {
  LnDims d = lnDims(s, s.in[1].shape);
  bool hasWeight = s.in.size() == 5;
  double eps = s.attrs->f("eps", 1e-5);
  auto sums = std::make_shared<std::vector<double>>(2 * d.cols);
  return [d, hasWeight, eps, sums](const KernelIO& io) {
    const float *dy = io.in[0].f32(), *x = io.in[1].f32();
    const float *mean = io.in[2].f32(), *var = io.in[3].f32();
    const float* w = hasWeight ? io.in[4].f32() : nullptr;
    float *dx = io.out[0].f32(), *dw = io.out[1].f32(), *db = io.out[2].f32();
    auto invstd = [&](int64_t r) { return float(1.0 / std::sqrt(double(var[r]) + eps)); };
    parallelFor(d.rows, grainFor(3 * d.cols), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
        float* dxr = dx + r * d.cols;
        float m = mean[r], is = invstd(r);
        double sg = 0, sgx = 0;  // Σ g and Σ g·x̂, g = dy·w
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < d.cols; ++j) {
          float g = dyr[j] * (w ? w[j] : 1.f);
          sg += g, sgx += g * (xr[j] - m) * is;
        }
        fn::LayerNormGradApply grad{m, is, float(sg / double(d.cols)), float(sgx / double(d.cols))};
#pragma omp simd
        for (int64_t j = 0; j < d.cols; ++j) dxr[j] = grad(dyr[j], xr[j], w ? w[j] : 1.f);
      }
    });
    double *sw = sums->data(), *sb = sw + d.cols;
    parallelFor(d.cols, d.rows * d.cols < kParallelGrain ? d.cols + 1 : 16,
                [&](int64_t lo, int64_t hi) {
                  std::fill(sw + lo, sw + hi, 0.0);
                  std::fill(sb + lo, sb + hi, 0.0);
                  for (int64_t r = 0; r < d.rows; ++r) {
                    const float *dyr = dy + r * d.cols, *xr = x + r * d.cols;
                    float m = mean[r], is = invstd(r);
#pragma omp simd
                    for (int64_t j = lo; j < hi; ++j) {
                      sw[j] += dyr[j] * (xr[j] - m) * is;
                      sb[j] += dyr[j];
                    }
                  }
                  for (int64_t j = lo; j < hi; ++j) dw[j] = float(sw[j]), db[j] = float(sb[j]);
                });
  };
}

// oneDNN -------------------------------------------------------------------------

memory::desc vec(int64_t n) {
  return memory::desc({n}, memory::data_type::f32, memory::format_tag::a);
}

Flags affineFlags(bool affine) {
  return affine ? Flags::use_scale | Flags::use_shift : Flags::none;
}

// LayerNorm's backward launch: inputs (dy, x, mean, var[, weight]), outputs (dx,
// dweight, dbias). oneDNN 2.6 insists on a shift input in backward too,
// though it never reads it, and on a scale when there is no weight.
KernelFn normBackwardLaunch(std::shared_ptr<DnnlCall> call, bool hasWeight, int64_t channels) {
  auto ones = std::make_shared<std::vector<float>>(channels, 1.f);
  call->set(DNNL_ARG_SHIFT, ones->data());
  if (!hasWeight) call->set(DNNL_ARG_SCALE, ones->data());
  return [call, hasWeight, ones](const KernelIO& io) {
    call->set(DNNL_ARG_DIFF_DST, io.in[0].data);
    call->set(DNNL_ARG_SRC, io.in[1].data);
    call->set(DNNL_ARG_MEAN, io.in[2].data);
    call->set(DNNL_ARG_VARIANCE, io.in[3].data);
    if (hasWeight) call->set(DNNL_ARG_SCALE, io.in[4].data);
    call->set(DNNL_ARG_DIFF_SRC, io.out[0].data);
    call->set(DNNL_ARG_DIFF_SCALE, io.out[1].data);
    call->set(DNNL_ARG_DIFF_SHIFT, io.out[2].data);
    call->run();
  };
}

// LayerNorm as rows × cols.
struct DnnlLn {
  LnDims d;
  memory::desc data, stat, param;
  float eps;

  DnnlLn(const KernelSig& s, int xIndex)
      : d(lnDims(s, s.in[xIndex].shape)),
        data({d.rows, d.cols}, memory::data_type::f32, memory::format_tag::ab),
        stat(vec(d.rows)),
        param(vec(d.cols)),
        eps(float(s.attrs->f("eps", 1e-5))) {}

  dnnl::layer_normalization_forward::primitive_desc forward(Flags flags) const {
    dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_training, data, stat, eps,
                                                 flags);
    return {desc, userScratchpad(), dnnlEngine()};
  }
  // Always with scale and shift: the op's dweight and dbias outputs exist even
  // without affine, and a scale of ones costs nothing.
  dnnl::layer_normalization_backward::primitive_desc backward() const {
    Flags f = Flags::use_scale | Flags::use_shift;
    dnnl::layer_normalization_backward::desc desc(dnnl::prop_kind::backward, data, data, stat, eps,
                                                  f);
    return {desc, userScratchpad(), dnnlEngine(), forward(f)};
  }
};

KernelFn layerNormOneDnn(const KernelSig& s) {
  DnnlLn ln(s, 0);
  bool affine = s.in.size() == 3;
  auto call = std::make_shared<DnnlCall>(
      DnnlCall::make<dnnl::layer_normalization_forward>(ln.forward(affineFlags(affine))));
  call->arg(DNNL_ARG_SRC, ln.data);
  call->arg(DNNL_ARG_DST, ln.data);
  call->arg(DNNL_ARG_MEAN, ln.stat);
  call->arg(DNNL_ARG_VARIANCE, ln.stat);
  if (affine) call->arg(DNNL_ARG_SCALE, ln.param), call->arg(DNNL_ARG_SHIFT, ln.param);
  return [call, affine](const KernelIO& io) {
    call->set(DNNL_ARG_SRC, io.in[0].data);
    call->set(DNNL_ARG_DST, io.out[0].data);
    call->set(DNNL_ARG_MEAN, io.out[1].data);
    call->set(DNNL_ARG_VARIANCE, io.out[2].data);
    if (affine) call->set(DNNL_ARG_SCALE, io.in[1].data), call->set(DNNL_ARG_SHIFT, io.in[2].data);
    call->run();
  };
}

KernelFn layerNormGradOneDnn(const KernelSig& s) {
  DnnlLn ln(s, 1);
  bool hasWeight = s.in.size() == 5;
  auto call =
      std::make_shared<DnnlCall>(DnnlCall::make<dnnl::layer_normalization_backward>(ln.backward()));
  for (int a : {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC}) call->arg(a, ln.data);
  for (int a : {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE}) call->arg(a, ln.stat);
  for (int a : {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT})
    call->arg(a, ln.param);
  return normBackwardLaunch(call, hasWeight, ln.d.cols);
}

// Declines when the signature is not float, or as dnnlDecline says.
template <class Build>
std::function<std::string(const KernelSig&)> declineUnless(Build build) {
  return [build](const KernelSig& s) {
    if (std::string e = declineUnlessFloat(s); !e.empty()) return e;
    return dnnlDecline([&] { return build(s); });
  };
}

}  // namespace

void registerLayerNorm(KernelRegistry& r) {
  auto cpu = DeviceKind::Cpu;
  r.add("LayerNorm", cpu,
        {"onednn.layer_normalization", declineUnless([](const KernelSig& s) -> Impls {
           return {DnnlLn(s, 0).forward(affineFlags(s.in.size() == 3)).impl_info_str()};
         }),
         layerNormOneDnn});
  r.add("LayerNorm", cpu, kernel("reference.layer_norm", layerNormReference));
  r.add("LayerNormGrad", cpu,
        {"onednn.layer_normalization_backward", declineUnless([](const KernelSig& s) -> Impls {
           return {DnnlLn(s, 1).backward().impl_info_str()};
         }),
         layerNormGradOneDnn});
  r.add("LayerNormGrad", cpu, kernel("reference.layer_norm_grad", layerNormGradReference));
}

}  // namespace netloom::cpu
