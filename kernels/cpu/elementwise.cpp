// Element-wise CPU kernels: activations and their gradients, Add, copies for shape
// ops, Dropout and Constant. Loops are written so the compiler vectorises them.
#include <algorithm>
#include <cstring>

#include "kernels/core/pointwise.h"
#include "kernels/core/rng.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

// Over every element the output holds (a padded blocked tensor's padding too, which
// stays zero where f maps zeros to zero: see keepsPaddingZero).
template <class F>
KernelFn unary(const KernelSig& s, F f) {
  const int64_t n = storedElements(s.out[0]);
  return [f, n](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelForElements(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
    });
  };
}

template <class F>
KernelFn binary(const KernelSig& s, F f) {
  const int64_t n = storedElements(s.out[0]);
  return [f, n](const KernelIO& io) {
    const float* a = io.in[0].f32();
    const float* b = io.in[1].f32();
    float* y = io.out[0].f32();
    parallelForElements(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i], b[i]);
    });
  };
}

// Op `op` alone: its functor (kernels/core/pointwise.h) over every stored element.
KernelFn single(const KernelSig& s, const std::string& op) {
  return visitPoint(*pointStep(op, *s.attrs), [&s](auto f) {
    if constexpr (kUnary<decltype(f)>)
      return unary(s, f);
    else
      return binary(s, f);
  });
}

// Step `f` of a chain over one tile of m elements.
template <class F>
void tile(F f, const float* a, const float* b, float* y, int64_t m) {
  if constexpr (kUnary<F>) {
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) y[i] = f(a[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) y[i] = f(a[i], b[i]);
  }
}

// The elements of a chain go through all its steps a tile at a time, each step's
// tile kept in a buffer that stays in L1. The last step writes its output directly,
// the other outputs are copied from their tiles once the last step has read every
// input of the tile: an output may then share a dead input's memory (the in-place
// pass), whatever step reads that input. A Dropout step draws each element by its
// logical NCHW index, as Dropout alone does: in a blocked tensor a tile stays within
// one block of 16 channels at every position (a "plane"), whose indices follow from
// the tile's start.
KernelFn pointwise(const KernelSig& s) {
  constexpr int64_t kTile = 512;
  const PointChain chain = *pointChain(*s.attrs, int(s.in.size()), nullptr);
  const int64_t n = storedElements(s.out[0]);
  const bool blocked = s.out[0].layout == Layout::Blocked16 && chain.dropout;
  const Shape& x = s.out[0].shape;
  const int64_t c = blocked ? x[1] : 0, area = blocked ? x[2] * x[3] : 0;
  const int64_t plane = blocked ? 16 * area : n, blocks = blocked ? paddedChannels(c) / 16 : 0;
  return [chain, n, blocked, c, area, plane, blocks](const KernelIO& io) {
    const int last = int(chain.steps.size()) - 1;
    const auto direct = std::find(chain.outputs.begin(), chain.outputs.end(), last);
    fn::Dropout drops[kMaxPointSteps] = {};
    for (size_t k = 0; k < chain.steps.size(); ++k) {
      const PointStep& st = chain.steps[k];
      if (st.op != PointOp::Dropout) continue;
      drops[k] =
          fn::Dropout{hashCombine(io.ctx->seed, hashCombine(uint64_t(io.ctx->step), st.salt)),
                      io.ctx->training ? st.param : 0.f, 1.f / (1.f - st.param)};
    }
    parallelForElements(n, [&](int64_t lo, int64_t hi) {
      alignas(64) float buf[kMaxPointSteps][kTile];
      const float* value[kMaxPointSteps];
      for (int64_t t = lo; t < hi;) {
        const int64_t m = std::min({kTile, hi - t, plane - t % plane});
        auto operand = [&](int8_t arg) {
          return arg >= 0 ? io.in[arg].f32() + t : value[-arg - 1];
        };
        for (int k = 0; k <= last; ++k) {
          const PointStep& st = chain.steps[size_t(k)];
          float* y = k == last && direct != chain.outputs.end()
                         ? io.out[direct - chain.outputs.begin()].f32() + t
                         : buf[k];
          const float* a = operand(st.arg[0]);
          if (st.op == PointOp::Dropout && drops[size_t(k)].p > 0.f) {
            const fn::Dropout drop = drops[size_t(k)];
            if (!blocked) {
#pragma omp simd
              for (int64_t i = 0; i < m; ++i) y[i] = drop(a[i], uint64_t(t + i));
            } else {
              const int64_t nb = t / plane, at = t % plane;
              const uint64_t first = uint64_t((nb / blocks * c + nb % blocks * 16) * area);
#pragma omp simd
              for (int64_t i = 0; i < m; ++i)
                y[i] = drop(a[i], first + uint64_t(((at + i) & 15) * area + ((at + i) >> 4)));
            }
          } else {
            const float* b = st.arity == 2 ? operand(st.arg[1]) : nullptr;
            visitPoint(st, [&](auto f) { tile(f, a, b, y, m); });
          }
          value[k] = y;
        }
        for (size_t j = 0; j < chain.outputs.size(); ++j) {
          float* y = io.out[j].f32() + t;
          if (value[chain.outputs[j]] != y) std::memcpy(y, value[chain.outputs[j]], size_t(m) * 4);
        }
        t += m;
      }
    });
  };
}

KernelFn copy(const KernelSig& s) {
  const int64_t bytes = bytesOf(s.out[0]);
  return [bytes](const KernelIO& io) {
    if (io.out[0].data != io.in[0].data) std::memcpy(io.out[0].data, io.in[0].data, size_t(bytes));
  };
}

// Whether the kernel `make` builds for `s` writes zeros where all its inputs hold
// zeros: then it keeps a padded blocked tensor's padding zero. Asked of the kernel
// itself, on one block of 16 zeros, so an activation's attributes count (ReLU and
// Tanh keep it; Sigmoid, which gives 0.5, does not).
bool keepsPaddingZero(const KernelSig& s, const std::function<KernelFn(const KernelSig&)>& make) {
  KernelSig one = s;
  std::vector<float> zeros(16 * s.in.size(), 0.f), y(16 * s.out.size(), 1.f);
  std::vector<TensorRef> in, out;
  for (size_t k = 0; k < one.in.size(); ++k) {
    one.in[k].shape = {1, 1, 1, 1};
    in.push_back({zeros.data() + 16 * k, one.in[k].shape, one.in[k].dtype, {}});
  }
  for (size_t k = 0; k < one.out.size(); ++k) {
    one.out[k].shape = {1, 1, 1, 1};
    out.push_back({y.data() + 16 * k, one.out[k].shape, one.out[k].dtype, {}});
  }
  StepContext ctx;
  make(one)(KernelIO{in.data(), out.data(), in.size(), out.size(), &ctx});
  return std::all_of(y.begin(), y.end(), [](float v) { return v == 0.f; });
}

// Each element's draw is keyed by its logical NCHW index, so a blocked tensor gets
// the very mask the plain one would.
KernelFn makeDropout(const KernelSig& s) {
  float p = float(s.attrs->f("p"));
  uint64_t salt = uint64_t(s.attrs->i("__salt"));
  KernelFn passThrough = copy(s);
  bool blocked = s.in[0].layout == Layout::Blocked16;
  const Shape& x = s.in[0].shape;
  int64_t c = blocked ? x[1] : 0, area = blocked ? x[2] * x[3] : 0;
  const int64_t stored = storedElements(s.out[0]);
  return [p, salt, passThrough, blocked, c, area, stored](const KernelIO& io) {
    if (!io.ctx->training || p == 0.f) return passThrough(io);
    fn::Dropout drop{hashCombine(io.ctx->seed, hashCombine(uint64_t(io.ctx->step), salt)), p,
                     1.f / (1.f - p)};
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    if (!blocked) {
      parallelForElements(io.out[0].numel(), [&](int64_t lo, int64_t hi) {
#pragma omp simd
        for (int64_t i = lo; i < hi; ++i) y[i] = drop(x[i], uint64_t(i));
      });
      return;
    }
    // Blocked, block by block of 16 channels at one position: element
    // ((n · C/16 + cb) · area + hw) · 16 + lane is channel cb · 16 + lane of sample n,
    // plain index (n · C + cb · 16 + lane) · area + hw. No division per element, so
    // the lanes vectorise. A padded block's padding is zero, and so stays.
    const int64_t blocks = paddedChannels(c) / 16, planes = stored / (16 * area);
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
}

}  // namespace

void registerElementwise(KernelRegistry& r) {
  // Element by element over same-shaped tensors, so any layout they all share; the
  // shape ops (Flatten, Reshape) and Constant see plain tensors only.
  // `also`: what else the kernel declines, asked first (null: nothing).
  auto add = [&](const std::string& op, std::function<KernelFn(const KernelSig&)> make,
                 bool anyLayout = true, std::string(*also)(const KernelSig&) = nullptr) {
    KernelImpl k = kernel(std::string("cpu.") + op, make);
    k.anyLayout = anyLayout;
    k.decline = [make, also](const KernelSig& s) -> std::string {
      if (also)
        if (std::string why = also(s); !why.empty()) return why;
      bool padded = std::any_of(s.out.begin(), s.out.end(), paddedBlocked);
      if (padded && !keepsPaddingZero(s, make))
        return "maps zeros to non-zeros, so it would fill the padding of a padded nChw16c tensor";
      return {};
    };
    r.add(op, DeviceKind::Cpu, std::move(k));
  };
  // Every op whose kernel is its functor alone (pointwise.h), the declared ones too.
  for (const std::string& op : pointOpNames())
    add(op, [op](const KernelSig& s) { return single(s, op); });
  add("Pointwise", pointwise, true, declinePointwise);
  for (const char* op : {"Identity", "Flatten", "Reshape"})
    add(
        op, [](const KernelSig& s) { return copy(s); }, std::string(op) == "Identity");

  add(
      "Constant",
      [](const KernelSig& s) -> KernelFn {
        float v = float(s.attrs->f("value"));
        return [v](const KernelIO& io) {
          float* y = io.out[0].f32();
          for (int64_t i = 0, n = io.out[0].numel(); i < n; ++i) y[i] = v;
        };
      },
      false);

  add("Dropout", makeDropout);

  // Float to bfloat16 storage, each value rounded as RoundHalf rounds it.
  add(
      "CastBf16",
      [](const KernelSig& s) -> KernelFn {
        const int64_t n = numel(s.out[0].shape);
        return [n](const KernelIO& io) {
          const float* x = io.in[0].f32();
          auto* y = static_cast<uint16_t*>(io.out[0].data);
          parallelForElements(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
            for (int64_t i = lo; i < hi; ++i) y[i] = fn::ToBf16{}(x[i]);
          });
        };
      },
      false);
}

}  // namespace netloom::cpu
