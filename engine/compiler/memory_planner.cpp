#include "engine/compiler/memory_planner.h"

#include <algorithm>
#include <numeric>

#include "kernels/core/checked.h"

namespace netloom {

namespace {
int64_t alignUp(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}
bool liveTogether(const BufferRequest& a, const BufferRequest& b) {
  return a.first <= b.last && b.first <= a.last;
}
}  // namespace

MemoryPlan planMemory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by first use, then index, so the plan is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    int64_t size = alignUp(std::max<int64_t>(r.bytes, 1), alignment);
    // Sizes are bounded (shape inference caps every tensor); their sums saturate,
    // so a huge plan reads as huge and the memory budget refuses it.
    plan.naiveBytes = saturatingAdd(plan.naiveBytes, size);
    // Intervals taken by already-placed buffers that are live at the same time.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t p : placed)
      if (liveTogether(r, requests[p]))
        taken.push_back(
            {plan.offsets[p],
             saturatingAdd(plan.offsets[p],
                           alignUp(std::max<int64_t>(requests[p].bytes, 1), alignment))});
    std::sort(taken.begin(), taken.end());
    // The lowest gap that fits; among gaps, prefer the smallest that fits (best fit).
    int64_t best = -1, bestGap = INT64_MAX, cursor = 0;
    for (const auto& [lo, hi] : taken) {
      if (lo - cursor >= size && lo - cursor < bestGap) {
        best = cursor;
        bestGap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best < 0) best = cursor;
    plan.offsets[idx] = best;
    plan.arenaBytes = std::max(plan.arenaBytes, saturatingAdd(best, size));
    placed.push_back(idx);
  }
  return plan;
}

bool planIsValid(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (plan.offsets[i] < 0 || plan.offsets[i] + requests[i].bytes > plan.arenaBytes) return false;
    for (size_t j = i + 1; j < requests.size(); ++j) {
      if (!liveTogether(requests[i], requests[j])) continue;
      int64_t a0 = plan.offsets[i], a1 = a0 + requests[i].bytes;
      int64_t b0 = plan.offsets[j], b1 = b0 + requests[j].bytes;
      if (a0 < b1 && b0 < a1) return false;
    }
  }
  return true;
}

}  // namespace netloom
