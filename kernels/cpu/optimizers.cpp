// Optimizer updates on the CPU, in place, following PyTorch's formulas exactly so a
// run can be compared step by step with torch.optim.
#include <algorithm>
#include <vector>

#include "kernels/core/functors.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

// The updates are element-wise, so they run on any layout that parameter, gradient
// and state share.
KernelImpl update(std::string name, std::function<KernelFn(const KernelSig&)> make) {
  KernelImpl k = kernel(std::move(name), std::move(make));
  k.anyLayout = true;
  k.decline = [](const KernelSig& s) -> std::string {
    for (const TensorDesc& d : s.in)
      if (!d.sameLayout(s.in[0])) return "parameter, gradient and state differ in layout";
    return {};
  };
  return k;
}

}  // namespace

void registerOptimizers(KernelRegistry& r) {
  // Σ x² over fixed blocks summed in order, so the result does not depend on the
  // thread count; any layout, as the sum does not depend on where values lie.
  KernelImpl squares = kernel("cpu.sum_squares", [](const KernelSig&) -> KernelFn {
    return [](const KernelIO& io) {
      const float* x = io.in[0].f32();
      int64_t n = io.in[0].numel();
      constexpr int64_t kBlock = 4096;
      int64_t blocks = (n + kBlock - 1) / kBlock;
      std::vector<double> partial(size_t(std::max<int64_t>(blocks, 1)), 0.0);
      parallelFor(blocks, 16, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          float acc = 0.f;
          int64_t end = std::min(n, (b + 1) * kBlock);
#pragma omp simd reduction(+ : acc)
          for (int64_t i = b * kBlock; i < end; ++i) acc += x[i] * x[i];
          partial[size_t(b)] = acc;
        }
      });
      double total = 0;
      for (double p : partial) total += p;
      io.out[0].f32()[0] = float(total);
    };
  });
  squares.anyLayout = true;
  r.add("SumSquares", DeviceKind::Cpu, std::move(squares));

  r.add("SgdUpdate", DeviceKind::Cpu, update("cpu.sgd", [](const KernelSig& s) -> KernelFn {
          float mu = float(s.attrs->f("momentum")), wd = float(s.attrs->f("weight_decay"));
          bool nesterov = s.attrs->b("nesterov");
          return [mu, wd, nesterov](const KernelIO& io) {
            if (io.guard && *io.guard == 0.f) return;
            float* p = io.in[0].f32();
            const float* g = io.in[1].f32();
            float* buf = io.nin > 2 ? io.in[2].f32() : nullptr;
            fn::SgdStep step{float(io.ctx->lr), mu, wd, nesterov};
            parallelFor(io.in[0].numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
              if (buf) {
#pragma omp simd
                for (int64_t i = lo; i < hi; ++i) step(p[i], g[i], buf[i]);
              } else {
#pragma omp simd
                for (int64_t i = lo; i < hi; ++i) step(p[i], g[i]);
              }
            });
          };
        }));
  r.add("AdamUpdate", DeviceKind::Cpu, update("cpu.adam", [](const KernelSig& s) -> KernelFn {
          float b1 = float(s.attrs->f("beta1")), b2 = float(s.attrs->f("beta2"));
          float eps = float(s.attrs->f("eps")), wd = float(s.attrs->f("weight_decay"));
          bool decoupled = s.attrs->b("decoupled");
          return [b1, b2, eps, wd, decoupled](const KernelIO& io) {
            if (io.guard && *io.guard == 0.f) return;
            float* p = io.in[0].f32();
            const float* g = io.in[1].f32();
            float* m = io.in[2].f32();
            float* v = io.in[3].f32();
            fn::AdamStep step =
                fn::AdamStep::make(b1, b2, eps, wd, decoupled, io.ctx->lr, io.ctx->step);
            parallelFor(io.in[0].numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
              for (int64_t i = lo; i < hi; ++i) step(p[i], g[i], m[i], v[i]);
            });
          };
        }));
}

}  // namespace netloom::cpu
