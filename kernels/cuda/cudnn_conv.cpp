// Convolutions on cuDNN 9: Conv2d, ConvTranspose2d and their input and weight
// gradients, each one cuDNN call (forward, backward-data or backward-filter) with the
// roles plans.h assigns, plus cudnnAddTensor for a forward op's bias. FMA math only
// (no TF32), as on the CPU; under bf16 storage, Conv2d's passes on bf16 tensors. The algorithm is
// chosen at plan time from cuDNN's heuristics (deterministic ones first for the backward passes,
// whose CPU kernels are deterministic) and cached per configuration and device, so the workspace
// the plan reserves and the algorithm a launch runs are the same.
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/library.h"

namespace netloom::cuda {
namespace {

struct AlgoChoice {
  int algo = 0;
  int64_t bytes = 0;
  bool deterministic = false;
};

// The descriptors of one op's call, and its algorithm.
struct CudnnConv {
  ConvPlan plan;
  bool tf32 = false;      // under autocast: its 16-bit inputs are exact in TF32
  bool bf16 = false;      // x, w and y in bf16 (bf16 storage), computed in float
  ConvBf16Copies copies;  // the bf16 copies of the op's float tensors among them
  cudnnHandle_t handle = nullptr;
  CudnnTensor x, y, out, bias;  // out: the op's whole output, which the bias is added to
  CudnnFilter w;
  CudnnConvolution conv;
  AlgoChoice choice;

  int64_t workspaceBytes() const {
    return alignLibrary(choice.bytes) + plan.stagedBytes() + copies.bytes;
  }
};

template <class Perf>
AlgoCandidate candidateOf(const Perf& p) {
  AlgoCandidate c;
  c.algo = int(p.algo);
  c.available = p.status == CUDNN_STATUS_SUCCESS;
  c.deterministic = p.determinism == CUDNN_DETERMINISTIC;
  c.tensorOps =
      p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  c.workspace = int64_t(p.memory);
  return c;
}

// One call's heuristics, best first, each available algorithm with the workspace
// cuDNN states for it: maxCount(&n), propose(n, &got, perf), bytes(algo, &size).
template <class Perf, class MaxCount, class Propose, class Bytes>
void collect(std::vector<AlgoCandidate>& out, const char* heuristic, MaxCount maxCount,
             Propose propose, Bytes bytes) {
  int max = 0, got = 0;
  check(maxCount(&max), heuristic);
  std::vector<Perf> perf(size_t(std::max(max, 1)));
  check(propose(max, &got, perf.data()), heuristic);
  for (int i = 0; i < got; ++i) {
    AlgoCandidate a = candidateOf(perf[size_t(i)]);
    size_t size = 0;
    if (a.available && bytes(perf[size_t(i)].algo, &size) == CUDNN_STATUS_SUCCESS)
      a.workspace = int64_t(size);
    else
      a.available = false;
    out.push_back(a);
  }
}

std::vector<AlgoCandidate> candidates(const CudnnConv& c) {
  std::vector<AlgoCandidate> out;
  cudnnHandle_t h = c.handle;
  switch (c.plan.call) {
    case ConvCall::Forward:
      collect<cudnnConvolutionFwdAlgoPerf_t>(
          out, "cudnnGetConvolutionForwardAlgorithm_v7",
          [&](int* n) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); },
          [&](int n, int* got, auto* perf) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, c.x, c.w, c.conv, c.y, n, got, perf);
          },
          [&](auto algo, size_t* size) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, c.x, c.w, c.conv, c.y, algo, size);
          });
      break;
    case ConvCall::BackwardData:
      collect<cudnnConvolutionBwdDataAlgoPerf_t>(
          out, "cudnnGetConvolutionBackwardDataAlgorithm_v7",
          [&](int* n) { return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n); },
          [&](int n, int* got, auto* perf) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c.w, c.y, c.conv, c.x, n, got,
                                                               perf);
          },
          [&](auto algo, size_t* size) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, c.w, c.y, c.conv, c.x, algo,
                                                                size);
          });
      break;
    case ConvCall::BackwardFilter:
      collect<cudnnConvolutionBwdFilterAlgoPerf_t>(
          out, "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
          [&](int* n) { return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n); },
          [&](int n, int* got, auto* perf) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, c.x, c.y, c.conv, c.w, n, got,
                                                                 perf);
          },
          [&](auto algo, size_t* size) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c.x, c.y, c.conv, c.w, algo,
                                                                  size);
          });
      break;
  }
  return out;
}

const char* callName(ConvCall call) {
  switch (call) {
    case ConvCall::Forward: return "forward";
    case ConvCall::BackwardData: return "backward-data";
    case ConvCall::BackwardFilter: return "backward-filter";
  }
  return "";
}

// Asked once per configuration and device: the heuristics' answer must not change
// between workspace() and prepare().
AlgoChoice choose(const CudnnConv& c, int device) {
  static std::mutex mutex;
  static std::map<std::string, AlgoChoice> cache;
  std::string key =
      std::to_string(device) + (c.tf32 ? ":tf32:" : ":") + (c.bf16 ? "bf16:" : "") + c.plan.key();
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::vector<AlgoCandidate> all = candidates(c);
  const bool tensorOps = c.tf32 || c.bf16;
  int i = chooseAlgorithm(all, c.plan.call != ConvCall::Forward, kConvWorkspaceCap, tensorOps);
  if (i < 0)
    throw CudaError(std::string("cuDNN proposes no ") + callName(c.plan.call) + " algorithm" +
                    (c.bf16      ? " on bf16"
                     : tensorOps ? ""
                                 : " without TF32") +
                    " within " + std::to_string(kConvWorkspaceCap >> 20) + " MiB of workspace");
  AlgoChoice choice{all[size_t(i)].algo, all[size_t(i)].workspace, all[size_t(i)].deterministic};
  cache[key] = choice;
  return choice;
}

std::string planOf(const KernelSig& s, bool transposed, ConvPass pass, ConvPlan& plan) {
  std::vector<Shape> in;
  for (const TensorDesc& t : s.in) in.push_back(t.shape);
  return convPlan(*s.attrs, in, transposed, pass, plan);
}

// The type of the op's tensor in one of the call's roles (plan.x, plan.w, plan.y).
DType roleType(const KernelSig& s, int slot) {
  return slot == kOpOutput ? s.out[0].dtype : s.in[size_t(slot)].dtype;
}

std::shared_ptr<CudnnConv> build(const KernelSig& s, bool transposed, ConvPass pass,
                                 bool bf16 = false) {
  auto c = std::make_shared<CudnnConv>();
  if (std::string e = planOf(s, transposed, pass, c->plan); !e.empty()) throw CudaError(e);
  const ConvPlan& p = c->plan;
  c->handle = cudnnFor(s);
  c->bf16 = bf16;
  c->tf32 = s.autocast && !bf16;
  const cudnnDataType_t data = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  if (bf16)
    c->copies = convBf16Copies(p, roleType(s, p.x) == DType::BF16, roleType(s, p.w) == DType::BF16,
                               roleType(s, p.y) == DType::BF16);
  setTensor4d(c->x, p.n, p.ci, p.stagedH, p.stagedW, data);
  setTensor4d(c->y, p.n, p.co, p.oh, p.ow, data);
  NL_CUDNN(cudnnSetFilter4dDescriptor(c->w, data, CUDNN_TENSOR_NCHW, int(p.co),
                                      int(p.ci / p.groups), int(p.kh), int(p.kw)));
  NL_CUDNN(cudnnSetConvolution2dDescriptor(c->conv, int(p.padH), int(p.padW), int(p.strideH),
                                           int(p.strideW), int(p.dilationH), int(p.dilationW),
                                           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  NL_CUDNN(cudnnSetConvolutionGroupCount(c->conv, int(p.groups)));
  NL_CUDNN(cudnnSetConvolutionMathType(c->conv,
                                       c->tf32 || bf16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  NL_CUDNN(cudnnGetConvolution2dForwardOutputDim(c->conv, c->x, c->w, &on, &oc, &oh, &ow));
  if (on != p.n || oc != p.co || oh != p.oh || ow != p.ow)
    throw CudaError("cuDNN sizes the convolution output " + std::to_string(oh) + "×" +
                    std::to_string(ow) + ", the op " + std::to_string(p.oh) + "×" +
                    std::to_string(p.ow));
  if (p.bias >= 0) {
    const Shape& y = s.out[0].shape;
    setTensor4d(c->out, y[0], y[1], y[2], y[3]);
    setTensor4d(c->bias, 1, y[1], 1, 1);
  }
  c->choice = choose(*c, deviceIndexOf(s));
  return c;
}

std::string decline(const KernelSig& s, bool transposed, ConvPass pass) {
  for (const TensorDesc& t : s.in)
    if (t.dtype != DType::F32) return "cuDNN convolutions here take float32 only";
  ConvPlan plan;
  if (std::string e = planOf(s, transposed, pass, plan); !e.empty()) return e;
  try {
    build(s, transposed, pass);
  } catch (const CudaError& e) {
    return e.what();
  }
  return {};
}

int64_t workspace(const KernelSig& s, bool transposed, ConvPass pass, bool bf16 = false) {
  try {
    return build(s, transposed, pass, bf16)->workspaceBytes();
  } catch (const CudaError&) {
    return 0;  // prepare() fails with the reason, naming the node
  }
}

// Before a launch: the plan reserved the workspace the algorithm asks for (it must, as
// both were asked of one cached choice), and cuDNN runs on the launch's stream.
void startLaunch(const CudnnConv& c, const KernelIO& io, cudaStream_t st) {
  if (io.workspaceBytes < c.workspaceBytes())
    throw CudaError("the cuDNN convolution needs " + std::to_string(c.workspaceBytes()) +
                    " bytes of workspace, the plan reserved " + std::to_string(io.workspaceBytes));
  NL_CUDNN(cudnnSetStream(c.handle, st));
}

// The cuDNN call itself on x, w and y as it reads and writes them (the op's tensors,
// or copies), the algorithm's workspace at the start of `ws`.
void callCudnn(const CudnnConv& c, const void* x, const void* w, const void* y, void* out,
               void* ws) {
  const size_t algoBytes = size_t(c.choice.bytes);
  const auto algo = c.choice.algo;
  float one = 1.f, zero = 0.f;
  switch (c.plan.call) {
    case ConvCall::Forward:
      NL_CUDNN(cudnnConvolutionForward(c.handle, &one, c.x, x, c.w, w, c.conv,
                                       cudnnConvolutionFwdAlgo_t(algo), ws, algoBytes, &zero, c.y,
                                       out));
      break;
    case ConvCall::BackwardData:
      NL_CUDNN(cudnnConvolutionBackwardData(c.handle, &one, c.w, w, c.y, y, c.conv,
                                            cudnnConvolutionBwdDataAlgo_t(algo), ws, algoBytes,
                                            &zero, c.x, out));
      break;
    case ConvCall::BackwardFilter:
      NL_CUDNN(cudnnConvolutionBackwardFilter(c.handle, &one, c.x, x, c.y, y, c.conv,
                                              cudnnConvolutionBwdFilterAlgo_t(algo), ws, algoBytes,
                                              &zero, c.w, out));
      break;
  }
}

// A forward op's bias, added to its float output.
void addBias(const CudnnConv& c, const KernelIO& io) {
  float one = 1.f;
  NL_CUDNN(
      cudnnAddTensor(c.handle, &one, c.bias, io.in[c.plan.bias].data, &one, c.out, io.out[0].data));
}

KernelFn prepare(const KernelSig& s, bool transposed, ConvPass pass) {
  std::shared_ptr<CudnnConv> c = build(s, transposed, pass);
  cudaStream_t st = streamOf(s);
  return [c, st](const KernelIO& io) {
    const ConvPlan& p = c->plan;
    startLaunch(*c, io, st);
    auto at = [&](int slot) { return slot == kOpOutput ? io.out[0].data : io.in[slot].data; };
    char* ws = static_cast<char*>(io.workspace);
    float* stage =
        p.staged() ? reinterpret_cast<float*>(ws + alignLibrary(c->choice.bytes)) : nullptr;
    const int64_t planes = p.n * p.ci;
    // The input side as cuDNN sees it: the tensor, or its staged copy (filled first where
    // the call reads it, copied back where it writes it).
    void* x = stage ? static_cast<void*>(stage) : at(p.x);
    if (stage && !p.writesInput())
      copyRegion(static_cast<const float*>(at(p.x)), stage, planes, p.stageIn(), st);
    callCudnn(*c, x, at(p.w), at(p.y), p.writesInput() ? x : at(kOpOutput), ws);
    if (stage && p.writesInput())
      copyRegion(stage, static_cast<float*>(at(p.x)), planes, p.stageOut(), st);
    if (p.bias >= 0) addBias(*c, io);
  };
}

std::string describe(const KernelSig& s, bool transposed, ConvPass pass, bool bf16 = false) {
  std::shared_ptr<CudnnConv> c = build(s, transposed, pass, bf16);
  const ConvPlan& p = c->plan;
  std::string d = std::string("cuDNN ") + callName(p.call) + " algorithm " +
                  std::to_string(c->choice.algo) +
                  (c->choice.deterministic ? " (deterministic)" : " (not deterministic)") +
                  (bf16      ? ", bf16 tensors on tensor cores, accumulated in float"
                   : c->tf32 ? ", TF32 tensor-core math (exact on autocast's 16-bit inputs)"
                             : ", FMA math (no TF32)") +
                  ", workspace " + std::to_string(c->choice.bytes) + " bytes";
  if (c->copies.bytes > 0) d += "; float tensors converted to bf16 in its workspace";
  if (p.staged())
    d += "; uneven padding staged as a " + std::to_string(p.stagedH) + "×" +
         std::to_string(p.stagedW) + " input";
  return d;
}

// bf16 storage's convolutions (Conv2d and its gradients): cuDNN on bf16 x, w and y
// (tensor cores, sm_80 and newer), accumulated in float. Where the op's tensor in one of
// those roles is float (autocast rounded its values, so the copy is exact), it is
// converted in the workspace. Symmetric padding only: the staged copy is float.
std::string declineBf16(const KernelSig& s, ConvPass pass) {
  if (!hasHalfTensors(s)) return "is for bf16 tensors";
  ConvPlan plan;
  if (std::string e = planOf(s, false, pass, plan); !e.empty()) return e;
  if (plan.staged()) return "pads unevenly, which is staged in float";
  if (plan.bias >= 0 && s.in[size_t(plan.bias)].dtype != DType::F32)
    return "takes a float bias only";
  for (int slot : {plan.x, plan.w, plan.y}) {
    const DType t = roleType(s, slot);
    if (t != DType::F32 && t != DType::BF16) return "takes float32 or bf16 tensors";
  }
  try {
    build(s, false, pass, true);
  } catch (const CudaError& e) {
    return e.what();
  }
  return {};
}

KernelFn prepareBf16(const KernelSig& s, ConvPass pass) {
  std::shared_ptr<CudnnConv> c = build(s, false, pass, true);
  cudaStream_t st = streamOf(s);
  const bool floatOut = s.out[0].dtype == DType::F32;
  return [c, st, floatOut](const KernelIO& io) {
    const ConvPlan& p = c->plan;
    const ConvBf16Copies& k = c->copies;
    startLaunch(*c, io, st);
    char* ws = static_cast<char*>(io.workspace);
    char* copies = ws + alignLibrary(c->choice.bytes);  // never staged
    // A role's bf16 data: the op's own tensor, or its copy (an input rounded into it).
    auto role = [&](int slot, int64_t at, int64_t n) -> void* {
      void* own = slot == kOpOutput ? io.out[0].data : io.in[size_t(slot)].data;
      if (at < 0) return own;
      void* copy = copies + at;
      if (slot != kOpOutput)
        toBf16(static_cast<const float*>(own), static_cast<uint16_t*>(copy), n, st);
      return copy;
    };
    void* x = role(p.x, k.x, k.xElements);
    void* w = role(p.w, k.w, k.wElements);
    void* y = role(p.y, k.y, k.yElements);
    const bool outX = p.x == kOpOutput, outW = p.w == kOpOutput;
    void* out = outX ? x : outW ? w : y;
    callCudnn(*c, x, w, y, out, ws);
    // The output, where the op's tensor is float: widened from its copy.
    if (out != io.out[0].data)
      fromBf16(static_cast<const uint16_t*>(out), io.out[0].f32(),
               outX   ? k.xElements
               : outW ? k.wElements
                      : k.yElements,
               st);
    if (p.bias < 0) return;
    if (floatOut)
      addBias(*c, io);
    else
      addChannelBiasBf16(static_cast<uint16_t*>(io.out[0].data), io.in[p.bias].f32(), p.n, p.co,
                         p.oh * p.ow, st);
  };
}

}  // namespace

void registerConv(KernelRegistry& r) {
  struct Entry {
    const char* op;
    bool transposed;
    ConvPass pass;
    const char* name;
  };
  const Entry entries[] = {
      {"Conv2d", false, ConvPass::Forward, "cudnn.conv_fwd"},
      {"Conv2dGradInput", false, ConvPass::GradInput, "cudnn.conv_bwd_data"},
      {"Conv2dGradWeight", false, ConvPass::GradWeight, "cudnn.conv_bwd_filter"},
      {"ConvTranspose2d", true, ConvPass::Forward, "cudnn.deconv_fwd"},
      {"ConvTranspose2dGradInput", true, ConvPass::GradInput, "cudnn.deconv_bwd_data"},
      {"ConvTranspose2dGradWeight", true, ConvPass::GradWeight, "cudnn.deconv_bwd_filter"},
  };
  for (const Entry& e : entries) {
    bool t = e.transposed;
    ConvPass p = e.pass;
    KernelImpl k{e.name, [t, p](const KernelSig& s) { return decline(s, t, p); },
                 [t, p](const KernelSig& s) { return prepare(s, t, p); }};
    k.workspace = [t, p](const KernelSig& s) { return workspace(s, t, p); };
    k.detail = [t, p](const KernelSig& s) { return describe(s, t, p); };
    r.add(e.op, DeviceKind::Cuda, std::move(k));
    if (t) continue;  // no bf16 transposed convolutions
    KernelImpl half{std::string(e.name) + "_bf16",
                    [p](const KernelSig& s) { return declineBf16(s, p); },
                    [p](const KernelSig& s) { return prepareBf16(s, p); }};
    half.workspace = [p](const KernelSig& s) { return workspace(s, false, p, true); };
    half.detail = [p](const KernelSig& s) { return describe(s, false, p, true); };
    half.halfTensors = true;
    r.add(e.op, DeviceKind::Cuda, std::move(half));
  }
}

}  // namespace netloom::cuda
