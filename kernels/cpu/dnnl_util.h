// oneDNN helpers every oneDNN kernel of the CPU backend shares (not exported): the
// process's engine and stream, user-owned scratchpads, a primitive prepared once at
// plan time whose memory objects are only repointed at each launch, the decline rule,
// and memory descriptors for the engine's layouts.
#pragma once

#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {

// Created on first use and kept for the life of the process: engines are costly
// to create and every oneDNN kernel of this backend shares one.
inline dnnl::engine& dnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// CPU streams execute synchronously in the calling thread. A stream is not meant to
// be shared between threads, so each thread that launches kernels (the training
// thread, an evaluation thread) gets its own, once.
inline dnnl::stream& dnnlStream() {
  thread_local dnnl::stream stream(dnnlEngine());
  return stream;
}

// Primitives created here keep their scratchpad in memory we allocate once.
inline dnnl::primitive_attr userScratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

// A primitive with one memory object per argument.
class DnnlCall {
 public:
  // Binds argument `arg` (DNNL_ARG_*) to a not-yet-known buffer of layout `md`.
  void arg(int arg, const dnnl::memory::desc& md) {
    m_args[arg] = dnnl::memory(md, dnnlEngine(), DNNL_MEMORY_NONE);
  }
  // Binds argument `arg` to memory the call keeps (a workspace, a scratch output).
  void own(int arg, const dnnl::memory& m) { m_args[arg] = m; }
  void set(int arg, const void* data) { m_args.at(arg).set_data_handle(const_cast<void*>(data)); }
  // Whether no primitive was made.
  bool empty() const { return !m_prim; }
  void run() {
    m_prim.execute(dnnlStream(), m_args);
    dnnlStream().wait();
  }

  // Sets the primitive and allocates its scratchpad; call once per pd.
  template <class Prim, class Pd>
  static DnnlCall make(const Pd& pd) {
    DnnlCall c;
    c.m_prim = Prim(pd);
    dnnl::memory::desc scratch = pd.scratchpad_desc();
    if (scratch.get_size() > 0) c.m_args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(scratch, dnnlEngine());
    return c;
  }

 private:
  dnnl::primitive m_prim;
  std::unordered_map<int, dnnl::memory> m_args;
};

// Runs `build`, which creates primitive descriptors and returns their implementation
// names, and declines when oneDNN refuses, or would run its own reference code or
// one of `slower`: implementations measured to be no faster than our reference.
template <class F>
std::string dnnlDecline(F&& build, std::initializer_list<const char*> slower = {}) {
  try {
    for (const std::string& impl : build()) {
      if (impl.rfind("ref", 0) == 0 || impl.find("_ref:") != std::string::npos)
        return "oneDNN would run its reference implementation (" + impl + ")";
      for (const char* s : slower)
        if (impl.rfind(s, 0) == 0)
          return "oneDNN would run " + impl + ", slower here than the reference kernel";
    }
  } catch (const dnnl::error& e) {
    return std::string("oneDNN has no implementation: ") + e.what();
  }
  return {};
}

inline std::string declineUnlessFloat(const KernelSig& s) {
  for (const auto& t : s.in)
    if (t.dtype != DType::F32) return "oneDNN kernels here take float32 only";
  return {};
}

// Whether this CPU has the bf16 units oneDNN's bf16 kernels are fast on (AVX512_BF16 or
// AMX, as oneDNN reports the ISA it uses). On an AVX-512 CPU without them oneDNN emulates
// bf16, slower than float.
inline bool cpuHasBf16Units() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

// An N×C×H×W tensor in the given layout, float unless said otherwise.
inline dnnl::memory::desc activationDesc(
    const Shape& s, Layout layout, dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
  using tag = dnnl::memory::format_tag;
  return dnnl::memory::desc({s[0], s[1], s[2], s[3]}, type,
                            layout == Layout::Blocked16 ? tag::nChw16c : tag::nchw);
}

// Convolution weights -----------------------------------------------------------
// oneDNN's logical dims for a convolution weight are (g,) o, i, kh, kw for both
// kinds of convolution; PyTorch stores a transposed convolution's weight i-major
// ([i, o/g, kh, kw]), which the iohw tags describe as it is.
struct WeightGeometry {
  bool transposed = false;
  int64_t groups = 1;
  dnnl::memory::dims dims;   // oneDNN's logical dims
  dnnl::memory::desc plain;  // PyTorch's layout over them
};

WeightGeometry weightGeometry(const Shape& shape, int64_t groups, bool transposed);

// The packed format naming `md` for a weight of geometry `g` ("ABcd16b16a", with
// ";deconv" and ";g=N" where they apply), or empty when no format tag describes it
// or it pads the tensor.
std::string packedFormat(const WeightGeometry& g, const dnnl::memory::desc& md);

// The geometry and memory descriptor of a Packed weight; false for a format this
// backend did not write.
bool packedDesc(const TensorDesc& d, WeightGeometry& g, dnnl::memory::desc& md);

inline bool anyBlocked(const KernelSig& s) {
  for (const auto* list : {&s.in, &s.out})
    for (const TensorDesc& t : *list)
      if (t.layout != Layout::Plain) return true;
  return false;
}

}  // namespace netloom::cpu
