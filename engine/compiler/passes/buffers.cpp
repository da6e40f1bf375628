// "buffers": each arena value that owns its memory (not written over another by the
// in-place pass, when it ran) asks the memory plan for a buffer live from its first
// step to its last.
#include "engine/compiler/pass.h"

namespace netloom {
namespace {

class Buffers : public Pass {
 public:
  const char* name() const override { return "buffers"; }
  uint8_t needs() const override { return kLifetimes; }
  uint8_t preserves() const override { return kAllAnalyses; }
  bool listed() const override { return false; }
  Result<std::string> run(PassContext& c) override {
    const Graph& g = c.g;
    const Lifetimes& life = c.analyses.lifetimes();
    Lowering& l = c.lower;
    if (l.inPlace.storage.size() != g.values.size()) l.inPlace = noInPlace(g);
    for (size_t v = 0; v < g.values.size(); ++v) {
      if (life.first[v] < 0 || !livesInArena(g.values[v]) || l.inPlace.storage[v] != ValueId(v))
        continue;
      l.requests.push_back({bytesOf(g.values[v].desc), life.first[v], life.last[v]});
      l.requested.push_back(ValueId(v));
    }
    return counted(l.requests.size(), "buffer");
  }
};

}  // namespace

std::unique_ptr<Pass> buffersPass() {
  return std::make_unique<Buffers>();
}

}  // namespace netloom
