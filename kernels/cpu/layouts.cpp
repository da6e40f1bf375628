// The CPU's layout kernels: Reorder, the conversions the layout pass places between
// blocked and plain parts of a plan (and packed weights to and from PyTorch's layout);
// and ReduceChannels, a convolution's bias gradient, in either activation layout.
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/dnnl_util.h"

namespace netloom::cpu {
namespace {

// A memory descriptor for either side of a Reorder: an activation, or a weight
// whose geometry the packed side names.
dnnl::memory::desc reorderDesc(const TensorDesc& d, const TensorDesc& other) {
  WeightGeometry g;
  dnnl::memory::desc md;
  if (packedDesc(d, g, md)) return md;
  if (packedDesc(other, g, md)) return g.plain;
  return activationDesc(
      d.shape, d.layout,
      d.dtype == DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32);
}

// Per-channel sums (the bias gradient): each thread owns a band of channels and
// walks the batch in order, so the result does not depend on the thread count. In
// nChw16c a band is a block of 16 channels, summed lane by lane.
KernelFn makeReduceChannels(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  int64_t n = x[0], c = x[1], inner = numel(x) / std::max<int64_t>(1, n * c);
  if (s.in[0].layout == Layout::Blocked16) {
    int64_t blocks = paddedChannels(c) / 16;  // the last block's padding not summed
    return [n, c, blocks, inner](const KernelIO& io) {
      const float* x = io.in[0].f32();
      float* y = io.out[0].f32();
      parallelFor(blocks, grainFor(n * inner * 16), [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          double acc[16] = {};
          for (int64_t i = 0; i < n; ++i) {
            const float* p = x + (i * blocks + b) * inner * 16;
            float plane[16] = {};
            for (int64_t j = 0; j < inner; ++j)
#pragma omp simd
              for (int l = 0; l < 16; ++l) plane[l] += p[j * 16 + l];
            for (int l = 0; l < 16; ++l) acc[l] += plane[l];
          }
          for (int l = 0; l < 16 && b * 16 + l < c; ++l) y[b * 16 + l] = float(acc[l]);
        }
      });
    };
  }
  return [n, c, inner](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(c, grainFor(n * inner), [&](int64_t lo, int64_t hi) {
      for (int64_t ch = lo; ch < hi; ++ch) {
        double acc = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float* p = x + (i * c + ch) * inner;
          float plane = 0.f;
#pragma omp simd reduction(+ : plane)
          for (int64_t j = 0; j < inner; ++j) plane += p[j];
          acc += plane;
        }
        y[ch] = float(acc);
      }
    });
  };
}

// Layout conversions the compiler's layout pass places between the blocked and the
// plain parts of a plan.
std::string declineReorder(const KernelSig& s) {
  bool packed = s.in[0].layout == Layout::Packed || s.out[0].layout == Layout::Packed;
  // An activation keeps its type, float or bf16; weights are float.
  const DType t = s.in[0].dtype;
  if (t != s.out[0].dtype || (t != DType::F32 && (packed || t != DType::BF16)))
    return "converts layouts of float32 tensors, or of bf16 activations, keeping the type";
  if (packed && s.in[0].layout != Layout::Plain && s.out[0].layout != Layout::Plain)
    return "converts packed weights to and from PyTorch's layout only";
  WeightGeometry g;
  dnnl::memory::desc md;
  for (const TensorDesc* d : {&s.in[0], &s.out[0]})
    if (d->layout == Layout::Packed && !packedDesc(*d, g, md))
      return "unknown packed format '" + d->format + "'";
  if (!packed && s.in[0].shape.size() != 4) return "activations are 4-D";
  return {};
}

KernelFn makeReorder(const KernelSig& s) {
  void* none = DNNL_MEMORY_NONE;
  auto from = std::make_shared<dnnl::memory>(reorderDesc(s.in[0], s.out[0]), dnnlEngine(), none);
  auto to = std::make_shared<dnnl::memory>(reorderDesc(s.out[0], s.in[0]), dnnlEngine(), none);
  auto prim = std::make_shared<dnnl::reorder>(*from, *to);
  return [from, to, prim](const KernelIO& io) {
    from->set_data_handle(io.in[0].data);
    to->set_data_handle(io.out[0].data);
    prim->execute(dnnlStream(), *from, *to);
    dnnlStream().wait();
  };
}

}  // namespace

void registerLayouts(KernelRegistry& r) {
  r.add("ReduceChannels", DeviceKind::Cpu,
        {"cpu.reduce_channels", [](const KernelSig&) { return std::string(); }, makeReduceChannels,
         true});
  KernelImpl reorder{"onednn.reorder", declineReorder, makeReorder, true};
  reorder.halfTensors = true;  // bf16 activations too, keeping their type
  r.add("Reorder", DeviceKind::Cpu, std::move(reorder));
}

}  // namespace netloom::cpu
