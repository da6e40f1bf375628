// "in place": element-wise ops write over an input they are the last to read, one
// buffer for both (planInPlace, engine/compiler/inplace.cpp).
#include "engine/compiler/pass.h"
#include "kernels/core/checked.h"

namespace netloom {
namespace {

class InPlace : public Pass {
 public:
  const char* name() const override { return "in place"; }
  bool optional() const override { return true; }
  uint8_t needs() const override { return kLifetimes; }
  uint8_t preserves() const override { return kAllAnalyses; }
  Result<std::string> run(PassContext& c) override {
    const Graph& g = c.g;
    Lifetimes& life = c.analyses.refineLifetimes();
    Lowering& l = c.lower;
    l.inPlace = planInPlace(g, life.first, life.last, c.pinned);
    for (size_t v = 0; v < g.values.size(); ++v) {
      if (l.inPlace.overwrote[v] != kNoValue) c.prog.overwrote[ValueId(v)] = l.inPlace.overwrote[v];
      if (life.first[v] >= 0 && livesInArena(g.values[v]) && l.inPlace.storage[v] != ValueId(v))
        l.inPlaceBytes = saturatingAdd(l.inPlaceBytes, bytesOf(g.values[v].desc));
    }
    return counted(c.prog.overwrote.size(), "output") + " written over a dead input (" +
           formatBytes(l.inPlaceBytes) + ")";
  }
};

}  // namespace

std::unique_ptr<Pass> inPlacePass() {
  return std::make_unique<InPlace>();
}

}  // namespace netloom
