// Helpers for the CUDA backend's host code: errors as exceptions that name the call
// (a run ends with a Failed event naming it, not with a crash), and the device's
// stream for a kernel signature.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/core/device.h"
#include "kernels/core/kernel.h"

namespace netloom::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // clears a sticky-free error so later calls are not blamed
    throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
  }
}

#define NL_CUDA(call) ::netloom::cuda::check((call), #call)

inline cudaStream_t streamOf(const KernelSig& sig) {
  return static_cast<cudaStream_t>(sig.device->stream());
}

// What a device's probe says of a CUDA error, for --list-devices.
std::string describe(cudaError_t e);

void registerKernels(KernelRegistry& r);

// Writes up to 64 bytes of `src` to `dst` on `stream` as a one-thread kernel's
// argument: copied when the launch is issued, so `src` may go at once, and the host
// never waits (as a copy from pageable memory may make it).
void writeValues(void* dst, const void* src, int bytes, cudaStream_t stream);

// Issues Device::checkFinite on `stream`, summing in `deviceTotal`.
void checkFinite(const TensorRef& loss, const std::vector<TensorRef>& grads, float* guard,
                 cudaStream_t stream, double* deviceTotal);

// Σ x² in double over `tensors` on `stream`, through a device scratch double and a
// pinned host one; waits for the stream.
double sumOfSquares(const std::vector<TensorRef>& tensors, cudaStream_t stream, double* deviceTotal,
                    double* hostTotal);

}  // namespace netloom::cuda
