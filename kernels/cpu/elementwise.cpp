// Element-wise CPU kernels: activations and their gradients, Add, copies for shape
// ops, Dropout and Constant. Loops are written so the compiler vectorises them.
#include <cstring>

#include "kernels/core/functors.h"
#include "kernels/core/rng.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

template <class F>
KernelFn unary(F f) {
  return [f](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(io.out[0].numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
    });
  };
}

template <class F>
KernelFn binary(F f) {
  return [f](const KernelIO& io) {
    const float* a = io.in[0].f32();
    const float* b = io.in[1].f32();
    float* y = io.out[0].f32();
    parallelFor(io.out[0].numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i], b[i]);
    });
  };
}

KernelFn copy() {
  return [](const KernelIO& io) {
    if (io.out[0].data != io.in[0].data)
      std::memcpy(io.out[0].data, io.in[0].data, io.out[0].numel() * dtypeSize(io.out[0].dtype));
  };
}

}  // namespace

void registerElementwise(KernelRegistry& r) {
  // Element by element over same-shaped tensors, so any layout they all share; the
  // shape ops (Flatten, Reshape) and Constant see plain tensors only.
  auto add = [&](const char* op, std::function<KernelFn(const KernelSig&)> make) {
    KernelImpl k = kernel(std::string("cpu.") + op, std::move(make));
    std::string name = op;
    k.anyLayout = name != "Flatten" && name != "Reshape" && name != "Constant";
    r.add(op, DeviceKind::Cpu, std::move(k));
  };
  add("ReLU", [](const KernelSig&) { return unary(fn::Relu{}); });
  add("ReLUGrad", [](const KernelSig&) { return binary(fn::ReluGrad{}); });
  add("LeakyReLU",
      [](const KernelSig& s) { return unary(fn::LeakyRelu{float(s.attrs->f("negative_slope"))}); });
  add("LeakyReLUGrad", [](const KernelSig& s) {
    return binary(fn::LeakyReluGrad{float(s.attrs->f("negative_slope"))});
  });
  add("GELU", [](const KernelSig& s) {
    return s.attrs->s("approximate") == "tanh" ? unary(fn::GeluTanh{}) : unary(fn::Gelu{});
  });
  add("GELUGrad", [](const KernelSig& s) {
    return s.attrs->s("approximate") == "tanh" ? binary(fn::GeluTanhGrad{})
                                               : binary(fn::GeluGrad{});
  });
  add("Sigmoid", [](const KernelSig&) { return unary(fn::Sigmoid{}); });
  add("SigmoidGrad", [](const KernelSig&) { return binary(fn::SigmoidGrad{}); });
  add("Tanh", [](const KernelSig&) { return unary(fn::Tanh{}); });
  add("TanhGrad", [](const KernelSig&) { return binary(fn::TanhGrad{}); });
  add("Add", [](const KernelSig&) { return binary(fn::Add{}); });
  add("RoundHalf",
      [](const KernelSig& s) { return unary(fn::RoundHalf{s.attrs->s("format") == "fp16"}); });
  for (const char* op : {"Identity", "Flatten", "Reshape"})
    add(op, [](const KernelSig&) { return copy(); });

  add("Constant", [](const KernelSig& s) -> KernelFn {
    float v = float(s.attrs->f("value"));
    return [v](const KernelIO& io) {
      float* y = io.out[0].f32();
      for (int64_t i = 0, n = io.out[0].numel(); i < n; ++i) y[i] = v;
    };
  });

  // Each element's draw is keyed by its logical NCHW index, so a blocked tensor gets
  // the very mask the plain one would.
  add("Dropout", [](const KernelSig& s) -> KernelFn {
    float p = float(s.attrs->f("p"));
    uint64_t salt = uint64_t(s.attrs->i("__salt"));
    KernelFn passThrough = copy();
    bool blocked = s.in[0].layout == Layout::Blocked16;
    const Shape& x = s.in[0].shape;
    int64_t c = blocked ? x[1] : 0, area = blocked ? x[2] * x[3] : 0;
    return [p, salt, passThrough, blocked, c, area](const KernelIO& io) {
      if (!io.ctx->training || p == 0.f) return passThrough(io);
      fn::Dropout drop{hashCombine(io.ctx->seed, hashCombine(uint64_t(io.ctx->step), salt)), p,
                       1.f / (1.f - p)};
      const float* x = io.in[0].f32();
      float* y = io.out[0].f32();
      if (!blocked) {
        parallelFor(io.out[0].numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
          for (int64_t i = lo; i < hi; ++i) y[i] = drop(x[i], uint64_t(i));
        });
        return;
      }
      // Blocked, block by block of 16 channels at one position: element
      // ((n · C/16 + cb) · area + hw) · 16 + lane is channel cb · 16 + lane of sample n,
      // plain index (n · C + cb · 16 + lane) · area + hw. No division per element, so
      // the lanes vectorise.
      const int64_t blocks = c / 16, planes = io.out[0].numel() / (16 * area);
      parallelFor(
          planes, std::max<int64_t>(1, kParallelGrain / (16 * area)), [&](int64_t lo, int64_t hi) {
            for (int64_t nb = lo; nb < hi; ++nb) {
              const int64_t n = nb / blocks, cb = nb % blocks;
              const uint64_t first = uint64_t((n * c + cb * 16) * area);
              const float* xb = x + nb * area * 16;
              float* yb = y + nb * area * 16;
              for (int64_t hw = 0; hw < area; ++hw) {
#pragma omp simd
                for (int64_t lane = 0; lane < 16; ++lane)
                  yb[hw * 16 + lane] = drop(xb[hw * 16 + lane], first + uint64_t(lane * area + hw));
              }
            }
          });
    };
  });
}

}  // namespace netloom::cpu
