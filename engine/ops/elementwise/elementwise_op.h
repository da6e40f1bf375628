// What an element-wise op file declares. Such an op is one header in this folder:
// everything about the op, in one place, as data and host/device functors that
// depend on kernels/core alone (so that the CPU and the CUDA kernel libraries can
// instantiate them):
//
//   struct SiLU {
//     static constexpr const char* kName = "SiLU";           // the op's name
//     static constexpr const char* kDoc = "...";             // the palette's doc line
//     static constexpr std::array<ew::Param, 0> kParams{};   // float attributes, ≤ 2
//     struct Forward { NL_HD float operator()(float x) const; };           // y = f(x)
//     struct Backward { NL_HD float operator()(float dy, float x) const; };  // dx
//     static constexpr int kFlops = 4;                       // per element, forward
//     static constexpr const char* kOnnx = "Mul(x, Sigmoid(x))";  // onnx_form.h
//     static constexpr const char* kTorch = "F.silu";        // called as F.silu(x, **attrs)
//   };
//   NL_ELEMENTWISE_OP(SiLU)
//
// Forward and Backward hold the attributes' values as their members, in kParams'
// order. The build reads each file's NL_ELEMENTWISE_OP line and generates
// elementwise_ops.gen.h, the list every backend and the op registry iterate: the op
// gets its "NameGrad" backward op, CPU and CUDA kernels, a place in the compiler's
// element-wise chains, the palette, ONNX export and import, and PyTorch export,
// without its name written anywhere else.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <utility>

#include "kernels/core/fast_math.h"
#include "kernels/core/hd.h"

// Marks the struct an op file declares; the build collects these (CMakeLists.txt).
#define NL_ELEMENTWISE_OP(Type)

namespace netloom::ew {

// A float attribute: its name (PyTorch's keyword for it too), default, inclusive
// range and doc line.
struct Param {
  const char* name;
  double def, min, max;
  const char* doc;
};

template <class... Ops>
struct List {
  static constexpr size_t size = sizeof...(Ops);
};

// Functor F with the attribute values p[0], p[1], ... as its members, in order.
template <class F, size_t N, size_t... I>
NL_HD F withParamsImpl(const float* p, std::index_sequence<I...>) {
  return F{p[I]...};
}
template <class Op, class F>
NL_HD F withParams(const float* p) {
  return withParamsImpl<F, std::tuple_size_v<decltype(Op::kParams)>>(
      p, std::make_index_sequence<std::tuple_size_v<decltype(Op::kParams)>>{});
}

// Calls f.template operator()<Op, I>() for each op of list L, in order.
template <class L>
struct ForEach;
template <class... Ops>
struct ForEach<List<Ops...>> {
  template <class F>
  static void run(F&& f) {
    size_t i = 0;
    (f.template operator()<Ops>(i++), ...);
  }
};

// Calls visit(functor) with op `index`'s Forward (backward false) or Backward functor
// built from `p`; with an index past the list, visit(fallback).
template <class V, class Fallback>
NL_HD auto visitOp(List<>, int, bool, const float*, V&& visit, Fallback fallback) {
  return visit(fallback);
}
template <class V, class Fallback, class Op, class... Rest>
NL_HD auto visitOp(List<Op, Rest...>, int index, bool backward, const float* p, V&& visit,
                   Fallback fallback) {
  if (index == 0)
    return backward ? visit(withParams<Op, typename Op::Backward>(p))
                    : visit(withParams<Op, typename Op::Forward>(p));
  return visitOp(List<Rest...>{}, index - 1, backward, p, static_cast<V&&>(visit), fallback);
}

}  // namespace netloom::ew
