#include "kernels/cuda/plans.h"

#include <climits>

#include "kernels/core/geometry.h"

namespace netloom::cuda {

namespace {
// Every dimension but the last: the rows of a tensor viewed as a matrix (a zero-wide
// last dimension still has its rows).
int64_t rowsOf(const Shape& s) {
  return numel(Shape(s.begin(), s.end() - 1));
}
}  // namespace

GemmPlan matmulPlan(const Shape& a, const Shape& b, bool transA, bool transB) {
  int64_t aCols = a.back(), aRows = rowsOf(a);
  int64_t bCols = b.back(), bRows = rowsOf(b);
  int64_t m = transA ? aCols : aRows, n = transB ? bRows : bCols, k = transA ? aRows : aCols;
  GemmPlan p;
  // A row-major r × c matrix is a column-major c × r one with the same leading dimension.
  p.a = {bCols, bRows, bCols};
  p.b = {aCols, aRows, aCols};
  p.d = {n, m, n};
  p.transA = transB;
  p.transB = transA;
  p.m = n, p.n = m, p.k = k;
  return p;
}

GemmPlan linearPlan(const Shape& x, const Shape& weight, bool bias, bool relu) {
  GemmPlan p = matmulPlan(x, weight, false, true);
  p.epilogue = bias ? (relu ? Epilogue::ReluBias : Epilogue::Bias)
                    : (relu ? Epilogue::Relu : Epilogue::Default);
  return p;
}

std::string epilogueName(Epilogue e) {
  switch (e) {
    case Epilogue::Default: return "no epilogue";
    case Epilogue::Bias: return "bias epilogue";
    case Epilogue::Relu: return "ReLU epilogue";
    case Epilogue::ReluBias: return "bias+ReLU epilogue";
  }
  return {};
}

std::string fitsCudnn(const Shape& s, const std::string& what) {
  std::optional<int64_t> count = checkedNumel(s);
  if (!count || *count > INT_MAX)
    return what + " " + shapeToString(s) +
           " has more than 2^31 - 1 elements, which cuDNN's descriptors cannot index";
  return {};
}

std::string ConvPlan::key() const {
  std::string k;
  for (int64_t v : {int64_t(call),
                    n,
                    ci,
                    co,
                    groups,
                    ih,
                    iw,
                    oh,
                    ow,
                    kh,
                    kw,
                    strideH,
                    strideW,
                    dilationH,
                    dilationW,
                    padH,
                    padW,
                    stagedH,
                    stagedW,
                    stageTop,
                    stageLeft})
    k += std::to_string(v) + ",";
  return k;
}

ConvBf16Copies convBf16Copies(const ConvPlan& p, bool xBf16, bool wBf16, bool yBf16) {
  ConvBf16Copies c;
  c.xElements = p.n * p.ci * p.ih * p.iw;
  c.wElements = p.co * (p.groups > 0 ? p.ci / p.groups : 0) * p.kh * p.kw;
  c.yElements = p.n * p.co * p.oh * p.ow;
  auto place = [&](bool bf16, int64_t elements, int64_t& at) {
    if (bf16) return;
    at = c.bytes;
    c.bytes += alignLibrary(elements * int64_t(sizeof(uint16_t)));
  };
  place(xBf16, c.xElements, c.x);
  place(wBf16, c.wElements, c.w);
  place(yBf16, c.yElements, c.y);
  return c;
}

std::string convPlan(const Attrs& attrs, const std::vector<Shape>& in, bool transposed,
                     ConvPass pass, ConvPlan& p) {
  int xi = pass == ConvPass::Forward ? 0 : 1, wi = xi + 1;
  const Shape& x = in[size_t(xi)];
  const Shape& weight = in[size_t(wi)];
  Window2d w;
  if (std::string e = transposed ? convTransposeWindow(attrs, x, w) : convWindow(attrs, x, w);
      !e.empty())
    return e;
  p = ConvPlan{};
  p.groups = attrs.i("groups", 1);
  p.n = w.n;
  p.kh = w.kh, p.kw = w.kw, p.strideH = w.sh, p.strideW = w.sw;
  p.dilationH = w.dh, p.dilationW = w.dw;
  // The op's window geometry is (input x, output y); the transposed op's is the
  // convolution's the other way round.
  if (!transposed) {
    p.ci = x[1], p.co = weight[0];
    p.ih = w.ih, p.iw = w.iw, p.oh = w.oh, p.ow = w.ow;
  } else {
    p.ci = weight[1] * p.groups, p.co = x[1];
    p.ih = w.oh, p.iw = w.ow, p.oh = w.ih, p.ow = w.iw;
  }
  // The op reads rows -padTop … ih + padBottom - 1 of its input side; cuDNN reads
  // -padH … stagedH + padH - 1 of the staged copy, whose row r is row r - stageTop.
  auto stage = [](int64_t in, int64_t before, int64_t after, int64_t& pad, int64_t& staged,
                  int64_t& offset) {
    pad = std::max<int64_t>(0, std::min(before, after));
    offset = before - pad;
    staged = in + before + after - 2 * pad;
  };
  stage(p.ih, w.padTop, w.padBottom, p.padH, p.stagedH, p.stageTop);
  stage(p.iw, w.padLeft, w.padRight, p.padW, p.stagedW, p.stageLeft);
  if (pass == ConvPass::Forward && in.size() > 2) p.bias = 2;
  // (x, w, y) of the cuDNN call; the gradients' inputs are (dy, x, weight).
  if (!transposed) {
    switch (pass) {
      case ConvPass::Forward: p.call = ConvCall::Forward, p.x = 0, p.w = 1, p.y = kOpOutput; break;
      case ConvPass::GradInput:
        p.call = ConvCall::BackwardData, p.x = kOpOutput, p.w = 2, p.y = 0;
        break;
      case ConvPass::GradWeight:
        p.call = ConvCall::BackwardFilter, p.x = 1, p.w = kOpOutput, p.y = 0;
        break;
    }
  } else {
    switch (pass) {
      case ConvPass::Forward:
        p.call = ConvCall::BackwardData, p.x = kOpOutput, p.w = 1, p.y = 0;
        break;
      case ConvPass::GradInput:
        p.call = ConvCall::Forward, p.x = 0, p.w = 2, p.y = kOpOutput;
        break;
      case ConvPass::GradWeight:
        p.call = ConvCall::BackwardFilter, p.x = 0, p.w = kOpOutput, p.y = 1;
        break;
    }
  }
  if (p.stagedH < 1 || p.stagedW < 1)
    return "the padding leaves no input rows or columns for cuDNN";
  for (const auto& [shape, what] :
       {std::pair{Shape{p.n, p.ci, std::max(p.ih, p.stagedH), std::max(p.iw, p.stagedW)},
                  std::string("the convolution input")},
        {Shape{p.n, p.co, p.oh, p.ow}, "the convolution output"},
        {Shape{p.co, p.ci / p.groups, p.kh, p.kw}, "the filter"}})
    if (std::string e = fitsCudnn(shape, what); !e.empty()) return e;
  return {};
}

std::string poolPlan(const Attrs& attrs, const Shape& x, bool average, PoolPlan& p) {
  Window2d w;
  if (std::string e = poolWindow(attrs, x, w); !e.empty()) return e;
  p = PoolPlan{};
  p.mode = !average                             ? PoolMode::Max
           : attrs.b("count_include_pad", true) ? PoolMode::AverageIncludePad
                                                : PoolMode::AverageExcludePad;
  p.n = w.n, p.c = w.c, p.ih = w.ih, p.iw = w.iw, p.oh = w.oh, p.ow = w.ow;
  p.kh = w.kh, p.kw = w.kw, p.strideH = w.sh, p.strideW = w.sw;
  p.padH = w.padTop, p.padW = w.padLeft;
  // poolWindow widens the bottom/right padding only for a window ceil_mode adds past
  // the padding. cuDNN pads symmetrically and sizes outputs rounding down.
  if (w.padBottom != w.padTop || w.padRight != w.padLeft)
    return "ceil_mode adds a window reaching past the padding here (output " +
           std::to_string(w.oh) + "×" + std::to_string(w.ow) +
           "), which cuDNN's pooling cannot express: it pads symmetrically and rounds "
           "output sizes down";
  if (std::string e = fitsCudnn(x, "the input"); !e.empty()) return e;
  return {};
}

std::string batchNormPlan(const Attrs& attrs, const Shape& x, bool affine, bool grad,
                          BatchNormPlan& p) {
  if (x.size() < 2) return "expects N × C or N × C × …, got " + shapeToString(x);
  p = BatchNormPlan{};
  p.n = x[0], p.c = x[1];
  for (size_t i = 2; i < x.size(); ++i) p.s *= x[i];
  p.affine = affine;
  p.eps = attrs.f("eps", 1e-5);
  p.momentum = attrs.f("momentum", 0.1);
  int64_t perChannel = alignLibrary(p.c * int64_t(sizeof(float)));
  p.invStdOffset = 0;
  p.workspaceBytes = perChannel;
  if (!affine) {
    p.onesOffset = p.workspaceBytes;
    p.workspaceBytes += perChannel;
    if (!grad) {  // the backward takes no shift
      p.zerosOffset = p.workspaceBytes;
      p.workspaceBytes += perChannel;
    }
  }
  if (std::string e = fitsCudnn(x, "the input"); !e.empty()) return e;
  // cuDNN's spatial batch norm is not trusted past 65,535 samples in inference (its
  // grid limits; PyTorch leaves it there too), and this kernel serves both modes.
  if (p.n > kMaxBatchNormSamples)
    return "cuDNN's batch norm takes at most " + std::to_string(kMaxBatchNormSamples) +
           " samples in evaluation, the batch has " + std::to_string(p.n);
  return {};
}

std::string softmaxPlan(const Shape& x, int64_t axis, SoftmaxPlan& p) {
  int64_t rank = int64_t(x.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return "axis out of range for " + shapeToString(x);
  p = SoftmaxPlan{1, x[size_t(axis)], 1};
  for (int64_t i = 0; i < axis; ++i) p.n *= x[size_t(i)];
  for (int64_t i = axis + 1; i < rank; ++i) p.h *= x[size_t(i)];
  return fitsCudnn(x, "the input");
}

int chooseAlgorithm(const std::vector<AlgoCandidate>& candidates, bool preferDeterministic,
                    int64_t workspaceCap, bool tensorOps) {
  int first = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const AlgoCandidate& c = candidates[i];
    if (!c.available || (c.tensorOps && !tensorOps) || c.workspace > workspaceCap) continue;
    if (!preferDeterministic || c.deterministic) return int(i);
    if (first < 0) first = int(i);
  }
  return first;
}

}  // namespace netloom::cuda
