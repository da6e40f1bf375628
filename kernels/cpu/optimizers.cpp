// Optimizer updates on the CPU, in place, following PyTorch's formulas exactly so a
// run can be compared step by step with torch.optim.
#include <algorithm>
#include <memory>
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
    size_t tensors = s.in.size() - (s.attrs->b("loss_scaled") ? 1 : 0);
    for (size_t i = 0; i < tensors; ++i)
      if (!s.in[i].sameLayout(s.in[0])) return "parameter, gradient and state differ in layout";
    return {};
  };
  return k;
}

// Under loss scaling the last input is fn::LossScale's state: a step it marked is
// skipped, and the others divide the gradient by the scale it was taken at. Returns
// the gradient's factor, or 0 to skip.
float unscaling(const KernelIO& io, bool scaled, size_t& tensors) {
  tensors = io.nin;
  if (!scaled) return 1.f;
  tensors -= 1;
  const float* state = io.in[io.nin - 1].f32();
  return state[fn::LossScale::kSkipNow] != 0.f ? 0.f : 1.f / state[fn::LossScale::kUsed];
}

using Group = std::vector<std::vector<TensorRef>>;

// The updates a launch does: its own, or each of its group's, as one element range
// over all the group's tensors end to end, shared out by one parallel loop as a
// single tensor of that size would be. Each tensor starts that range on a 16-float
// line (the gap is skipped), so every thread's part starts on a line in memory too.
// body(in, nin, lo, hi) updates elements [lo, hi) of the tensors `in`.
class Updates {
 public:
  explicit Updates(Group group) : m_group(std::move(group)) {
    int64_t at = 0;
    for (const std::vector<TensorRef>& t : m_group) {
      m_starts.push_back(at);
      at += (t[0].numel() + kLineFloats - 1) / kLineFloats * kLineFloats;
    }
    m_total = at;
  }
  template <class Body>
  void run(const KernelIO& io, const Body& body) const {
    if (m_group.empty()) {
      parallelForElements(io.in[0].numel(),
                          [&](int64_t lo, int64_t hi) { body(io.in, io.nin, lo, hi); });
      return;
    }
    parallelForElements(m_total, [&](int64_t lo, int64_t hi) {
      size_t t =
          size_t(std::upper_bound(m_starts.begin(), m_starts.end(), lo) - m_starts.begin()) - 1;
      for (; t < m_group.size() && m_starts[t] < hi; ++t) {
        int64_t begin = std::max(lo, m_starts[t]) - m_starts[t];
        int64_t end = std::min(hi, m_starts[t] + m_group[t][0].numel()) - m_starts[t];
        if (begin < end) body(m_group[t].data(), m_group[t].size(), begin, end);
      }
    });
  }

 private:
  Group m_group;
  std::vector<int64_t> m_starts;  // each tensor's first element in the whole range
  int64_t m_total = 0;
};

// Inputs param, grad[, momentum buffer][, loss scale].
KernelFn sgdLaunch(const KernelSig& s, Group group) {
  float mu = float(s.attrs->f("momentum")), wd = float(s.attrs->f("weight_decay"));
  bool nesterov = s.attrs->b("nesterov"), scaled = s.attrs->b("loss_scaled");
  auto updates = std::make_shared<const Updates>(std::move(group));
  return [mu, wd, nesterov, scaled, updates](const KernelIO& io) {
    if (io.guard && *io.guard == 0.f) return;
    size_t tensors;
    float unscale = unscaling(io, scaled, tensors);  // a group shares one loss scale
    if (unscale == 0.f) return;
    fn::SgdStep step{float(io.ctx->lr), mu, wd, nesterov};
    updates->run(io, [&](const TensorRef* in, size_t nin, int64_t lo, int64_t hi) {
      float* p = in[0].f32();
      const float* g = in[1].f32();
      if (nin - (scaled ? 1 : 0) > 2) {
        float* buf = in[2].f32();
#pragma omp simd
        for (int64_t i = lo; i < hi; ++i) step(p[i], g[i] * unscale, buf[i]);
      } else {
#pragma omp simd
        for (int64_t i = lo; i < hi; ++i) step(p[i], g[i] * unscale);
      }
    });
  };
}

// Inputs param, grad, exp_avg, exp_avg_sq[, loss scale].
KernelFn adamLaunch(const KernelSig& s, Group group) {
  float b1 = float(s.attrs->f("beta1")), b2 = float(s.attrs->f("beta2"));
  float eps = float(s.attrs->f("eps")), wd = float(s.attrs->f("weight_decay"));
  bool decoupled = s.attrs->b("decoupled"), scaled = s.attrs->b("loss_scaled");
  auto updates = std::make_shared<const Updates>(std::move(group));
  return [b1, b2, eps, wd, decoupled, scaled, updates](const KernelIO& io) {
    if (io.guard && *io.guard == 0.f) return;
    size_t tensors;
    float unscale = unscaling(io, scaled, tensors);
    if (unscale == 0.f) return;
    fn::AdamStep step = fn::AdamStep::make(b1, b2, eps, wd, decoupled, io.ctx->lr, io.ctx->step);
    updates->run(io, [&](const TensorRef* in, size_t, int64_t lo, int64_t hi) {
      float* p = in[0].f32();
      const float* g = in[1].f32();
      float* m = in[2].f32();
      float* v = in[3].f32();
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) step(p[i], g[i] * unscale, m[i], v[i]);
    });
  };
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
  KernelImpl histogram = kernel("cpu.histogram", [](const KernelSig&) -> KernelFn {
    return [](const KernelIO& io) {
      fn::histogramOf(io.in[0].f32(), io.in[0].numel(), io.out[0].f32());
    };
  });
  histogram.anyLayout = true;
  r.add("Histogram", DeviceKind::Cpu, std::move(histogram));

  // Loss scaling's state, five floats: the seed reads this step's scale, the check
  // sums the gradients' squares (in order, as SumSquares) and moves the state on.
  r.add("LossScaleSeed", DeviceKind::Cpu, kernel("cpu.loss_scale_seed", [](const KernelSig& s) {
          fn::LossScale ls{float(s.attrs->f("init_scale")), float(s.attrs->i("growth_interval"))};
          return KernelFn([ls](const KernelIO& io) {
            io.out[0].f32()[0] = ls.current(io.in[0].f32()) * float(io.ctx->lossWeight);
          });
        }));
  r.add(
      "LossSeed", DeviceKind::Cpu, kernel("cpu.loss_seed", [](const KernelSig&) {
        return KernelFn([](const KernelIO& io) { io.out[0].f32()[0] = float(io.ctx->lossWeight); });
      }));
  r.add("LossScaleCheck", DeviceKind::Cpu, kernel("cpu.loss_scale_check", [](const KernelSig& s) {
          fn::LossScale ls{float(s.attrs->f("init_scale")), float(s.attrs->i("growth_interval"))};
          return KernelFn([ls](const KernelIO& io) {
            float total = 0.f;
            for (size_t i = 1; i < io.nin; ++i) total += io.in[i].f32()[0];
            ls.check(io.in[0].f32(), total);
          });
        }));

  // SGD and Adam: one launch per parameter, or one for a group of them (a multi-
  // tensor update), which splits every tensor into the same element ranges.
  KernelImpl sgd = update("cpu.sgd", [](const KernelSig& s) { return sgdLaunch(s, {}); });
  sgd.group = [](const std::vector<KernelSig>& sigs, const Group& tensors) {
    return sgdLaunch(sigs[0], tensors);
  };
  r.add("SgdUpdate", DeviceKind::Cpu, std::move(sgd));
  KernelImpl adam = update("cpu.adam", [](const KernelSig& s) { return adamLaunch(s, {}); });
  adam.group = [](const std::vector<KernelSig>& sigs, const Group& tensors) {
    return adamLaunch(sigs[0], tensors);
  };
  r.add("AdamUpdate", DeviceKind::Cpu, std::move(adam));
}

}  // namespace netloom::cpu
