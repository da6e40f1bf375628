// Pooling on CUDA where cuDNN's cannot express the window: a ceil_mode window that
// reaches past the padding (cuDNN pads symmetrically and rounds output sizes down).
// One thread per output element forward; backward, one thread per input element
// gathers the gradients of the windows that cover it, in output order, from 0.f, as
// the CPU's kernels add them: the results are the CPU's bit for bit. The window
// arithmetic is kernels/core/pool_math.h, shared with the CPU.
#include <cassert>

#include "kernels/core/geometry.h"
#include "kernels/core/pool_math.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"

namespace netloom::cuda {
namespace {

Window2d windowOf(const KernelSig& s, int xIndex) {
  Window2d w;
  [[maybe_unused]] std::string err = poolWindow(*s.attrs, s.in[size_t(xIndex)].shape, w);
  assert(err.empty());  // shape inference ran the same check
  return w;
}

__global__ void poolForwardKernel(const float* x, float* y, Window2d w, bool average,
                                  bool includePad, int64_t n) {
  int64_t outArea = w.oh * w.ow;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t p = i / outArea, o = i - p * outArea, oy = o / w.ow;
    y[i] = pool::forwardAt(x + p * w.ih * w.iw, w, oy, o - oy * w.ow, average, includePad);
  }
}

__global__ void poolBackwardKernel(const float* dy, const float* x, float* dx, Window2d w,
                                   bool average, bool includePad, int64_t n) {
  int64_t inArea = w.ih * w.iw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t p = i / inArea, at = i - p * inArea, iy = at / w.iw;
    dx[i] = pool::gradientAt(dy + p * w.oh * w.ow, x ? x + p * inArea : nullptr, w, iy,
                             at - iy * w.iw, average, includePad);
  }
}

// Forward: (x) -> y. Backward: (dy, x) -> dx.
KernelFn poolKernel(const KernelSig& s, bool average, bool backward) {
  Window2d w = windowOf(s, backward ? 1 : 0);
  bool includePad = average && s.attrs->b("count_include_pad", true);
  cudaStream_t st = streamOf(s);
  return [w, average, includePad, backward, st](const KernelIO& io) {
    int64_t n = io.out[0].numel();
    if (n == 0) return;
    if (backward) {
      poolBackwardKernel<<<gridFor(n), kBlock, 0, st>>>(io.in[0].f32(),
                                                        average ? nullptr : io.in[1].f32(),
                                                        io.out[0].f32(), w, average, includePad, n);
      check(cudaGetLastError(), "launch of poolBackwardKernel");
    } else {
      poolForwardKernel<<<gridFor(n), kBlock, 0, st>>>(io.in[0].f32(), io.out[0].f32(), w, average,
                                                       includePad, n);
      check(cudaGetLastError(), "launch of poolForwardKernel");
    }
  };
}

KernelImpl floatKernel(std::string name, bool average, bool backward) {
  KernelImpl k = plainKernel(std::move(name), [average, backward](const KernelSig& s) {
    return poolKernel(s, average, backward);
  });
  k.decline = [](const KernelSig& s) -> std::string {
    for (const TensorDesc& d : s.in)
      if (d.dtype != DType::F32) return "takes float32 only";
    return {};
  };
  return k;
}

}  // namespace

void registerPool(KernelRegistry& r) {
  auto cuda = DeviceKind::Cuda;
  r.add("MaxPool2d", cuda, floatKernel("cuda.pool_max", false, false));
  r.add("MaxPool2dGrad", cuda, floatKernel("cuda.pool_max_backward", false, true));
  r.add("AvgPool2d", cuda, floatKernel("cuda.pool_avg", true, false));
  r.add("AvgPool2dGrad", cuda, floatKernel("cuda.pool_avg_backward", true, true));
}

}  // namespace netloom::cuda
