// Element-wise CPU kernels: activations and their gradients, Add, copies for shape
// ops, Dropout and Constant. Loops are written so the compiler vectorises them.
#include <algorithm>
#include <cstring>

#include "kernels/core/pointwise.h"
#include "kernels/core/rng.h"
#include "kernels/core/widen.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/half.h"

namespace netloom::cpu {
namespace {

// The element-wise kernels read and write float32 or bf16 tensors.
std::string declineFloats(const KernelSig& s) {
  for (const auto* ds : {&s.in, &s.out})
    for (const TensorDesc& d : *ds)
      if (d.dtype != DType::F32 && d.dtype != DType::BF16) return "takes float32 or bf16 tensors";
  return {};
}

// Over every element the output holds (a padded blocked tensor's padding too, which
// stays zero where f maps zeros to zero: see keepsPaddingZero); each tensor float or
// bf16, computed in float.
template <class F, class X, class Y>
KernelFn unaryAs(const KernelSig& s, F f) {
  const int64_t n = storedElements(s.out[0]);
  return [f, n](const KernelIO& io) {
    const X* x = static_cast<const X*>(io.in[0].data);
    Y* y = static_cast<Y*>(io.out[0].data);
    parallelForElements(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) store(y, i, f(load(x, i)));
    });
  };
}

template <class F, class A, class B, class Y>
KernelFn binaryAs(const KernelSig& s, F f) {
  const int64_t n = storedElements(s.out[0]);
  return [f, n](const KernelIO& io) {
    const A* a = static_cast<const A*>(io.in[0].data);
    const B* b = static_cast<const B*>(io.in[1].data);
    Y* y = static_cast<Y*>(io.out[0].data);
    parallelForElements(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) store(y, i, f(load(a, i), load(b, i)));
    });
  };
}

template <class F>
KernelFn unary(const KernelSig& s, F f) {
  KernelFn made;
  withElement(s.in[0].dtype, [&](auto* x) {
    withElement(s.out[0].dtype, [&](auto* y) {
      made = unaryAs<F, ElementOf<decltype(x)>, ElementOf<decltype(y)>>(s, f);
    });
  });
  return made;
}

template <class F>
KernelFn binary(const KernelSig& s, F f) {
  KernelFn made;
  withElement(s.in[0].dtype, [&](auto* a) {
    withElement(s.in[1].dtype, [&](auto* b) {
      withElement(s.out[0].dtype, [&](auto* y) {
        made = binaryAs<F, ElementOf<decltype(a)>, ElementOf<decltype(b)>, ElementOf<decltype(y)>>(
            s, f);
      });
    });
  });
  return made;
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

// CastBf16 reads a float tensor into a bf16 one of the same layout.
std::string declineCast(const KernelSig& s) {
  if (s.in[0].dtype != DType::F32 || s.out[0].dtype != DType::BF16)
    return "casts float32 to bf16 only";
  return s.in[0].sameLayout(s.out[0]) ? "" : "keeps its input's layout";
}

KernelFn copy(const KernelSig& s) {
  const int64_t bytes = bytesOf(s.out[0]), n = storedElements(s.out[0]);
  const DType from = s.in[0].dtype, to = s.out[0].dtype;
  if (from == DType::F32 && to == DType::BF16)
    return [n](const KernelIO& io) {
      narrowElements(io.in[0].f32(), static_cast<uint16_t*>(io.out[0].data), n);
    };
  if (from == DType::BF16 && to == DType::F32)
    return [n](const KernelIO& io) {
      widenElements(static_cast<const uint16_t*>(io.in[0].data), io.out[0].f32(), n);
    };
  return [bytes](const KernelIO& io) {
    if (io.out[0].data != io.in[0].data) std::memcpy(io.out[0].data, io.in[0].data, size_t(bytes));
  };
}

// Whether the kernel `make` builds for `s` writes zeros where all its inputs hold
// zeros: then it keeps a padded blocked tensor's padding zero. Asked of the kernel
// itself, on one block of 16 zeros, so an activation's attributes count (ReLU and
// Tanh keep it; Sigmoid, which gives 0.5, does not).
bool keepsPaddingZero(const KernelSig& s, const std::function<KernelFn(const KernelSig&)>& make) {
  KernelSig one = widenedSig(s);  // the same map on floats
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

// Dropout over elements [lo, hi) of a tensor of T, element e drawn at index at(e): a
// tile at a time through floats, so the loops vectorise for bf16 as for float.
template <class T, class At>
inline void dropRange(const fn::Dropout drop, const T* x, T* y, int64_t lo, int64_t hi, At at) {
  constexpr int64_t kTile = 256;
  alignas(64) float t[kTile];
  for (int64_t t0 = lo; t0 < hi; t0 += kTile) {
    const int64_t m = std::min(kTile, hi - t0);
    const T* xs = x + t0;
    T* ys = y + t0;
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) t[i] = load(xs, i);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) t[i] = drop(t[i], at(t0 + i));
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) store(ys, i, t[i]);
  }
}

// Each element's draw is keyed by its logical NCHW index, so a blocked tensor gets
// the very mask the plain one would. x and y are both float or both bf16 (T).
template <class T>
KernelFn makeDropoutAs(const KernelSig& s) {
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
    const T* x = static_cast<const T*>(io.in[0].data);
    T* y = static_cast<T*>(io.out[0].data);
    if (!blocked) {
      parallelForElements(io.out[0].numel(), [&](int64_t lo, int64_t hi) {
        dropRange(drop, x, y, lo, hi, [](int64_t i) { return uint64_t(i); });
      });
      return;
    }
    // Blocked, plane by plane (a block of 16 channels at every position): element
    // hw · 16 + lane of plane (n, cb) is channel cb · 16 + lane of sample n, plain
    // index (n · C + cb · 16 + lane) · area + hw. A padded block's padding is zero,
    // and so stays.
    const int64_t blocks = paddedChannels(c) / 16, planes = stored / (16 * area);
    parallelFor(
        planes, std::max<int64_t>(1, kParallelGrain / (16 * area)), [&](int64_t lo, int64_t hi) {
          for (int64_t nb = lo; nb < hi; ++nb) {
            const int64_t n = nb / blocks, cb = nb % blocks;
            const uint64_t first = uint64_t((n * c + cb * 16) * area);
            dropRange(
                drop, x + nb * area * 16, y + nb * area * 16, 0, area * 16,
                [first, area](int64_t e) { return first + uint64_t((e & 15) * area + (e >> 4)); });
          }
        });
  };
}

KernelFn makeDropout(const KernelSig& s) {
  return s.out[0].dtype == DType::BF16 ? makeDropoutAs<uint16_t>(s) : makeDropoutAs<float>(s);
}

std::string declineDropout(const KernelSig& s) {
  if (s.in[0].dtype != s.out[0].dtype || declineFloats(s) != "")
    return "takes x and y both float32 or both bf16";
  return {};
}

}  // namespace

void registerElementwise(KernelRegistry& r) {
  // Element by element over same-shaped tensors, so any layout they all share; the
  // shape ops (Flatten, Reshape) and Constant see plain tensors only.
  // `also`: what else the kernel declines, asked first (null: nothing).
  // `half`: it copies bytes (or converts to bf16), so bf16 tensors too.
  auto add = [&](const std::string& op, std::function<KernelFn(const KernelSig&)> make,
                 bool anyLayout = true, std::string(*also)(const KernelSig&) = nullptr,
                 bool half = false) {
    KernelImpl k = kernel(std::string("cpu.") + op, make);
    k.anyLayout = anyLayout;
    k.halfTensors = half;
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
  // Float or bf16 tensors, each element computed in float.
  for (const std::string& op : pointOpNames())
    add(
        op, [op](const KernelSig& s) { return single(s, op); }, true, declineFloats, true);
  add("Pointwise", pointwise, true, declinePointwise);
  for (const char* op : {"Identity", "Flatten", "Reshape"})
    add(
        op, [](const KernelSig& s) { return copy(s); }, std::string(op) == "Identity",
        declineConvertingCopy, true);

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

  add("Dropout", makeDropout, true, declineDropout, true);

  // Float to bfloat16 storage, each value rounded as RoundHalf rounds it; element by
  // element, so in any layout (a padded block's zeros stay zeros).
  add(
      "CastBf16",
      [](const KernelSig& s) -> KernelFn {
        const int64_t n = storedElements(s.out[0]);
        return [n](const KernelIO& io) {
          narrowElements(io.in[0].f32(), static_cast<uint16_t*>(io.out[0].data), n);
        };
      },
      true, declineCast, true);
}

}  // namespace netloom::cpu
