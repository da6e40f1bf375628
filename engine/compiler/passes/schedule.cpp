// "hoist boxings": each boxing moves up to just after the node that writes its input
// (parameters' to the start), the other nodes keeping their order, so that the work
// between it and its first reader runs while it moves on the collective lane (the
// overlap pass): in the backward pass a layer's weight gradient, say, while its input
// gradient is gathered. Every rank reorders alike, so their collectives keep one order.
#include <functional>

#include "engine/compiler/pass.h"
#include "engine/ops/internal_ops.h"

namespace netloom {
namespace {

class HoistBoxings : public Pass {
 public:
  const char* name() const override { return "hoist boxings"; }
  bool optional() const override { return true; }
  bool applies(const PassContext& c) const override {
    return c.opts.overlap && c.opts.tensorComm && c.opts.tensorComm->size() > 1;
  }
  Result<std::string> run(PassContext& c) override {
    Graph& g = c.g;
    const size_t n = g.nodes.size();
    // after[k + 1]: the boxings that go right after node k (after[0]: first).
    std::vector<std::vector<size_t>> after(n + 1);
    std::vector<bool> boxing(n, false);
    size_t moved = 0;
    for (size_t id = 0; id < n; ++id) {
      if (g.nodes[id].op != &internal_ops::boxing()) continue;
      boxing[id] = true;
      long last = -1;
      for (ValueId v : g.nodes[id].inputs) last = std::max(last, long(g.values[v].producer));
      after[size_t(last + 1)].push_back(id);
      if (size_t(last + 1) != id) ++moved;
    }
    std::vector<size_t> order;
    std::function<void(size_t)> emit = [&](size_t id) {  // then what moves up behind it
      order.push_back(id);
      for (size_t b : after[id + 1]) emit(b);
    };
    for (size_t b : after[0]) emit(b);
    for (size_t id = 0; id < n; ++id)
      if (!boxing[id]) emit(id);
    std::vector<NodeId> newId(n);
    std::vector<Node> nodes;
    nodes.reserve(n);
    for (size_t k = 0; k < order.size(); ++k) {
      newId[order[k]] = NodeId(k);
      nodes.push_back(std::move(g.nodes[order[k]]));
    }
    g.nodes = std::move(nodes);
    for (size_t k = 0; k < g.nodes.size(); ++k)
      for (ValueId v : g.nodes[k].outputs) g.values[v].producer = NodeId(k);
    if (c.seed >= 0) c.seed = newId[size_t(c.seed)];
    return moved ? counted(moved, "boxing") + " moved up to what it moves"
                 : std::string("none moved");
  }
};

}  // namespace

std::unique_ptr<Pass> hoistBoxingsPass() {
  return std::make_unique<HoistBoxings>();
}

}  // namespace netloom
