// Static memory planning: given each buffer's size and the steps between which it
// is live, assign offsets in one arena so that no two live buffers overlap. Greedy
// by size (largest first, lowest fitting offset), as TFLite's arena planner does.
#pragma once

#include <cstdint>
#include <vector>

namespace netloom {

struct BufferRequest {
  int64_t bytes = 0;
  int first = 0;  // step that writes it first (inclusive)
  int last = 0;   // step that reads it last (inclusive)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request
  int64_t arenaBytes = 0;        // peak: the arena this plan needs
  int64_t naiveBytes = 0;        // one buffer each, no reuse
};

MemoryPlan planMemory(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

// True when no two requests that are live at the same step overlap in the arena.
bool planIsValid(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);

}  // namespace netloom
