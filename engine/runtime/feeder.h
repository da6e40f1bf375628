// How batches reach a program's inputs and its scalars come back. On the CPU a batch
// is copied straight into the inputs and every scalar is read where it lies. On a
// device the host cannot address, a batch is staged in pinned host memory and
// uploaded on the device's copy stream into one of two device buffers while the step
// before it runs; a step then copies its batch into the inputs on its own stream.
// Its loss and metrics are copied into a ring on the device, which the host reads
// back every few steps rather than waiting on each one.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/runtime/program.h"

namespace netloom {

// Copies a batch into `prog`'s inputs now (evaluation, prediction, a replay).
void feed(const Program& prog, const Batch& b);

class BatchFeeder {
 public:
  explicit BatchFeeder(Device& device) : m_device(device) {}
  ~BatchFeeder();
  BatchFeeder(const BatchFeeder&) = delete;
  BatchFeeder& operator=(const BatchFeeder&) = delete;

  // Starts moving the batch the next bind() will give a program (nothing on the CPU).
  void stage(const Batch& b);
  // Makes the staged batch, `b`, `prog`'s input, ordered before the work issued next.
  void bind(const Program& prog, const Batch& b);

 private:
  struct Slot {
    void* host = nullptr;  // pinned: x, x as token ids, int32 labels, float labels
    DeviceBuffer device;
    int64_t capacity = 0;  // bytes in each
    int64_t size = 0;      // samples staged
    int64_t features = 0;
    int64_t labels = 0;  // labels staged: one a sample, or one a token of text
    bool ids = false;    // the batch has token ids
  };
  void reserve(Slot& slot, int64_t bytes);

  Device& m_device;
  Slot m_slots[2];
  int m_next = 0;  // the slot the next stage() fills
};

// One float of a program's value: a scalar, or one element of a small state tensor.
struct RingScalar {
  RingScalar(ValueId v, int e = 0) : value(v), element(e) {}  // NOLINT: a ValueId reads as one
  ValueId value;
  int element;
};

// The per-step scalars (the loss, then each metric) of the steps since the last
// read, in step order.
class ScalarRing {
 public:
  // Holds up to `steps` steps of `width` scalars; on a host-addressable device one
  // step, read as it is recorded, unless `hostKeeps` (a data-parallel run sums the
  // steps' scalars across ranks in one call every `steps` steps).
  ScalarRing(Device& device, int width, int steps, bool hostKeeps = false);

  // Records the step `prog` has just been issued for: `values` (the loss first, then
  // the metrics), then, where `withGuard`, its guard (1 while every checked step was
  // finite) in the last of the `width` slots.
  void record(const Program& prog, const std::vector<RingScalar>& values, bool withGuard = false);
  bool full() const { return m_count >= m_steps; }
  int64_t pending() const { return m_count; }
  // The recorded steps' scalars (pending() × width, in order), waiting for the device;
  // the ring is empty afterwards.
  std::vector<float> drain();

 private:
  Device& m_device;
  int m_width, m_steps;
  DeviceBuffer m_ring;        // on devices the host cannot address
  std::vector<float> m_host;  // what the host has read
  int64_t m_count = 0;
};

}  // namespace netloom
