// Host-side plans of the CUDA backend's library kernels: how an op's shapes and
// attributes map onto cuBLASLt matrix layouts and cuDNN descriptors, which
// configurations the libraries cannot take (and why), and how an algorithm is chosen.
// Plain C++ without CUDA headers, so that CPU tests check every mapping on machines
// with no GPU; the kernels in gemm.cpp, cudnn_conv.cpp and cudnn_pool_norm.cpp only
// turn these plans into library calls.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/attrs.h"
#include "kernels/core/functors.h"
#include "kernels/core/hd.h"
#include "kernels/core/tensor.h"

namespace netloom::cuda {

// Workspace pieces start on the boundary cuBLASLt and cuDNN read fastest from.
constexpr int64_t kLibraryAlignment = 256;
inline int64_t alignLibrary(int64_t bytes) {
  return (bytes + kLibraryAlignment - 1) / kLibraryAlignment * kLibraryAlignment;
}

// The most workspace an algorithm may ask for: a faster algorithm that needs more
// would make the plan's fit check refuse models that fit with a slower one.
constexpr int64_t kConvWorkspaceCap = int64_t(256) << 20;
constexpr int64_t kGemmWorkspaceCap = int64_t(32) << 20;

// GEMM ----------------------------------------------------------------------------
// cuBLASLt is column-major. A row-major product Y = op(A)·op(B) is computed as
// Yᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's first operand is our B and its second our A, each
// read in place as the column-major transpose of how it is stored.

enum class Epilogue { Default, Bias, Relu, ReluBias };

struct LtMatrix {  // a column-major matrix as cuBLASLt describes it
  int64_t rows = 0, cols = 0, ld = 0;
  bool operator==(const LtMatrix&) const = default;
};

struct GemmPlan {
  LtMatrix a, b, d;                     // cuBLASLt's A (our B), B (our A) and D (Yᵀ)
  bool transA = false, transB = false;  // cuBLASLt's op(A), op(B)
  int64_t m = 0, n = 0, k = 0;          // D is m × n (our n × m), over k
  Epilogue epilogue = Epilogue::Default;
};

// MatMul: op(A)·op(B) over tensors viewed as rows × last dimension (engine/ops/matmul).
GemmPlan matmulPlan(const Shape& a, const Shape& b, bool transA, bool transB);
// Linear: y = x·Wᵀ (+ b) (then ReLU), W stored [out, in]. The bias runs along
// D's rows (the output features), which is how cuBLASLt's BIAS epilogue broadcasts.
GemmPlan linearPlan(const Shape& x, const Shape& weight, bool bias, bool relu);
std::string epilogueName(Epilogue e);  // for --explain

// A copy between two stacks of planes of different sizes, one shifted against the
// other: dst(y, x) = src(y - offsetY, x - offsetX), zero where that lies outside the
// source. Stages a convolution's input side in and out of the workspace.
struct RegionCopy {
  int64_t srcH = 0, srcW = 0, dstH = 0, dstW = 0, offsetY = 0, offsetX = 0;
  // The source index of destination element i, or -1 where it is zero.
  NL_HD int64_t source(int64_t i) const {
    int64_t x = i % dstW, t = i / dstW, y = t % dstH, plane = t / dstH;
    int64_t sy = y - offsetY, sx = x - offsetX;
    return sy >= 0 && sy < srcH && sx >= 0 && sx < srcW ? (plane * srcH + sy) * srcW + sx : -1;
  }
};

// Convolutions ----------------------------------------------------------------------

// The three cuDNN convolution calls, and the three ops of a convolution family.
enum class ConvCall { Forward, BackwardData, BackwardFilter };
enum class ConvPass { Forward, GradInput, GradWeight };

// Where a tensor of a cuDNN call comes from: an input of the op, or its output.
constexpr int kOpOutput = -1;

// One op as one cuDNN call on a convolution: "x" is the convolution's input side,
// "y" its output side and "w" the filter [co, ci/groups, kh, kw], for both Conv2d and
// ConvTranspose2d (whose weight is stored [in, out/groups, kh, kw], which is the
// filter of the convolution it transposes). A transposed convolution is that
// convolution's backward-data pass, its input gradient the convolution's forward and
// its weight gradient the backward-filter pass with x and dy in swapped roles.
struct ConvPlan {
  ConvCall call = ConvCall::Forward;
  int x = 0, w = 1, y = kOpOutput;  // input indices or kOpOutput
  int bias = -1;                    // input added per channel to the op's output, or -1
  int64_t n = 0, ci = 0, co = 0, groups = 1;
  int64_t ih = 0, iw = 0;  // the convolution's input as its tensor stores it
  int64_t oh = 0, ow = 0;  // its output
  int64_t kh = 1, kw = 1, strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  // cuDNN pads symmetrically. Where the op pads unevenly ("same" padding, or a
  // transposed convolution's output_padding), cuDNN is given padding padH/padW on both
  // sides of a staged copy of the input side in the workspace: stagedH × stagedW, the
  // tensor placed stageTop/stageLeft rows/columns down/right of its corner, with zeros
  // where the op pads more than padH/padW, and cut where its padding is negative.
  int64_t padH = 0, padW = 0;
  int64_t stagedH = 0, stagedW = 0, stageTop = 0, stageLeft = 0;

  bool staged() const { return stagedH != ih || stagedW != iw || stageTop != 0 || stageLeft != 0; }
  int64_t stagedBytes() const {
    return staged() ? alignLibrary(n * ci * stagedH * stagedW * int64_t(sizeof(float))) : 0;
  }
  // Whether the call writes the input side (then the staged copy is copied back).
  bool writesInput() const { return x == kOpOutput; }
  std::string key() const;      // identifies the configuration, for caching algorithm choices
  RegionCopy stageIn() const;   // the input side's tensor into the staged copy
  RegionCopy stageOut() const;  // and back
};

// The plan for an op of the family (inputs in the op's order: (x, weight[, bias]) for
// the forward, (dy, x, weight) for the gradients), or the reason cuDNN cannot take it.
std::string convPlan(const Attrs& attrs, const std::vector<Shape>& in, bool transposed,
                     ConvPass pass, ConvPlan& plan);

inline RegionCopy ConvPlan::stageIn() const {
  return {ih, iw, stagedH, stagedW, stageTop, stageLeft};
}
inline RegionCopy ConvPlan::stageOut() const {
  return {stagedH, stagedW, ih, iw, -stageTop, -stageLeft};
}

// A convolution on bf16 tensors (bf16 storage; Conv2d and its gradients): cuDNN reads
// and writes the call's x, w and y in bf16 and computes in float. Each of the three
// whose op tensor is float gets a bf16 copy in the launch's workspace, after the
// algorithm's: an input is rounded into it before the call (exactly: autocast has
// rounded its values), the output widened from it after.
struct ConvBf16Copies {
  int64_t xElements = 0, wElements = 0, yElements = 0;
  int64_t x = -1, w = -1, y = -1;  // byte offsets of the copies; -1: the op's tensor is bf16
  int64_t bytes = 0;               // of the copies together
};
ConvBf16Copies convBf16Copies(const ConvPlan& p, bool xBf16, bool wBf16, bool yBf16);

// Pooling ----------------------------------------------------------------------------

enum class PoolMode { Max, AverageIncludePad, AverageExcludePad };

struct PoolPlan {
  PoolMode mode = PoolMode::Max;
  int64_t n = 0, c = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, strideH = 1, strideW = 1, padH = 0, padW = 0;
};

// The plan for MaxPool2d/AvgPool2d over x (N×C×H×W), or why cuDNN cannot take it.
std::string poolPlan(const Attrs& attrs, const Shape& x, bool average, PoolPlan& plan);

// Batch normalisation ----------------------------------------------------------------

// x viewed as N × C × S × 1, which cuDNN's spatial mode normalises per channel over
// N·S: the same statistics for N × C, N × C × L and N × C × H × W.
// The largest batch cuDNN's batch norm is given (see batchNormPlan).
constexpr int64_t kMaxBatchNormSamples = 65535;

struct BatchNormPlan {
  int64_t n = 0, c = 0, s = 1;
  bool affine = true;
  double eps = 1e-5, momentum = 0.1;
  // The running statistics are updated by fn::RunningAverage, as on the CPU, not by
  // cuDNN: the variance enters unbiased, or biased where a channel has one element.
  fn::RunningAverage runningMean() const { return {momentum, 1.0}; }
  fn::RunningAverage runningVariance() const {
    return {momentum, n * s > 1 ? double(n * s) / double(n * s - 1) : 1.0};
  }
  // Per-channel pieces of the workspace: the inverse standard deviation cuDNN works
  // with, and the unit scale and zero shift a non-affine BatchNorm passes it.
  int64_t invStdOffset = 0, onesOffset = -1, zerosOffset = -1, workspaceBytes = 0;
};

// BatchNorm (x, [weight, bias], running_mean, running_var) or BatchNormGrad (dy, x,
// mean, var, [weight]); `grad` picks which. Empty, or why cuDNN cannot take it.
std::string batchNormPlan(const Attrs& attrs, const Shape& x, bool affine, bool grad,
                          BatchNormPlan& plan);

// The op keeps the batch's biased variance, cuDNN its inverse standard deviation
// 1/√(var + eps): one per channel, converted both ways in double.
struct InvStdToVariance {
  double eps;
  NL_HD float operator()(float invStd) const {
    double v = 1.0 / (double(invStd) * double(invStd)) - eps;
    return float(v > 0.0 ? v : 0.0);
  }
};
struct VarianceToInvStd {
  double eps;
  NL_HD float operator()(float var) const { return float(1.0 / sqrt(double(var) + eps)); }
};

// Softmax ----------------------------------------------------------------------------

// Softmax along one axis as cuDNN's channel mode: N = the dimensions before the axis,
// C = the axis, H = the dimensions after it, W = 1.
struct SoftmaxPlan {
  int64_t n = 1, c = 1, h = 1;
};
std::string softmaxPlan(const Shape& x, int64_t axis, SoftmaxPlan& plan);

// Algorithms ---------------------------------------------------------------------------

// One algorithm a library's heuristics propose, in the order they rank them.
struct AlgoCandidate {
  int algo = 0;
  bool available = false;      // the library can run it for this configuration
  bool deterministic = false;  // the same bits on every run
  bool tensorOps = false;      // would use TF32 tensor cores on float32 data
  int64_t workspace = 0;
};

// The index of the candidate to use, or -1: the best-ranked available one that needs
// at most `workspaceCap` bytes and no tensor-core math (unless `tensorOps`), the
// best-ranked deterministic one among those when `preferDeterministic`.
int chooseAlgorithm(const std::vector<AlgoCandidate>& candidates, bool preferDeterministic,
                    int64_t workspaceCap, bool tensorOps = false);

// Why a tensor of `what` cannot be described to cuDNN, whose descriptors count and
// stride in int: empty where every element index fits.
std::string fitsCudnn(const Shape& s, const std::string& what);

}  // namespace netloom::cuda
