// The memory the parallel kernels (boxing, ZeRO, pipelines) move: copies within a
// rank's memory, and the communicator whose calls move it between ranks. On the CPU
// both are the host's (memcpy, the communicator's blocking calls); on a GPU the
// copies are the device's and the collectives the communicator's device side
// (Communicator::onDevice), all queued on the device's stream in order with the
// step's kernels. The kernels are written once against it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/core/communicator.h"
#include "kernels/core/device.h"
#include "kernels/core/kernel.h"

namespace netloom {

class Moves {
 public:
  // The memory of the kernel's device; null or one the host addresses: the host's.
  explicit Moves(Device* device)
      : m_device(device && !device->hostAddressable() ? device : nullptr) {}

  // Copies through `device` whatever its memory (on the CPU too: what a GPU does
  // with its strided copies, checked where there is none).
  static Moves through(Device& device) {
    Moves m(nullptr);
    m.m_device = &device;
    return m;
  }

  bool onHost() const { return m_device == nullptr; }
  void copy(void* dst, const void* src, int64_t bytes) const;
  void zero(void* dst, int64_t bytes) const;
  // Part `index` of `parts` along `axis` of a tensor of `shape` (shard.h's layout),
  // out of the whole into a contiguous part, and back.
  void takePart(const void* whole, const Shape& shape, int axis, int index, int parts, void* part,
                size_t elemBytes) const;
  void putPart(const void* part, const Shape& shape, int axis, int index, int parts, void* whole,
               size_t elemBytes) const;
  // `bytes` of this memory, for the kernel that asks when it is prepared to hold for
  // its life; null when they cannot be had.
  std::shared_ptr<char> scratch(int64_t bytes) const;

  // The communicator whose calls take this memory: `comm` on the host, its device
  // side on a GPU (null where it has none).
  Communicator* speaker(Communicator* comm) const {
    return !comm || onHost() ? comm : comm->onDevice();
  }
  // Empty where `comm` moves this memory, else why the kernel declines.
  std::string declines(Communicator* comm, const std::string& groupName) const;

 private:
  Device* m_device;
};

}  // namespace netloom
