// "overlap": a boxing moves its tensor while the step computes on. On a device the
// host addresses, each Boxing step runs on the program's collective lane (a thread
// of its own, in program order) and the step joins it only before the first later
// step that touches what the boxing reads or writes (by the arena's addresses, a
// multi-tensor launch counting for every step it does), or that talks to the ranks
// itself, so every rank still issues its collectives in one order.
#include <algorithm>

#include "engine/compiler/pass.h"

namespace netloom {
namespace {

struct Range {
  const char* begin;
  const char* end;
};

bool overlap(const std::vector<Range>& a, const std::vector<Range>& b) {
  for (const Range& x : a)
    for (const Range& y : b)
      if (x.begin < y.end && y.begin < x.end) return true;
  return false;
}

// What a launch reads and writes, by address.
struct Touches {
  std::vector<Range> reads, writes;
  // Whether running `later` beside this one could go wrong: it reads or writes what
  // this writes, or writes what this reads.
  bool conflicts(const Touches& later) const {
    return overlap(later.reads, writes) || overlap(later.writes, writes) ||
           overlap(later.writes, reads);
  }
};

void addRange(std::vector<Range>& to, const TensorRef& t, const TensorDesc& d) {
  if (!t.data) return;
  const char* p = static_cast<const char*>(t.data);
  to.push_back({p, p + std::max<int64_t>(bytesOf(d), 1)});
}

// Steps [i, groupEnd) as its launch touches them.
Touches touches(const Program& prog, size_t i) {
  Touches t;
  const size_t end = std::max(i + 1, prog.steps[i].groupEnd);
  for (size_t k = i; k < end && k < prog.steps.size(); ++k) {
    const PlanStep& s = prog.steps[k];
    const Node& n = prog.graph.nodes[size_t(s.node)];
    for (size_t j = 0; j < s.in.size() && j < n.inputs.size(); ++j)
      addRange(t.reads, s.in[j], prog.graph.values[n.inputs[j]].desc);
    for (size_t j = 0; j < s.out.size() && j < n.outputs.size(); ++j)
      addRange(t.writes, s.out[j], prog.graph.values[n.outputs[j]].desc);
    if (s.workspace && s.workspaceBytes > 0) {
      const char* w = static_cast<const char*>(s.workspace);
      t.writes.push_back({w, w + s.workspaceBytes});
    }
  }
  return t;
}

bool talksToRanks(const PlanStep& s) {
  return s.kernel.rfind("collective.", 0) == 0 || s.kernel.rfind("pipeline.", 0) == 0;
}

class Overlap : public Pass {
 public:
  const char* name() const override { return "overlap"; }
  bool optional() const override { return true; }
  bool planOnly() const override { return false; }
  uint8_t preserves() const override { return kAllAnalyses; }
  bool applies(const PassContext& c) const override {
    return c.opts.overlap && c.prog.device && c.prog.device->hostAddressable() &&
           c.opts.tensorComm && c.opts.tensorComm->size() > 1;
  }
  Result<std::string> run(PassContext& c) override {
    Program& prog = c.prog;
    size_t lanes = 0, hidden = 0;
    for (size_t i = 0; i < prog.steps.size(); ++i) {
      PlanStep& s = prog.steps[i];
      if (s.kernel != "collective.boxing" || !s.fn) continue;
      const Touches mine = touches(prog, i);
      size_t j = i + 1;
      for (; j < prog.steps.size(); ++j) {
        const PlanStep& later = prog.steps[j];
        if (later.kernel == "collective.boxing") continue;  // the lane runs it after, in order
        if (!later.fn) continue;                            // done by an earlier launch
        if (talksToRanks(later) || mine.conflicts(touches(prog, j))) break;
      }
      s.joinAt = j;
      ++lanes;
      hidden += j - i - 1;
    }
    return lanes ? counted(lanes, "boxing") + " on the collective lane, " +
                       counted(hidden, "step") + " run while they move"
                 : std::string("none");
  }
};

}  // namespace

std::unique_ptr<Pass> overlapPass() {
  return std::make_unique<Overlap>();
}

}  // namespace netloom
