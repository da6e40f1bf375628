// Element-wise CUDA kernels: the same functors the CPU runs (kernels/core/functors.h),
// launched over the output's elements on the device's stream.
#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"

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

KernelFn copy(const KernelSig& sig) {
  cudaStream_t s = streamOf(sig);
  return [s](const KernelIO& io) {
    if (io.out[0].data == io.in[0].data) return;
    size_t bytes = size_t(io.out[0].numel()) * dtypeSize(io.out[0].dtype);
    if (bytes)
      NL_CUDA(cudaMemcpyAsync(io.out[0].data, io.in[0].data, bytes, cudaMemcpyDeviceToDevice, s));
  };
}

}  // namespace

void registerElementwise(KernelRegistry& r) {
  auto add = [&](const char* op, std::function<KernelFn(const KernelSig&)> make) {
    r.add(op, DeviceKind::Cuda, plainKernel(std::string("cuda.") + op, std::move(make)));
  };
  add("ReLU", [](const KernelSig& s) { return unary(s, fn::Relu{}); });
  add("ReLUGrad", [](const KernelSig& s) { return binary(s, fn::ReluGrad{}); });
  add("LeakyReLU", [](const KernelSig& s) {
    return unary(s, fn::LeakyRelu{float(s.attrs->f("negative_slope"))});
  });
  add("LeakyReLUGrad", [](const KernelSig& s) {
    return binary(s, fn::LeakyReluGrad{float(s.attrs->f("negative_slope"))});
  });
  add("GELU", [](const KernelSig& s) {
    return s.attrs->s("approximate") == "tanh" ? unary(s, fn::GeluTanh{}) : unary(s, fn::Gelu{});
  });
  add("GELUGrad", [](const KernelSig& s) {
    return s.attrs->s("approximate") == "tanh" ? binary(s, fn::GeluTanhGrad{})
                                               : binary(s, fn::GeluGrad{});
  });
  add("Sigmoid", [](const KernelSig& s) { return unary(s, fn::Sigmoid{}); });
  add("SigmoidGrad", [](const KernelSig& s) { return binary(s, fn::SigmoidGrad{}); });
  add("Tanh", [](const KernelSig& s) { return unary(s, fn::Tanh{}); });
  add("TanhGrad", [](const KernelSig& s) { return binary(s, fn::TanhGrad{}); });
  add("Add", [](const KernelSig& s) {
    return s.attrs->s("activation", "none") == "relu" ? binary(s, fn::AddRelu{})
                                                      : binary(s, fn::Add{});
  });
  add("RoundHalf",
      [](const KernelSig& s) { return unary(s, fn::RoundHalf{s.attrs->s("format") == "fp16"}); });
  for (const char* op : {"Identity", "Flatten", "Reshape"})
    add(op, [](const KernelSig& s) { return copy(s); });
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
