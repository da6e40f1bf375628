// Matrix products on cuBLASLt: Linear with its bias and ReLU as cuBLASLt epilogues
// (what the CPU's Linear+ReLU fusion computes in one pass), and MatMul, which
// Linear's backward emits. Float32 with float32 accumulation (CUBLAS_COMPUTE_32F, no
// TF32), as on the CPU; under autocast, whose 16-bit inputs TF32 holds exactly, on
// TF32 tensor cores; with bf16 operands (bf16 storage), on bf16 tensor cores into float. The
// algorithm is chosen once per configuration and device by cuBLASLt's heuristics and cached, so the
// workspace the plan reserves and the algorithm a launch runs are the same.
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/library.h"

namespace netloom::cuda {
namespace {

// Pointers the heuristics assume, and launches must meet: every tensor of a plan
// starts on a 256-byte boundary, so 16 bytes (one float4) leaves room to spare.
constexpr uint32_t kMinAlignment = 16;

cublasLtEpilogue_t epilogueOf(Epilogue e) {
  switch (e) {
    case Epilogue::Default: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool hasBias(Epilogue e) {
  return e == Epilogue::Bias || e == Epilogue::ReluBias;
}

// The descriptors of one product, and the algorithm chosen for it.
struct LtGemm {
  GemmPlan plan;
  bool tf32 = false;
  bool bf16 = false;  // A and B in bf16 (mixed precision's CastBf16), D float
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  int64_t workspace = 0;

  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

struct Choice {
  cublasLtMatmulAlgo_t algo{};
  int64_t workspace = 0;
};

std::string keyOf(int device, const GemmPlan& p, bool tf32, bool bf16) {
  std::string k = std::to_string(device) + (tf32 ? ":tf32:" : ":") + (bf16 ? "bf16:" : "");
  for (int64_t v : {p.a.rows, p.a.cols, p.a.ld, p.b.rows, p.b.cols, p.b.ld, p.d.rows, p.d.cols,
                    p.d.ld, int64_t(p.transA), int64_t(p.transB), int64_t(p.epilogue)})
    k += std::to_string(v) + ",";
  return k;
}

void setOp(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const void* v,
           size_t bytes) {
  NL_CUBLAS(cublasLtMatmulDescSetAttribute(op, attr, v, bytes));
}

// The heuristics' first algorithm for the product, asked once per configuration:
// workspace() and prepare() must agree on it.
Choice choose(const LtGemm& g, int device) {
  static std::mutex mutex;
  static std::map<std::string, Choice> cache;
  std::string key = keyOf(device, g.plan, g.tf32, g.bf16);
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  cublasLtMatmulPreference_t pref = nullptr;
  NL_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      owned(pref, cublasLtMatmulPreferenceDestroy);
  uint64_t cap = uint64_t(kGemmWorkspaceCap);
  NL_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &cap, sizeof(cap)));
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    NL_CUBLAS(
        cublasLtMatmulPreferenceSetAttribute(pref, attr, &kMinAlignment, sizeof(kMinAlignment)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  NL_CUBLAS(
      cublasLtMatmulAlgoGetHeuristic(g.handle, g.op, g.a, g.b, g.d, g.d, pref, 1, &result, &found));
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
    throw CudaError("cuBLASLt has no algorithm for this product (" + epilogueName(g.plan.epilogue) +
                    ")");
  Choice c{result.algo, int64_t(result.workspaceSize)};
  cache[key] = c;
  return c;
}

std::shared_ptr<LtGemm> build(const KernelSig& s, const GemmPlan& plan, bool bf16) {
  auto g = std::make_shared<LtGemm>();
  g->plan = plan;
  g->bf16 = bf16;
  g->tf32 = s.autocast && !bf16;  // bf16 operands run on bf16 tensor cores
  g->handle = cublasLtFor(s);
  NL_CUBLAS(cublasLtMatmulDescCreate(
      &g->op, g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = plan.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = plan.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  setOp(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  setOp(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  cublasLtEpilogue_t epi = epilogueOf(plan.epilogue);
  setOp(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
  if (hasBias(plan.epilogue)) {
    // The heuristics read the bias pointer's alignment only: a stand-in with the
    // alignment launches guarantee, replaced by the real one at each launch.
    const void* standIn = reinterpret_cast<const void*>(uintptr_t(kMinAlignment));
    setOp(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &standIn, sizeof(standIn));
  }
  auto layout = [](cublasLtMatrixLayout_t* l, const LtMatrix& m, cudaDataType_t type) {
    NL_CUBLAS(cublasLtMatrixLayoutCreate(l, type, uint64_t(m.rows), uint64_t(m.cols), m.ld));
  };
  const cudaDataType_t operands = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  layout(&g->a, plan.a, operands);
  layout(&g->b, plan.b, operands);
  layout(&g->d, plan.d, CUDA_R_32F);
  Choice c = choose(*g, deviceIndexOf(s));
  g->algo = c.algo;
  g->workspace = c.workspace;
  return g;
}

GemmPlan planOf(const KernelSig& s, bool linear) {
  if (linear)
    return linearPlan(s.in[0].shape, s.in[1].shape, s.in.size() > 2,
                      s.attrs->s("activation") == "relu");
  return matmulPlan(s.in[0].shape, s.in[1].shape, s.attrs->b("trans_a"), s.attrs->b("trans_b"));
}

bool empty(const GemmPlan& p) {
  return p.m == 0 || p.n == 0 || p.k == 0;
}

// The float kernel takes float tensors; the bf16 one two bf16 operands, a float bias,
// and writes float.
std::string declineTypes(const KernelSig& s, bool bf16) {
  if (!bf16) {
    for (const TensorDesc& t : s.in)
      if (t.dtype != DType::F32) return "cuBLASLt kernels here take float32 only";
    return {};
  }
  if (s.in.size() < 2 || s.in[0].dtype != DType::BF16 || s.in[1].dtype != DType::BF16)
    return "takes bf16 operands only";
  for (size_t i = 2; i < s.in.size(); ++i)
    if (s.in[i].dtype != DType::F32) return "takes a float bias only";
  if (s.out[0].dtype != DType::F32) return "writes float32 only";
  return {};
}

std::string decline(const KernelSig& s, bool linear, bool bf16) {
  if (std::string why = declineTypes(s, bf16); !why.empty()) return why;
  GemmPlan plan = planOf(s, linear);
  if (empty(plan))
    return plan.k == 0 && hasBias(plan.epilogue)
               ? "a Linear with no input features and a bias is not a product cuBLASLt runs"
               : std::string();
  try {
    build(s, plan, bf16);
  } catch (const CudaError& e) {
    return e.what();
  }
  return {};
}

int64_t workspace(const KernelSig& s, bool linear, bool bf16) {
  GemmPlan plan = planOf(s, linear);
  if (empty(plan)) return 0;
  try {
    return build(s, plan, bf16)->workspace;
  } catch (const CudaError&) {
    return 0;  // prepare() fails with the reason, naming the node
  }
}

// An empty product (a zero dimension, which shapes allow) has no library call: with
// k = 0 and no bias the output is zero, also after a ReLU.
KernelFn emptyProduct(const KernelSig& s) {
  cudaStream_t st = streamOf(s);
  return [st](const KernelIO& io) {
    if (int64_t n = io.out[0].numel(); n > 0)
      NL_CUDA(cudaMemsetAsync(io.out[0].data, 0, size_t(n) * sizeof(float), st));
  };
}

KernelFn prepare(const KernelSig& s, bool linear, bool bf16) {
  GemmPlan plan = planOf(s, linear);
  if (empty(plan)) return emptyProduct(s);
  std::shared_ptr<LtGemm> g = build(s, plan, bf16);
  cudaStream_t st = streamOf(s);
  bool bias = hasBias(plan.epilogue);
  return [g, st, bias](const KernelIO& io) {
    if (io.workspaceBytes < g->workspace)
      throw CudaError("cuBLASLt needs " + std::to_string(g->workspace) +
                      " bytes of workspace, the plan reserved " +
                      std::to_string(io.workspaceBytes));
    if (bias) {
      const void* b = io.in[2].data;
      setOp(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b));
    }
    float one = 1.f, zero = 0.f;
    // cuBLASLt's A is our second operand, its B our first (see plans.h).
    NL_CUBLAS(cublasLtMatmul(g->handle, g->op, &one, io.in[1].data, g->a, io.in[0].data, g->b,
                             &zero, io.out[0].data, g->d, io.out[0].data, g->d, &g->algo,
                             io.workspace, size_t(g->workspace), st));
  };
}

std::string describe(const KernelSig& s, bool linear, bool bf16) {
  GemmPlan p = planOf(s, linear);
  return "cuBLASLt " + std::string(p.transA ? "T" : "N") + (p.transB ? "T" : "N") + " " +
         std::to_string(p.m) + "×" + std::to_string(p.n) + "×" + std::to_string(p.k) + ", " +
         epilogueName(p.epilogue) +
         (bf16         ? ", bf16 operands on bf16 tensor cores, into float"
          : s.autocast ? ", TF32 tensor cores (exact on autocast's 16-bit inputs)"
                       : ", FP32 compute (no TF32)");
}

KernelImpl gemmKernel(const char* name, bool linear, bool bf16) {
  KernelImpl k{name, [linear, bf16](const KernelSig& s) { return decline(s, linear, bf16); },
               [linear, bf16](const KernelSig& s) { return prepare(s, linear, bf16); }};
  k.workspace = [linear, bf16](const KernelSig& s) { return workspace(s, linear, bf16); };
  k.detail = [linear, bf16](const KernelSig& s) { return describe(s, linear, bf16); };
  k.halfTensors = bf16;
  return k;
}

}  // namespace

void registerGemm(KernelRegistry& r) {
  r.add("Linear", DeviceKind::Cuda, gemmKernel("cublaslt.linear", true, false));
  r.add("MatMul", DeviceKind::Cuda, gemmKernel("cublaslt.matmul", false, false));
  // Mixed precision's products on bf16 operands (the bf16 storage pass places them).
  r.add("Linear", DeviceKind::Cuda, gemmKernel("cublaslt.linear_bf16", true, true));
  r.add("MatMul", DeviceKind::Cuda, gemmKernel("cublaslt.matmul_bf16", false, true));
}

}  // namespace netloom::cuda
