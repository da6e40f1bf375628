// Collectives across the ranks of a run: the kernels that sum a bucket of gradients
// call it, the trainer sums its losses and evaluations with it, and sharded state
// and split tensors move through reduce-scatter, all-gather, all-to-all and
// point-to-point messages. engine/parallel/ makes them (Gloo over TCP for CPU ranks; one that does
// nothing for a single rank). Every rank makes the same calls in the same order.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
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

// What moving data between a communicator's ranks costs: each message's fixed time
// and the bytes a rank sends per second, measured on the ranks themselves
// (engine/parallel's measureLink) or, until then, assumed.
struct LinkCost {
  double latencySeconds = 20e-6;
  double bytesPerSecond = 1e9;
  bool measured = false;
  // A collective of `messages` steps, each rank sending `bytes` in all.
  double seconds(int64_t bytes, int messages) const {
    return messages * latencySeconds + double(bytes) / bytesPerSecond;
  }
  // "12.5 µs a message, 3.20 GB/s, measured"
  std::string describe() const {
    char text[96];
    std::snprintf(text, sizeof text, "%.1f µs a message, %.2f GB/s, %s", latencySeconds * 1e6,
                  bytesPerSecond / 1e9, measured ? "measured" : "assumed");
    return text;
  }
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
  // `in` holds size() blocks of `count` floats, block k the part rank k keeps; `out`
  // receives this rank's block summed over every rank's `in` (on CPU transports in
  // rank order, so Gloo and thread ranks give the same bits). `in` and `out` do not
  // overlap.
  virtual void reduceScatter(const float* in, float* out, int64_t count) = 0;
  // `in` holds size() blocks of `bytes`, block k for rank k; `out` receives size()
  // blocks, block k from rank k.
  virtual void alltoall(const void* in, void* out, int64_t bytes) = 0;
  // Point to point: what rank r sends to rank `to` with `tag` is what rank `to`
  // receives from r with that tag, `bytes` long; messages of one pair and tag arrive
  // in the order sent. send() returns once `data` may be reused; recv() once it
  // holds the message. Ranks other than the two are not involved.
  virtual void send(const void* data, int64_t bytes, int to, uint32_t tag) = 0;
  virtual void recv(void* data, int64_t bytes, int from, uint32_t tag) = 0;

  // A bucket of float tensors summed across ranks while the step goes on: start()
  // once the last of them is written, wait() before anything reads them again. A
  // bucket is named by what it holds; the same name must hold tensors of the same
  // sizes each time (their addresses may change).
  virtual void start(const std::string& bucket, const TensorRef* tensors, size_t count) = 0;
  virtual void wait(const std::string& bucket) = 0;

  // The ranks `members` (in the group's order, this one among them) as a
  // communicator of their own, made alike by every member, with `id` the same on
  // each; null where the transport has no groups of its own (they are then made of
  // point-to-point messages, engine/parallel's subgroup()).
  virtual std::unique_ptr<Communicator> group(const std::vector<int>& members, uint32_t id) {
    return nullptr;
  }

  virtual CommStats stats() const { return {}; }
  // Ranks only planned for (--explain): any collective throws.
  virtual bool plansOnly() const { return false; }
  // The link's cost, as measured on this communicator (the same on every rank).
  const LinkCost& link() const { return m_link; }
  void setLink(const LinkCost& link) { m_link = link; }
  // Whether start() takes a GPU's memory (NCCL), or only the host's (Gloo).
  virtual bool sumsDeviceMemory() const { return false; }
  // The same ranks, whose calls take the GPU's memory instead of the host's: each is
  // queued on the device's stream after the work issued so far, and returns at once
  // (what follows on the stream sees its result). send() returns once queued too:
  // its bytes are taken in stream order, and it never holds up the stream. Null where
  // the transport moves host memory only (Gloo).
  virtual Communicator* onDevice() { return nullptr; }

 private:
  LinkCost m_link;
};

}  // namespace netloom
