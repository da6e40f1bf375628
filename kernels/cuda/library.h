// What the CUDA backend's cuBLASLt and cuDNN kernels share: status checks that throw
// naming the call and the library's own error text, one library handle per device
// (created on first use and kept, like the device, for the process's life), cuDNN
// descriptors that free themselves, and the staging copy around cuDNN convolutions.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <string>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/plans.h"

namespace netloom::cuda {

inline void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw CudaError(std::string(what) + ": " + cudnnGetErrorString(s));
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(what) + ": " + cublasLtGetStatusString(s));
}

#define NL_CUDNN(call) ::netloom::cuda::check((call), #call)
#define NL_CUBLAS(call) ::netloom::cuda::check((call), #call)

// The handles of the device a kernel runs on. A handle is bound to its stream at
// every launch, so the plan's launches stay ordered on the device's one stream.
cudnnHandle_t cudnnFor(const KernelSig& sig);
cublasLtHandle_t cublasLtFor(const KernelSig& sig);
// Which device a signature's kernel runs on, for per-device caches.
int deviceIndexOf(const KernelSig& sig);

// Owns one cuDNN descriptor.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { NL_CUDNN(Create(&m_d)); }
  ~CudnnDescriptor() { Destroy(m_d); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  T get() const { return m_d; }
  operator T() const { return m_d; }

 private:
  T m_d = nullptr;
};

using CudnnTensor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                    cudnnDestroyTensorDescriptor>;
using CudnnFilter = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                    cudnnDestroyFilterDescriptor>;
using CudnnConvolution =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                    cudnnDestroyConvolutionDescriptor>;
using CudnnPooling = CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                     cudnnDestroyPoolingDescriptor>;

// A packed N×C×H×W descriptor, float32 unless said (dimensions already checked by
// fitsCudnn).
void setTensor4d(cudnnTensorDescriptor_t d, int64_t n, int64_t c, int64_t h, int64_t w,
                 cudnnDataType_t type = CUDNN_DATA_FLOAT);

// Small kernels of our own around the library calls (library_kernels.cu).
// Copies a stack of planes srcH × srcW into one of dstH × dstW, top-left aligned,
// zero where the destination reaches past the source.
void copyRegion(const float* src, float* dst, int64_t planes, const RegionCopy& r, cudaStream_t s);
void invStdToVariance(const float* invStd, float* var, int64_t c, double eps, cudaStream_t s);
void varianceToInvStd(const float* var, float* invStd, int64_t c, double eps, cudaStream_t s);
void fillFloats(float* dst, float value, int64_t n, cudaStream_t s);
// n floats rounded into bf16 (fn::ToBf16, as CastBf16 rounds), and n bf16 values widened.
void toBf16(const float* src, uint16_t* dst, int64_t n, cudaStream_t s);
void fromBf16(const uint16_t* src, float* dst, int64_t n, cudaStream_t s);
// y (N×C×area, bf16) plus bias[c] in float, rounded back: a bf16 convolution's bias.
void addChannelBiasBf16(uint16_t* y, const float* bias, int64_t n, int64_t c, int64_t area,
                        cudaStream_t s);
// BatchNorm's running statistics from the batch's mean and biased variance.
void updateRunning(const BatchNormPlan& p, float* runningMean, float* runningVar, const float* mean,
                   const float* var, cudaStream_t s);

}  // namespace netloom::cuda
