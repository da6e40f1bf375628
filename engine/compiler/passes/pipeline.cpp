// Pipeline parallelism, three passes. "pipeline" keeps this rank's stage of the
// forward graph (engine/compiler/pipeline.h), unrolled over the step's micro-batches:
// each micro-batch's copy of the stage reads its part of the data, receives what
// earlier stages send it and sends what later ones read; the loss and metrics are
// averaged over the micro-batches on the last stage (the other stages report zero).
// A sent value's gradient comes back through PipeSend's gradient rule, so autodiff
// differentiates the stage as a whole step, the parameters' gradients summed over
// the micro-batches. "pipeline gradients" sends each received value's gradient
// back. "pipeline schedule" orders the step as 1F1B: the stage's warm-up forwards,
// then one forward and one backward in turn, then the last backwards.
#include "engine/compiler/pipeline.h"

#include <algorithm>
#include <queue>

#include "engine/compiler/pass.h"
#include "engine/ops/internal_ops.h"

namespace netloom {
namespace {

// Which values depend on a parameter: their gradients cross between the stages.
std::vector<bool> dependsOnParams(const Graph& g) {
  std::vector<bool> dep(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) dep[v] = g.values[v].kind == ValueKind::Param;
  for (const Node& n : g.nodes) {
    if (n.op->external) continue;
    bool any = false;
    for (ValueId v : n.inputs) any = any || dep[size_t(v)];
    for (ValueId v : n.outputs) dep[size_t(v)] = any;
  }
  return dep;
}

struct StageBuilder {
  const Graph& old;
  const std::vector<int>& stage;
  const std::vector<bool>& needsGrad;
  int me, micro;
  PassContext& c;
  Graph h;
  std::map<ValueId, ValueId> persistent, inputs;    // old -> new
  std::map<std::pair<ValueId, int>, ValueId> made;  // (old value, micro-batch) -> new
  std::map<ValueId, int64_t> crossing;              // old value -> its index among those that cross
  std::vector<ValueId> sent;                        // PipeSend outputs whose gradients come back
  std::vector<ValueId> allSent;                     // every PipeSend output, kept

  Node node(const std::string& name, const OpDef& op, std::vector<ValueId> in, int m) {
    Node n;
    n.name = name;
    n.op = &op;
    n.inputs = std::move(in);
    if (m >= 0) c.microOf[name] = m;
    return n;
  }
  Result<ValueId> add(Node n) {
    auto id = h.addNode(std::move(n));
    if (!id) return id.error();
    return h.nodes[size_t(*id)].outputs.empty() ? kNoValue : h.nodes[size_t(*id)].outputs[0];
  }
  // The same on every stage: the crossing values numbered in the old graph's order.
  int64_t tagOf(ValueId v, int m) const { return (crossing.at(v) * micro + m) * 2; }

  // Value `v` of the old graph as micro-batch m's copy of this stage reads it.
  Result<ValueId> read(ValueId v, int m) {
    const Value& val = old.values[size_t(v)];
    if (val.kind != ValueKind::Activation && val.kind != ValueKind::Input) {
      if (!persistent.count(v)) persistent[v] = h.addValue(val);
      return persistent[v];
    }
    if (auto it = made.find({v, m}); it != made.end()) return it->second;
    const NodeId p = val.producer;
    if (p >= 0 && old.nodes[size_t(p)].op->external) {  // data: this micro-batch of it
      if (!inputs.count(v)) {
        Node in = old.nodes[size_t(p)];
        in.inputs.clear();
        in.outputs.clear();
        auto id = h.addNode(std::move(in));
        if (!id) return id.error();
        inputs[v] = h.nodes[size_t(*id)].outputs[0];
        for (const auto& [field, value] : old.inputsByField)
          if (value == v) h.inputsByField[field] = inputs[v];
      }
      Node slice =
          node(val.name + "#" + std::to_string(m), internal_ops::microBatch(), {inputs[v]}, m);
      slice.attrs.set("index", int64_t(m));
      slice.attrs.set("parts", int64_t(micro));
      auto out = add(std::move(slice));
      if (!out) return out;
      return made[{v, m}] = *out;
    }
    // From an earlier stage.
    Shape shape = val.desc.shape;
    shape[0] /= micro;
    Node recv = node(val.name + "@recv#" + std::to_string(m), internal_ops::pipeRecv(), {}, m);
    recv.attrs.set("peer", int64_t(stage[size_t(p)]));
    recv.attrs.set("tag", tagOf(v, m));
    recv.attrs.set("shape", std::vector<int64_t>(shape));
    recv.attrs.set("dtype", std::string(dtypeName(val.desc.dtype)));
    auto out = add(std::move(recv));
    if (!out) return out;
    if (needsGrad[size_t(v)]) c.received.push_back({*out, stage[size_t(p)], tagOf(v, m) + 1, m});
    return made[{v, m}] = *out;
  }

  // Micro-batch m's copy of node i; its outputs sent to the later stages reading them.
  Status copy(size_t i, int m, const std::vector<std::vector<NodeId>>& readers) {
    const Node& n = old.nodes[i];
    Node copy = n;
    const bool reported = n.op->role == OpRole::Loss || n.op->role == OpRole::Metric;
    // The first copy keeps the name, which seeds its weights' initialisation.
    copy.name = m == 0 && !reported ? n.name : n.name + "#" + std::to_string(m);
    c.microOf[copy.name] = m;
    copy.outputs.clear();
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      auto in = read(n.inputs[k], m);
      if (!in) return in.error();
      copy.inputs[k] = *in;
    }
    auto id = h.addNode(std::move(copy));
    if (!id) return id.error();
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId v = n.outputs[k], mine = h.nodes[size_t(*id)].outputs[k];
      made[{v, m}] = mine;
      std::set<int> to;
      for (NodeId r : readers[size_t(v)])
        if (stage[size_t(r)] > me) to.insert(stage[size_t(r)]);
      for (int s : to) {
        Node send =
            node(old.values[size_t(v)].name + "@send" + std::to_string(s) + "#" + std::to_string(m),
                 internal_ops::pipeSend(), {mine}, m);
        send.attrs.set("peer", int64_t(s));
        send.attrs.set("tag", tagOf(v, m));
        auto done = add(std::move(send));
        if (!done) return done.error();
        allSent.push_back(*done);
        if (needsGrad[size_t(v)]) sent.push_back(*done);
      }
    }
    return {};
  }

  // The loss and metrics by their names: averaged over the micro-batches where this
  // stage has them, else zero (the sends' average, for the loss, so that autodiff
  // reaches them).
  Status report(const std::string& name, bool isLoss, ValueId& out) {
    std::vector<ValueId> each;
    for (int m = 0; m < micro; ++m)
      if (const Node* n = h.findNode(name + "#" + std::to_string(m))) each.push_back(n->outputs[0]);
    if (each.empty() && isLoss) each = sent;
    Node r =
        node(name, each.empty() ? internal_ops::constant() : internal_ops::microMean(), each, -1);
    if (each.empty()) {
      r.attrs.set("value", 0.0);
      r.attrs.set("shape", std::vector<int64_t>{});
    }
    auto v = add(std::move(r));
    if (!v) return v.error();
    out = *v;
    return {};
  }
};

// The micro-batches of a step: as many as asked, or for a batch they do not divide
// (an epoch's short last one), the most that do.
int microBatchesOf(const CompileOptions& o) {
  if (!o.training) return 1;
  int m = int(std::max<int64_t>(1, std::min<int64_t>(o.microBatches, o.batch)));
  while (o.batch % m != 0) --m;
  return m;
}

class PipelineStage : public Pass {
 public:
  const char* name() const override { return "pipeline"; }
  bool applies(const PassContext& c) const override {
    return c.opts.stageComm && c.opts.stageComm->size() > 1;
  }
  Result<std::string> run(PassContext& c) override {
    const int stages = c.opts.stageComm->size(), me = c.opts.stageComm->rank();
    const int micro = microBatchesOf(c.opts);
    auto stage = pipelineStages(c.g, stages, c.opts.stagePlacements);
    if (!stage) return stage.error();
    const std::vector<bool> needsGrad = dependsOnParams(c.g);
    StageBuilder b{c.g, *stage, needsGrad, me, micro, c, {}, {}, {}, {}, {}, {}, {}};
    const auto readers = consumers(c.g);
    for (size_t v = 0; v < c.g.values.size(); ++v) {
      const NodeId p = c.g.values[v].producer;
      if (p < 0 || (*stage)[size_t(p)] < 0) continue;
      for (NodeId r : readers[v])
        if ((*stage)[size_t(r)] > (*stage)[size_t(p)]) {
          b.crossing.emplace(ValueId(v), int64_t(b.crossing.size()));
          break;
        }
    }
    for (int m = 0; m < micro; ++m)
      for (size_t i = 0; i < c.g.nodes.size(); ++i)
        if ((*stage)[i] == me)
          if (Status s = b.copy(i, m, readers); !s) return s.error();
    const std::string loss = c.g.nodes[size_t(c.g.values[c.loss].producer)].name;
    ValueId lossValue = kNoValue;
    if (Status s = b.report(loss, true, lossValue); !s) return s.error();
    std::set<ValueId> pinned{lossValue};
    pinned.insert(b.allSent.begin(), b.allSent.end());
    for (const std::string& m : c.metricNames) {
      if (m == loss) continue;
      ValueId v = kNoValue;
      if (Status s = b.report(m, false, v); !s) return s.error();
      pinned.insert(v);
    }
    if (c.opts.training && b.sent.empty() && me < stages - 1)
      return makeError("pipeline stage " + std::to_string(me) + " has no weights to train");
    // Weights other stages read too: this stage's copy is summed with theirs.
    int64_t tieTag = int64_t(1) << 24;
    for (const StageTie& t : stageTies(c.g, *stage)) {
      ++tieTag;
      if (std::find(t.stages.begin(), t.stages.end(), me) == t.stages.end()) continue;
      c.prog.ties.push_back({c.g.values[size_t(t.param)].name, t.stages, t.source, tieTag});
      c.tieTags[c.g.values[size_t(t.param)].name] = tieTag;
    }
    c.g = std::move(b.h);
    c.loss = lossValue;
    c.pinned = pinned;
    c.roots.assign(pinned.begin(), pinned.end());
    for (const auto& r : c.received) c.alsoWrt.push_back(r.value);
    return "stage " + std::to_string(me) + " of " + std::to_string(stages) + ", " +
           std::to_string(micro) + " micro-batches";
  }
};

// Each tied weight's gradient summed with the other stages' parts before anything
// reads it.
Status sumTies(PassContext& c) {
  Graph& g = c.g;
  for (auto& [param, grad] : c.grads) {
    auto tag = c.tieTags.find(g.values[size_t(param)].name);
    if (tag == c.tieTags.end()) continue;
    const Program::Tie* tie = nullptr;
    for (const Program::Tie& t : c.prog.ties)
      if (t.name == tag->first) tie = &t;
    Node sum;
    sum.name = tag->first + "/grad/tied";
    sum.op = &internal_ops::pipeTie();
    sum.backward = true;
    sum.origin = tag->first;  // after its gradient, wherever that is complete
    sum.inputs = {grad};
    sum.attrs.set("stages", std::vector<int64_t>(tie->stages.begin(), tie->stages.end()));
    sum.attrs.set("tag", tag->second);
    auto id = g.addNode(std::move(sum));
    if (!id) return id.error();
    grad = g.nodes[size_t(*id)].outputs[0];
  }
  return {};
}

class PipelineGradients : public Pass {
 public:
  const char* name() const override { return "pipeline gradients"; }
  bool applies(const PassContext& c) const override {
    return c.opts.training && (!c.received.empty() || !c.tieTags.empty());
  }
  Result<std::string> run(PassContext& c) override {
    Graph& g = c.g;
    if (Status s = sumTies(c); !s) return s.error();
    for (const PassContext::Received& r : c.received) {
      ValueId grad = kNoValue;
      if (auto it = c.receivedGrads.find(r.value); it != c.receivedGrads.end()) grad = it->second;
      const std::string name = g.values[size_t(r.value)].name;
      if (grad == kNoValue) {  // read by nothing that reaches the loss: zeros go back
        Node zero;
        zero.name = name + "/grad/zero";
        zero.op = &internal_ops::constant();
        zero.attrs.set("value", 0.0);
        zero.attrs.set("shape", std::vector<int64_t>(g.values[size_t(r.value)].desc.shape));
        zero.backward = true;
        zero.origin = g.nodes[size_t(g.values[size_t(r.value)].producer)].name;
        auto id = g.addNode(std::move(zero));
        if (!id) return id.error();
        grad = g.nodes[size_t(*id)].outputs[0];
      }
      Node send;
      send.name = name + "/grad/send";
      send.op = &internal_ops::pipeSend();
      send.backward = true;
      send.origin = g.nodes[size_t(g.values[size_t(r.value)].producer)].name;
      send.inputs = {grad};
      send.attrs.set("peer", int64_t(r.peer));
      send.attrs.set("tag", r.tag);
      auto id = g.addNode(std::move(send));
      if (!id) return id.error();
      const ValueId done = g.nodes[size_t(*id)].outputs[0];
      c.pinned.insert(done);
      c.roots.push_back(done);
    }
    return counted(c.received.size(), "gradient") + " sent back";
  }
};

// 1F1B for stage s of S over M micro-batches: the position of each (backward?, m).
std::map<std::pair<bool, int>, int> oneForwardOneBackward(int s, int stages, int micro) {
  std::map<std::pair<bool, int>, int> at;
  const int warm = std::min(stages - 1 - s, micro);
  int next = 0, f = 0;
  for (; f < warm; ++f) at[{false, f}] = next++;
  for (int b = 0; b < micro; ++b) {
    if (f < micro) at[{false, f++}] = next++;
    at[{true, b}] = next++;
  }
  return at;
}

// The sends to each peer, and the receives from each, in the order both ends take
// them: by micro-batch, then tag. A transport that pairs messages by their order
// rather than their tags (NCCL) then pairs each with its own.
std::map<std::pair<const OpDef*, int64_t>, std::vector<std::pair<std::pair<int, int64_t>, size_t>>>
messageLines(const PassContext& c) {
  std::map<std::pair<const OpDef*, int64_t>,
           std::vector<std::pair<std::pair<int, int64_t>, size_t>>>
      lines;
  for (size_t i = 0; i < c.g.nodes.size(); ++i) {
    const Node& node = c.g.nodes[i];
    if (node.op != &internal_ops::pipeSend() && node.op != &internal_ops::pipeRecv()) continue;
    auto m = c.microOf.find(node.backward ? node.origin : node.name);
    const int micro = m == c.microOf.end() ? -1 : m->second;
    lines[{node.op, node.attrs.i("peer")}].push_back({{micro, node.attrs.i("tag")}, i});
  }
  for (auto& [peer, line] : lines) std::sort(line.begin(), line.end());
  return lines;
}

class PipelineSchedule : public Pass {
 public:
  const char* name() const override { return "pipeline schedule"; }
  bool applies(const PassContext& c) const override {
    return c.opts.training && c.opts.stageComm && c.opts.stageComm->size() > 1;
  }
  Result<std::string> run(PassContext& c) override {
    Graph& g = c.g;
    const int stages = c.opts.stageComm->size(), me = c.opts.stageComm->rank();
    const auto at = oneForwardOneBackward(me, stages, microBatchesOf(c.opts));
    // Each node's place: its micro-batch's forward or backward, else right after what
    // it reads.
    const size_t n = g.nodes.size();
    std::vector<int> key(n, -1);
    for (size_t i = 0; i < n; ++i) {
      const Node& node = g.nodes[i];
      if (node.op == &internal_ops::pipeTie()) {  // once this stage's backward is all done:
        key[i] = int(at.size());                  // its last gradients may be others' inputs
        continue;
      }
      auto m = c.microOf.find(node.backward ? node.origin : node.name);
      if (m != c.microOf.end()) {
        key[i] = at.at({node.backward, m->second});
        continue;
      }
      for (ValueId v : node.inputs)
        if (NodeId p = g.values[size_t(v)].producer; p >= 0)
          key[i] = std::max(key[i], key[size_t(p)]);
    }
    std::vector<std::vector<int>> users(n);
    std::vector<int> waiting(n, 0);
    auto after = [&](size_t before, size_t i) {
      users[before].push_back(int(i));
      ++waiting[i];
    };
    // Nodes that only act (a bucket's start and wait, an update) keep their order.
    size_t lastAct = n;
    for (size_t i = 0; i < n; ++i) {
      for (ValueId v : g.nodes[i].inputs)
        if (NodeId p = g.values[size_t(v)].producer; p >= 0) after(size_t(p), i);
      if (!g.nodes[i].outputs.empty()) continue;
      if (lastAct < n) after(lastAct, i);
      lastAct = i;
    }
    for (const auto& [peer, line] : messageLines(c))
      for (size_t k = 1; k < line.size(); ++k) after(line[k - 1].second, line[k].second);
    using Item = std::pair<std::pair<int, size_t>, size_t>;  // ((key, order), node)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
    for (size_t i = 0; i < n; ++i)
      if (waiting[i] == 0) ready.push({{key[i], i}, i});
    std::vector<size_t> order;
    while (!ready.empty()) {
      const size_t i = ready.top().second;
      ready.pop();
      order.push_back(i);
      for (int u : users[i])
        if (--waiting[size_t(u)] == 0) ready.push({{key[size_t(u)], size_t(u)}, size_t(u)});
    }
    if (order.size() != n) return makeError("the pipeline's step has a cycle");
    std::vector<Node> old = std::move(g.nodes);
    g.nodes.clear();
    for (size_t i : order) {
      for (ValueId v : old[i].outputs) g.values[size_t(v)].producer = NodeId(g.nodes.size());
      g.nodes.push_back(std::move(old[i]));
    }
    return "1F1B over " + std::to_string(at.size() / 2) + " micro-batches";
  }
};

}  // namespace

std::unique_ptr<Pass> pipelinePass() {
  return std::make_unique<PipelineStage>();
}
std::unique_ptr<Pass> pipelineGradientsPass() {
  return std::make_unique<PipelineGradients>();
}
std::unique_ptr<Pass> pipelineSchedulePass() {
  return std::make_unique<PipelineSchedule>();
}

}  // namespace netloom
