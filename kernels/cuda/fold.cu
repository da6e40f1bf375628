// BatchNorm folded into the layer before it, for evaluation plans: the folded weight
// and bias from kernels/core/functors.h's FoldBatchNorm, as the CPU computes them.
#include "kernels/core/functors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/launch.h"

namespace netloom::cuda {
namespace {

struct FoldArgs {
  const float *w, *mean, *var, *b, *gamma, *beta;
  float *wOut, *bOut;
  int64_t channels, row;
};

__global__ void foldBatchNormKernel(FoldArgs a, fn::FoldBatchNorm fold) {
  const int64_t n = a.channels * a.row;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i / a.row;
    const float s = fold.scale(a.var[c], a.gamma ? a.gamma[c] : 1.f);
    a.wOut[i] = a.w[i] * s;
    if (i % a.row == 0)
      a.bOut[c] = fold.bias(a.b ? a.b[c] : 0.f, a.mean[c], s, a.beta ? a.beta[c] : 0.f);
  }
}

// Inputs weight, running_mean, running_var, [bias], [γ, β]; outputs weight, bias.
KernelFn foldBatchNorm(const KernelSig& s) {
  const int64_t c = s.in[0].shape[0], row = numel(s.in[0].shape) / std::max<int64_t>(1, c);
  const bool bias = s.attrs->b("bias"), affine = s.attrs->b("affine");
  const int at = bias ? 4 : 3;
  const fn::FoldBatchNorm fold{s.attrs->f("eps", 1e-5)};
  cudaStream_t st = streamOf(s);
  return [=](const KernelIO& io) {
    FoldArgs a{io.in[0].f32(),
               io.in[1].f32(),
               io.in[2].f32(),
               bias ? io.in[3].f32() : nullptr,
               affine ? io.in[at].f32() : nullptr,
               affine ? io.in[at + 1].f32() : nullptr,
               io.out[0].f32(),
               io.out[1].f32(),
               c,
               row};
    if (c * row == 0) return;
    foldBatchNormKernel<<<gridFor(c * row), kBlock, 0, st>>>(a, fold);
  };
}

}  // namespace

void registerFold(KernelRegistry& r) {
  KernelImpl k = plainKernel("cuda.fold_batch_norm", foldBatchNorm);
  k.decline = [](const KernelSig& s) -> std::string {
    for (const TensorDesc& t : s.in)
      if (t.dtype != DType::F32 || t.layout != Layout::Plain) return "takes plain float tensors";
    return {};
  };
  r.add("FoldBatchNorm", DeviceKind::Cuda, std::move(k));
}

}  // namespace netloom::cuda
