// Collectives across the ranks of a data-parallel run: the kernels that sum a
// bucket of gradients call it, and the trainer sums its losses and evaluations
// with it. engine/parallel/ makes them (Gloo over TCP for CPU ranks; one that does
// nothing for a single rank). Every rank makes the same calls in the same order.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace netloom {

// A collective that failed: a rank left, did not answer in time, or the transport
// broke. The message says which and, where known, the rank.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a run's communication time went (--profile).
struct CommStats {
  double bucketSeconds = 0;  // spent summing gradient buckets, on the communication thread
  double waitedSeconds = 0;  // of which the step waited for (the rest the backward pass hid)
  int64_t buckets = 0;       // bucket sums done
  int64_t bytes = 0;         // gradient bytes summed
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string describe() const = 0;  // "gloo over TCP, rank 0 of 2"

  // Blocking collectives. Throw CommError.
  virtual void allreduce(float* data, int64_t count, bool mean = false) = 0;
  virtual void allreduce(double* data, int64_t count) = 0;  // a sum
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // `out` holds size() blocks of `bytes` each, in rank order.
  virtual void allgather(const void* in, void* out, int64_t bytes) = 0;
  virtual void barrier() = 0;

  // A bucket of float tensors summed across ranks while the step goes on: start()
  // once the last of them is written, wait() before anything reads them again. A
  // bucket is named by what it holds; the same name must hold tensors of the same
  // sizes each time (their addresses may change).
  virtual void start(const std::string& bucket, const TensorRef* tensors, size_t count) = 0;
  virtual void wait(const std::string& bucket) = 0;

  virtual CommStats stats() const { return {}; }
  // Whether start() takes a GPU's memory (NCCL), or only the host's (Gloo).
  virtual bool sumsDeviceMemory() const { return false; }
};

}  // namespace netloom
