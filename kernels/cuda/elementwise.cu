// Element-wise CUDA kernels: the same functors the CPU runs (kernels/core/functors.h),
// launched over the output's elements on the device's stream.
#include "kernels/core/pointwise.h"
#include "kernels/core/widen.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/library.h"

namespace netloom::cuda {
namespace {

template <class F>
__global__ void unaryKernel(F f, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = f(x[i]);
}

template <class F>
__global__ void binaryKernel(F f, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = f(a[i], b[i]);
}

__global__ void fillKernel(float v, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = v;
}

// Keyed by each element's logical NCHW index, as on the CPU: the same mask. The
// step's seed and number come from device memory, so a recorded step replays with
// each step's own mask.
__global__ void dropoutKernel(const DeviceStepValues* step, uint64_t salt, float p, const float* x,
                              float* y, int64_t n) {
  fn::Dropout drop{hashCombine(step->seed, hashCombine(uint64_t(step->step), salt)), p,
                   1.f / (1.f - p)};
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = drop(x[i], uint64_t(i));
}

// A chain (kernels/core/pointwise.h) element by element, each step's value in a
// register; Dropout draws by the element's index, as Dropout alone does.
struct Chain {
  PointStep steps[kMaxPointSteps];
  const float* in[kMaxPointInputs];
  float* out[kMaxPointOutputs];
  int outputStep[kMaxPointOutputs];
  int nsteps = 0, noutputs = 0;
  bool training = true;
};

__global__ void chainKernel(Chain c, const DeviceStepValues* step, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float value[kMaxPointSteps];
    for (int k = 0; k < c.nsteps; ++k) {
      const PointStep& s = c.steps[k];
      const float a = s.arg[0] >= 0 ? c.in[s.arg[0]][i] : value[-s.arg[0] - 1];
      const float b = s.arity < 2 ? 0.f : s.arg[1] >= 0 ? c.in[s.arg[1]][i] : value[-s.arg[1] - 1];
      if (s.op == PointOp::Dropout) {  // in evaluation, or at p = 0, the identity
        if (!c.training || s.param == 0.f) {
          value[k] = a;
          continue;
        }
        fn::Dropout drop{hashCombine(step->seed, hashCombine(uint64_t(step->step), s.salt)),
                         s.param, 1.f / (1.f - s.param)};
        value[k] = drop(a, uint64_t(i));
        continue;
      }
      value[k] = visitPoint(s, [a, b](auto f) -> float {
        if constexpr (kUnary<decltype(f)>)
          return f(a);
        else
          return f(a, b);
      });
    }
    for (int j = 0; j < c.noutputs; ++j) c.out[j][i] = value[c.outputStep[j]];
  }
}

KernelFn pointwise(const KernelSig& sig) {
  const PointChain chain = *pointChain(*sig.attrs, int(sig.in.size()), nullptr);
  Chain c;
  c.nsteps = int(chain.steps.size());
  c.noutputs = int(chain.outputs.size());
  for (int k = 0; k < c.nsteps; ++k) c.steps[k] = chain.steps[size_t(k)];
  for (int j = 0; j < c.noutputs; ++j) c.outputStep[j] = chain.outputs[size_t(j)];
  cudaStream_t s = streamOf(sig);
  return [c, s](const KernelIO& io) mutable {
    const int64_t n = io.out[0].numel();
    if (n == 0) return;
    for (size_t k = 0; k < io.nin; ++k) c.in[k] = io.in[k].f32();
    for (size_t j = 0; j < io.nout; ++j) c.out[j] = io.out[j].f32();
    c.training = io.ctx->training;
    chainKernel<<<gridFor(n), kBlock, 0, s>>>(c, io.stepValues, n);
    NL_CUDA(cudaGetLastError());
  };
}

template <class F>
KernelFn unary(const KernelSig& sig, F f) {
  cudaStream_t s = streamOf(sig);
  return [f, s](const KernelIO& io) {
    int64_t n = io.out[0].numel();
    if (n == 0) return;
    unaryKernel<<<gridFor(n), kBlock, 0, s>>>(f, io.in[0].f32(), io.out[0].f32(), n);
    NL_CUDA(cudaGetLastError());
  };
}

template <class F>
KernelFn binary(const KernelSig& sig, F f) {
  cudaStream_t s = streamOf(sig);
  return [f, s](const KernelIO& io) {
    int64_t n = io.out[0].numel();
    if (n == 0) return;
    binaryKernel<<<gridFor(n), kBlock, 0, s>>>(f, io.in[0].f32(), io.in[1].f32(), io.out[0].f32(),
                                               n);
    NL_CUDA(cudaGetLastError());
  };
}

// Op `op` alone, through its functor (kernels/core/pointwise.h).
KernelFn single(const KernelSig& s, const std::string& op) {
  return visitPoint(*pointStep(op, *s.attrs), [&s](auto f) {
    if constexpr (kUnary<decltype(f)>)
      return unary(s, f);
    else
      return binary(s, f);
  });
}

KernelFn copy(const KernelSig& sig) {
  cudaStream_t s = streamOf(sig);
  return [s](const KernelIO& io) {
    if (io.out[0].data == io.in[0].data) return;
    size_t bytes = size_t(io.out[0].numel()) * dtypeSize(io.out[0].dtype);
    if (bytes)
      NL_CUDA(cudaMemcpyAsync(io.out[0].data, io.in[0].data, bytes, cudaMemcpyDeviceToDevice, s));
  };
}

// A copy, or a conversion between float and bf16 in the same pass.
KernelFn convertingCopy(const KernelSig& s) {
  const DType from = s.in[0].dtype, to = s.out[0].dtype;
  if (from == to) return copy(s);
  cudaStream_t st = streamOf(s);
  if (from == DType::F32)
    return [st](const KernelIO& io) {
      toBf16(io.in[0].f32(), static_cast<uint16_t*>(io.out[0].data), io.out[0].numel(), st);
    };
  return [st](const KernelIO& io) {
    fromBf16(static_cast<const uint16_t*>(io.in[0].data), io.out[0].f32(), io.out[0].numel(), st);
  };
}

}  // namespace

KernelImpl bf16Twin(const KernelImpl& inner) {
  return widenedTwin(inner, [](const KernelSig& s) {
    cudaStream_t st = streamOf(s);
    return HalfCopies{[st](const uint16_t* x, float* y, int64_t n) { fromBf16(x, y, n, st); },
                      [st](const float* x, uint16_t* y, int64_t n) { toBf16(x, y, n, st); }};
  });
}

void registerElementwise(KernelRegistry& r) {
  auto add = [&](const std::string& op, std::function<KernelFn(const KernelSig&)> make) {
    r.add(op, DeviceKind::Cuda, plainKernel(std::string("cuda.") + op, std::move(make)));
  };
  // Every op whose kernel is its functor alone (pointwise.h), the declared ones too.
  for (const std::string& op : pointOpNames())
    add(op, [op](const KernelSig& s) { return single(s, op); });
  {
    KernelImpl k = plainKernel("cuda.pointwise", pointwise);
    k.decline = declinePointwise;
    r.add("Pointwise", DeviceKind::Cuda, std::move(k));
  }
  // The shape ops copy, or convert between float and bf16 where bf16 storage moved a
  // rounding into them.
  for (const char* op : {"Identity", "Flatten", "Reshape"}) {
    KernelImpl k{std::string("cuda.") + op, declineConvertingCopy,
                 [](const KernelSig& s) { return convertingCopy(s); }};
    k.halfTensors = true;
    r.add(op, DeviceKind::Cuda, std::move(k));
  }
  add("Constant", [](const KernelSig& s) -> KernelFn {
    float v = float(s.attrs->f("value"));
    cudaStream_t st = streamOf(s);
    return [v, st](const KernelIO& io) {
      int64_t n = io.out[0].numel();
      if (n == 0) return;
      fillKernel<<<gridFor(n), kBlock, 0, st>>>(v, io.out[0].f32(), n);
      NL_CUDA(cudaGetLastError());
    };
  });
  // Mixed precision's bf16 storage: a float tensor rounded into a bf16 one.
  KernelImpl cast{"cuda.CastBf16",
                  [](const KernelSig& s) -> std::string {
                    if (s.in[0].dtype != DType::F32 || s.out[0].dtype != DType::BF16)
                      return "casts float32 to bf16 only";
                    return {};
                  },
                  [](const KernelSig& s) -> KernelFn {
                    cudaStream_t st = streamOf(s);
                    return [st](const KernelIO& io) {
                      toBf16(io.in[0].f32(), static_cast<uint16_t*>(io.out[0].data),
                             io.out[0].numel(), st);
                    };
                  }};
  cast.halfTensors = true;
  r.add("CastBf16", DeviceKind::Cuda, std::move(cast));
  add("Dropout", [](const KernelSig& s) -> KernelFn {
    float p = float(s.attrs->f("p"));
    uint64_t salt = uint64_t(s.attrs->i("__salt"));
    KernelFn passThrough = copy(s);
    cudaStream_t st = streamOf(s);
    return [p, salt, passThrough, st](const KernelIO& io) {
      if (!io.ctx->training || p == 0.f) return passThrough(io);
      int64_t n = io.out[0].numel();
      if (n == 0) return;
      dropoutKernel<<<gridFor(n), kBlock, 0, st>>>(io.stepValues, salt, p, io.in[0].f32(),
                                                   io.out[0].f32(), n);
      NL_CUDA(cudaGetLastError());
    };
  });
}

}  // namespace netloom::cuda
