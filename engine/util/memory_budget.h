// What a run may allocate. Before anything large is allocated (the dataset, the
// parameters and optimizer state, each plan's arena, the prefetched batches) its
// size is planned here against what this process can have: the machine's available
// memory, its cgroup's memory.max, RLIMIT_AS, and a limit the user set. A run that
// does not fit is refused, naming the field and the bytes, before it fills memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/util/status.h"
#include "kernels/core/device.h"

namespace netloom {

class MemoryBudget {
 public:
  // The tightest of what this machine and process can give now and of `userLimit`
  // (bytes, when positive; named `userLimitName` in messages).
  static std::shared_ptr<MemoryBudget> forThisProcess(int64_t userLimit = 0,
                                                      const std::string& userLimitName = {});

  // What a device the host cannot address can give a run: its free memory now, less
  // a margin for what its libraries allocate themselves (handles, their own scratch).
  static std::shared_ptr<MemoryBudget> forDevice(Device& device);

  // `limitText` says in messages where the limit comes from, after "but ":
  // "this machine has 23.4 GiB available".
  MemoryBudget(int64_t limitBytes, std::string limitText);

  // Plans `bytes` more, kept for the rest of the run, or refuses (planning nothing)
  // when the total would pass the limit. `what` opens the message and names the
  // field: "train.batch_size 64: the activations (arena)".
  Status reserve(const std::string& what, int64_t bytes);
  // Whether `bytes` more fit for a moment (a copy made while splitting); plans nothing.
  Status check(const std::string& what, int64_t bytes) const;
  // Gives back planned bytes (a reader's estimate once the real size is known).
  void release(int64_t bytes);

  int64_t planned() const { return m_planned; }
  int64_t limit() const { return m_limit; }
  int64_t remaining() const { return m_limit > m_planned ? m_limit - m_planned : 0; }
  const std::string& limitText() const { return m_limitText; }

 private:
  int64_t m_limit = 0;
  int64_t m_planned = 0;
  std::string m_limitText;
};

// The budget `budget` points to, or a fresh one for this process when it is null:
// the engine's entry points take an optional budget and never run without one.
std::shared_ptr<MemoryBudget> budgetOrThisProcess(const std::shared_ptr<MemoryBudget>& budget);

// "512 B", "1.5 KiB", "23.4 GiB", "6.1 TiB".
std::string formatBytes(int64_t bytes);

// A byte count as a user writes it: "1073741824", "512M", "4G", "1.5GiB", "2T"
// (binary units, as ulimit and container runtimes read them). Fails naming `field`.
Result<int64_t> parseByteSize(const std::string& text, const std::string& field);

}  // namespace netloom
