#include "kernels/cuda/library.h"

#include <map>
#include <mutex>

namespace netloom::cuda {

int deviceIndexOf(const KernelSig& sig) {
  return sig.device->id().index;
}

namespace {

// Creates a library handle with `index` as the current device (a handle belongs to
// the device current at its creation), then restores the caller's device.
template <class Handle, class Create>
Handle handleFor(int index, Create create) {
  static std::mutex mutex;
  static std::map<int, Handle> handles;
  std::lock_guard lock(mutex);
  if (auto it = handles.find(index); it != handles.end()) return it->second;
  int previous = 0;
  NL_CUDA(cudaGetDevice(&previous));
  NL_CUDA(cudaSetDevice(index));
  Handle h = nullptr;
  try {
    create(&h);
  } catch (...) {
    cudaSetDevice(previous);
    throw;
  }
  NL_CUDA(cudaSetDevice(previous));
  handles[index] = h;
  return h;
}

}  // namespace

cudnnHandle_t cudnnFor(const KernelSig& sig) {
  return handleFor<cudnnHandle_t>(deviceIndexOf(sig),
                                  [](cudnnHandle_t* h) { NL_CUDNN(cudnnCreate(h)); });
}

cublasLtHandle_t cublasLtFor(const KernelSig& sig) {
  return handleFor<cublasLtHandle_t>(deviceIndexOf(sig),
                                     [](cublasLtHandle_t* h) { NL_CUBLAS(cublasLtCreate(h)); });
}

void setTensor4d(cudnnTensorDescriptor_t d, int64_t n, int64_t c, int64_t h, int64_t w,
                 cudnnDataType_t type) {
  NL_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, int(n), int(c), int(h), int(w)));
}

}  // namespace netloom::cuda
