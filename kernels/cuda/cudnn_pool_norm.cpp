// Pooling, batch normalisation and softmax on cuDNN 9, with the CPU kernels'
// semantics: PyTorch's padding and count_include_pad for pooling (a ceil_mode window
// cuDNN cannot express is declined), NaN propagated by max pooling; BatchNorm keeping
// the batch's biased variance as its output and updating the running statistics with
// PyTorch's momentum and the unbiased variance (by our own kernel, as the CPU does it,
// so a channel of one element is handled alike); softmax subtracting the maximum.
#include <memory>

#include "kernels/core/communicator.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/library.h"

namespace netloom::cuda {
namespace {

std::string declineNonFloat(const KernelSig& s, const char* what) {
  for (const TensorDesc& t : s.in)
    if (t.dtype != DType::F32) return std::string(what) + " here takes float32 only";
  return {};
}

// Pooling -----------------------------------------------------------------------------

struct CudnnPool {
  PoolPlan plan;
  cudnnHandle_t handle = nullptr;
  CudnnTensor x, y;
  CudnnPooling pool;
  int64_t yBytes() const { return plan.n * plan.c * plan.oh * plan.ow * int64_t(sizeof(float)); }
};

cudnnPoolingMode_t modeOf(PoolMode m) {
  switch (m) {
    // The deterministic max routes each window's gradient to one maximum, as the
    // CPU does (the first), without atomics over overlapping windows.
    case PoolMode::Max: return CUDNN_POOLING_MAX_DETERMINISTIC;
    case PoolMode::AverageIncludePad: return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    case PoolMode::AverageExcludePad: return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }
  return CUDNN_POOLING_MAX_DETERMINISTIC;
}

// Forward: (x) -> y; backward: (dy, x) -> dx.
std::shared_ptr<CudnnPool> buildPool(const KernelSig& s, bool average, bool backward) {
  auto c = std::make_shared<CudnnPool>();
  const Shape& x = s.in[backward ? 1 : 0].shape;
  if (std::string e = poolPlan(*s.attrs, x, average, c->plan); !e.empty()) throw CudaError(e);
  const PoolPlan& p = c->plan;
  c->handle = cudnnFor(s);
  setTensor4d(c->x, p.n, p.c, p.ih, p.iw);
  setTensor4d(c->y, p.n, p.c, p.oh, p.ow);
  NL_CUDNN(cudnnSetPooling2dDescriptor(c->pool, modeOf(p.mode), CUDNN_PROPAGATE_NAN, int(p.kh),
                                       int(p.kw), int(p.padH), int(p.padW), int(p.strideH),
                                       int(p.strideW)));
  int n = 0, ch = 0, h = 0, w = 0;
  NL_CUDNN(cudnnGetPooling2dForwardOutputDim(c->pool, c->x, &n, &ch, &h, &w));
  if (h != p.oh || w != p.ow)
    throw CudaError("cuDNN sizes the pooling output " + std::to_string(h) + "×" +
                    std::to_string(w) + ", the op " + std::to_string(p.oh) + "×" +
                    std::to_string(p.ow));
  return c;
}

std::string declinePool(const KernelSig& s, bool average, bool backward) {
  if (std::string e = declineNonFloat(s, "cuDNN pooling"); !e.empty()) return e;
  PoolPlan plan;
  if (std::string e = poolPlan(*s.attrs, s.in[backward ? 1 : 0].shape, average, plan); !e.empty())
    return e;
  try {
    buildPool(s, average, backward);
  } catch (const CudaError& e) {
    return e.what();
  }
  return {};
}

KernelFn poolForward(const KernelSig& s, bool average) {
  std::shared_ptr<CudnnPool> c = buildPool(s, average, false);
  cudaStream_t st = streamOf(s);
  return [c, st](const KernelIO& io) {
    float one = 1.f, zero = 0.f;
    NL_CUDNN(cudnnSetStream(c->handle, st));
    NL_CUDNN(cudnnPoolingForward(c->handle, c->pool, &one, c->x, io.in[0].data, &zero, c->y,
                                 io.out[0].data));
  };
}

// cuDNN's backward reads the forward's output, which the gradient op is not given:
// max pooling runs the forward again into the workspace. Average pooling reads
// neither x nor y, so dy stands in for y.
KernelFn poolBackward(const KernelSig& s, bool average) {
  std::shared_ptr<CudnnPool> c = buildPool(s, average, true);
  cudaStream_t st = streamOf(s);
  return [c, st, average](const KernelIO& io) {
    float one = 1.f, zero = 0.f;
    NL_CUDNN(cudnnSetStream(c->handle, st));
    const void* y = io.in[0].data;
    if (!average) {
      if (io.workspaceBytes < c->yBytes())
        throw CudaError("max pooling's backward needs its forward output in the workspace");
      NL_CUDNN(cudnnPoolingForward(c->handle, c->pool, &one, c->x, io.in[1].data, &zero, c->y,
                                   io.workspace));
      y = io.workspace;
    }
    NL_CUDNN(cudnnPoolingBackward(c->handle, c->pool, &one, c->y, y, c->y, io.in[0].data, c->x,
                                  io.in[1].data, &zero, c->x, io.out[0].data));
  };
}

KernelImpl poolKernel(const char* name, bool average, bool backward) {
  KernelImpl k{name, [=](const KernelSig& s) { return declinePool(s, average, backward); },
               [=](const KernelSig& s) {
                 return backward ? poolBackward(s, average) : poolForward(s, average);
               }};
  if (backward && !average)
    k.workspace = [](const KernelSig& s) -> int64_t {
      PoolPlan p;
      if (!poolPlan(*s.attrs, s.in[1].shape, false, p).empty()) return 0;
      return alignLibrary(p.n * p.c * p.oh * p.ow * int64_t(sizeof(float)));
    };
  k.detail = [average, backward](const KernelSig&) -> std::string {
    std::string d =
        average ? "cuDNN average pooling" : "cuDNN deterministic max pooling, NaN propagated";
    if (backward && !average) d += "; the forward runs again into the workspace";
    return d;
  };
  return k;
}

// Batch normalisation -----------------------------------------------------------------

struct CudnnBatchNorm {
  BatchNormPlan plan;
  cudnnHandle_t handle = nullptr;
  CudnnTensor x, param;
};

// BatchNorm's inputs are (x, [weight, bias], running_mean, running_var), BatchNormGrad's
// (dy, x, mean, var, [weight]): five inputs when affine, for either.
bool affineOf(const KernelSig& s) {
  return s.in.size() == 5;
}

std::shared_ptr<CudnnBatchNorm> buildBatchNorm(const KernelSig& s, bool grad) {
  auto c = std::make_shared<CudnnBatchNorm>();
  const Shape& x = s.in[grad ? 1 : 0].shape;
  if (std::string e = batchNormPlan(*s.attrs, x, affineOf(s), grad, c->plan); !e.empty())
    throw CudaError(e);
  const BatchNormPlan& p = c->plan;
  c->handle = cudnnFor(s);
  setTensor4d(c->x, p.n, p.c, p.s, 1);
  setTensor4d(c->param, 1, p.c, 1, 1);
  return c;
}

std::string declineBatchNorm(const KernelSig& s, bool grad) {
  // The CPU's fusion of a following ReLU; here the ReLU stays a launch of its own.
  if (!grad && s.attrs->s("activation", "none") != "none")
    return "takes no fused activation: the ReLU after it runs on its own";
  if (s.attrs->b("sync") && s.comm && s.comm->size() > 1)
    return "a BatchNorm synchronised across ranks runs on CPU ranks only";
  if (std::string e = declineNonFloat(s, "cuDNN batch normalisation"); !e.empty()) return e;
  BatchNormPlan plan;
  return batchNormPlan(*s.attrs, s.in[grad ? 1 : 0].shape, affineOf(s), grad, plan);
}

int64_t batchNormWorkspace(const KernelSig& s, bool grad) {
  BatchNormPlan plan;
  batchNormPlan(*s.attrs, s.in[grad ? 1 : 0].shape, affineOf(s), grad, plan);
  return plan.workspaceBytes;
}

// Binds the handle to the stream and fills the unit scale and zero shift a BatchNorm
// without parameters hands cuDNN; returns the workspace.
char* beginBatchNorm(const CudnnBatchNorm& c, const KernelIO& io, cudaStream_t st) {
  const BatchNormPlan& p = c.plan;
  NL_CUDNN(cudnnSetStream(c.handle, st));
  char* ws = static_cast<char*>(io.workspace);
  if (io.workspaceBytes < p.workspaceBytes)
    throw CudaError("batch normalisation's per-channel workspace is missing");
  if (p.onesOffset >= 0) fillFloats(reinterpret_cast<float*>(ws + p.onesOffset), 1.f, p.c, st);
  if (p.zerosOffset >= 0)
    NL_CUDA(cudaMemsetAsync(ws + p.zerosOffset, 0, size_t(p.c) * sizeof(float), st));
  return ws;
}

KernelFn batchNorm(const KernelSig& s) {
  std::shared_ptr<CudnnBatchNorm> c = buildBatchNorm(s, false);
  cudaStream_t st = streamOf(s);
  return [c, st](const KernelIO& io) {
    const BatchNormPlan& p = c->plan;
    char* ws = beginBatchNorm(*c, io, st);
    int rm = p.affine ? 3 : 1, rv = rm + 1;
    const void* scale = p.affine ? io.in[1].data : ws + p.onesOffset;
    const void* shift = p.affine ? io.in[2].data : ws + p.zerosOffset;
    float* mean = io.out[1].f32();
    float* var = io.out[2].f32();
    float one = 1.f, zero = 0.f;
    if (!io.ctx || io.ctx->training) {
      float* invStd = reinterpret_cast<float*>(ws + p.invStdOffset);
      NL_CUDNN(cudnnBatchNormalizationForwardTraining(
          c->handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, c->x, io.in[0].data, c->x,
          io.out[0].data, c->param, scale, shift, 0.0, nullptr, nullptr, p.eps, mean, invStd));
      invStdToVariance(invStd, var, p.c, p.eps, st);
      updateRunning(p, io.in[rm].f32(), io.in[rv].f32(), mean, var, st);
    } else {
      NL_CUDNN(cudnnBatchNormalizationForwardInference(
          c->handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, c->x, io.in[0].data, c->x,
          io.out[0].data, c->param, scale, shift, io.in[rm].data, io.in[rv].data, p.eps));
      size_t bytes = size_t(p.c) * sizeof(float);
      NL_CUDA(cudaMemcpyAsync(mean, io.in[rm].data, bytes, cudaMemcpyDeviceToDevice, st));
      NL_CUDA(cudaMemcpyAsync(var, io.in[rv].data, bytes, cudaMemcpyDeviceToDevice, st));
    }
  };
}

KernelFn batchNormGrad(const KernelSig& s) {
  std::shared_ptr<CudnnBatchNorm> c = buildBatchNorm(s, true);
  cudaStream_t st = streamOf(s);
  return [c, st](const KernelIO& io) {
    const BatchNormPlan& p = c->plan;
    char* ws = beginBatchNorm(*c, io, st);
    float* invStd = reinterpret_cast<float*>(ws + p.invStdOffset);
    varianceToInvStd(io.in[3].f32(), invStd, p.c, p.eps, st);
    const void* scale = p.affine ? io.in[4].data : ws + p.onesOffset;
    float one = 1.f, zero = 0.f;
    NL_CUDNN(cudnnBatchNormalizationBackward(c->handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one,
                                             &zero, c->x, io.in[1].data, c->x, io.in[0].data, c->x,
                                             io.out[0].data, c->param, scale, io.out[1].data,
                                             io.out[2].data, p.eps, io.in[2].data, invStd));
  };
}

KernelImpl batchNormKernel(const char* name, bool grad) {
  KernelImpl k{name, [grad](const KernelSig& s) { return declineBatchNorm(s, grad); },
               [grad](const KernelSig& s) { return grad ? batchNormGrad(s) : batchNorm(s); }};
  k.workspace = [grad](const KernelSig& s) { return batchNormWorkspace(s, grad); };
  k.detail = [grad](const KernelSig&) -> std::string {
    return grad ? "cuDNN spatial batch normalisation backward from the saved mean and variance"
                : "cuDNN spatial batch normalisation; running statistics updated as on the CPU";
  };
  return k;
}

// Softmax -------------------------------------------------------------------------------

// Softmax: (x) -> y; SoftmaxGrad: (dy, y) -> dx, along the same axis.
KernelImpl softmaxKernel(const char* name, bool grad) {
  auto decline = [](const KernelSig& s) {
    if (std::string e = declineNonFloat(s, "cuDNN softmax"); !e.empty()) return e;
    SoftmaxPlan p;
    return softmaxPlan(s.in[0].shape, s.attrs->i("axis", -1), p);
  };
  auto prepare = [grad](const KernelSig& s) -> KernelFn {
    SoftmaxPlan p;
    if (std::string e = softmaxPlan(s.in[0].shape, s.attrs->i("axis", -1), p); !e.empty())
      throw CudaError(e);
    auto x = std::make_shared<CudnnTensor>();
    setTensor4d(*x, p.n, p.c, p.h, 1);
    cudnnHandle_t h = cudnnFor(s);
    cudaStream_t st = streamOf(s);
    return [x, h, st, grad](const KernelIO& io) {
      float one = 1.f, zero = 0.f;
      NL_CUDNN(cudnnSetStream(h, st));
      if (!grad)
        NL_CUDNN(cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one,
                                     *x, io.in[0].data, &zero, *x, io.out[0].data));
      else
        NL_CUDNN(cudnnSoftmaxBackward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one,
                                      *x, io.in[1].data, *x, io.in[0].data, &zero, *x,
                                      io.out[0].data));
    };
  };
  KernelImpl k{name, decline, prepare};
  k.detail = [](const KernelSig&) { return std::string("cuDNN accurate softmax, channel mode"); };
  return k;
}

}  // namespace

void registerPoolNorm(KernelRegistry& r) {
  auto cuda = DeviceKind::Cuda;
  r.add("MaxPool2d", cuda, poolKernel("cudnn.pooling_max", false, false));
  r.add("MaxPool2dGrad", cuda, poolKernel("cudnn.pooling_max_backward", false, true));
  r.add("AvgPool2d", cuda, poolKernel("cudnn.pooling_avg", true, false));
  r.add("AvgPool2dGrad", cuda, poolKernel("cudnn.pooling_avg_backward", true, true));
  r.add("BatchNorm", cuda, batchNormKernel("cudnn.batch_norm", false));
  r.add("BatchNormGrad", cuda, batchNormKernel("cudnn.batch_norm_backward", true));
  r.add("Softmax", cuda, softmaxKernel("cudnn.softmax", false));
  r.add("SoftmaxGrad", cuda, softmaxKernel("cudnn.softmax_backward", true));
}

}  // namespace netloom::cuda
