// "memory": the arena's offsets for every buffer request (planMemory,
// engine/compiler/memory_planner.cpp), beside the naive total of a buffer each.
#include "engine/compiler/pass.h"
#include "kernels/core/checked.h"

namespace netloom {
namespace {

bool persistent(ValueKind k) {
  return k == ValueKind::Param || k == ValueKind::Buffer || k == ValueKind::State;
}

class Memory : public Pass {
 public:
  const char* name() const override { return "memory"; }
  uint8_t preserves() const override { return kAllAnalyses; }
  Result<std::string> run(PassContext& c) override {
    // cuBLASLt and cuDNN read fastest from 256-byte boundaries; the CPU's vectors need 64.
    const int64_t alignment = c.store.device().hostAddressable() ? 64 : 256;
    Lowering& l = c.lower;
    MemoryPlan& mem = l.mem;
    mem = planMemory(l.requests, alignment);
    // Naive: every tensor its own buffer, those written in place too.
    mem.naiveBytes =
        saturatingAdd(mem.naiveBytes, (l.inPlaceBytes + alignment - 1) / alignment * alignment);
    std::set<ValueId> bound;  // what bindParams binds: every persistent tensor a node reads
    for (const Node& n : c.g.nodes)
      for (ValueId v : n.inputs)
        if (persistent(c.g.values[v].kind) && bound.insert(v).second)
          c.prog.persistentBytes += numel(c.g.values[v].desc.shape) * int64_t(sizeof(float));
    c.prog.arenaBytes = mem.arenaBytes;
    c.prog.naiveBytes = mem.naiveBytes;
    return "arena " + formatBytes(mem.arenaBytes) + " for " + counted(l.requests.size(), "buffer") +
           " (naive " + formatBytes(mem.naiveBytes) + ")";
  }
};

}  // namespace

std::unique_ptr<Pass> memoryPass() {
  return std::make_unique<Memory>();
}

}  // namespace netloom
