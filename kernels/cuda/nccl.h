// Data parallelism across GPUs: a communicator on NCCL. Its unique id crosses the
// same rendezvous the ranks meet at: rank 0 makes it and `publish`es it, the others
// `fetch` it. Gradient buckets are summed on a stream of their own, ordered after
// the step's work by events and before the updates by another: the host never
// waits, and a recorded step (a CUDA Graph) holds the sums too.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"

namespace netloom::cuda {

// Throws CommError, naming the rank and NCCL's reason.
std::unique_ptr<Communicator> connectNccl(Device& device, int rank, int size,
                                          const std::function<void(const std::string&)>& publish,
                                          const std::function<std::string()>& fetch);

}  // namespace netloom::cuda
