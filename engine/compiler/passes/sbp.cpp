// "sbp": tensor parallelism. The forward graph, built at the tensor group's batch, is
// planned over the group's ranks (planSbp: the hints, then each node splitting its
// weights where it can, at the fewest bytes moved), and becomes this rank's part of
// it: every value takes the shape of its part, the attributes that say sizes follow
// (OpDef::localAttrs), and a Boxing node moves a value wherever a reader needs
// another layout. A partial parameter (a row-parallel Linear's bias) is held whole
// and kept by rank 0 alone. Autodiff then differentiates the parts, each boxing by
// its adjoint, so that a broadcast value's gradient is partial and a split one's
// split: the gradient buckets sum the whole parameters' over every rank.
#include <map>

#include "engine/compiler/pass.h"
#include "engine/ops/internal_ops.h"
#include "kernels/core/rng.h"

namespace netloom {
namespace {

struct Lowered {
  Graph& g;
  const SbpPlan& plan;
  int parts, index;
  std::map<std::pair<ValueId, std::string>, ValueId> boxed;  // (value, to) -> its boxing
  std::vector<Node> nodes;                                   // the new order

  ValueShard shardOf(ValueId v, const Sbp& sbp) const {
    return ValueShard{sbp, g.values[v].desc.shape, parts, index};
  }

  // `v` laid out as `to` for a reader: itself, or the output of one boxing per layout.
  ValueId box(ValueId v, const Sbp& from, const Sbp& to) {
    if (from == to) return v;
    auto key = std::make_pair(v, to.str());
    if (auto it = boxed.find(key); it != boxed.end()) return it->second;
    const ValueShard& have = g.values[v].shard;
    Value out;
    out.name = g.values[v].name + "@" + to.str();
    out.desc = TensorDesc{*localShape(have.full, to, parts), g.values[v].desc.dtype, {}};
    out.shard = ValueShard{to, have.full, parts, index};
    out.requiresGrad = g.values[v].requiresGrad || g.values[v].kind == ValueKind::Param;
    out.producer = NodeId(nodes.size());
    ValueId id = g.addValue(std::move(out));
    Node n;
    n.name = g.values[v].name + " " + from.str() + "->" + to.str();
    n.op = &internal_ops::boxing();
    n.attrs.set("from", from.str());
    n.attrs.set("to", to.str());
    n.attrs.set("parts", int64_t(parts));
    n.inputs = {v};
    n.outputs = {id};
    n.origin = g.values[v].name;
    nodes.push_back(std::move(n));
    boxed[key] = id;
    return id;
  }
};

// Every planned value's part shape and layout; a partial parameter is held whole.
Status cutValues(Graph& g, const SbpPlan& plan, int parts, int index) {
  for (const auto& [v, sbp] : plan.sbp) {
    Value& val = g.values[size_t(v)];
    const bool param = val.kind == ValueKind::Param || val.kind == ValueKind::Buffer;
    const Sbp held = param && sbp.kind == Sbp::Kind::Partial ? Sbp::broadcast() : sbp;
    auto local = localShape(val.desc.shape, held, parts);
    if (!local) return makeError("tensor '" + val.name + "': " + local.error().message);
    val.shard = ValueShard{held, val.desc.shape, parts, index};
    val.desc.shape = *local;
  }
  return {};
}

// The nodes again, each reading its inputs as its signature needs them.
void insertBoxings(Lowered& l) {
  std::vector<Node> old = std::move(l.g.nodes);
  l.g.nodes.clear();
  for (size_t id = 0; id < old.size(); ++id) {
    Node n = std::move(old[id]);
    if (auto sig = l.plan.signature.find(NodeId(id)); sig != l.plan.signature.end()) {
      const int data = n.numDataInputs();
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const ValueId v = n.inputs[k];
        const Sbp& want = int(k) < data ? sig->second.in[k] : sig->second.params[k - size_t(data)];
        n.inputs[k] = l.box(v, l.g.values[v].shard.sbp, want);
      }
    }
    for (ValueId v : n.outputs) l.g.values[v].producer = NodeId(l.nodes.size());
    l.nodes.push_back(std::move(n));
  }
  l.g.nodes = std::move(l.nodes);
}

// A node writing a split value draws its random numbers (dropout's masks) apart from
// the other parts': its stream is salted with its part, else every part would repeat
// the first one's pattern. Nodes writing whole values keep theirs, so that every rank
// draws the same.
void saltParts(Node& n, const Graph& g, int part) {
  if (!n.attrs.has("__salt")) return;
  for (ValueId v : n.outputs)
    if (g.values[v].shard.split()) {
      const uint64_t salt = uint64_t(n.attrs.i("__salt"));
      n.attrs.set("__salt", int64_t(hashCombine(salt, uint64_t(part) + 1) >> 1));
      return;
    }
}

// Each node's attributes for its parts, and its shapes inferred again: they must be
// the plan's, or the op's signature and its inference disagree.
Status reinfer(Graph& g, int part) {
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    Node& n = g.nodes[id];
    saltParts(n, g, part);
    std::vector<Shape> params, outs;
    for (size_t k = size_t(n.numDataInputs()); k < n.inputs.size(); ++k)
      params.push_back(g.values[n.inputs[k]].desc.shape);
    for (ValueId v : n.outputs) outs.push_back(g.values[v].desc.shape);
    if (n.op->localAttrs) n.op->localAttrs(n.attrs, params, outs, part);
    if (Status s = inferNode(g, NodeId(id)); !s) return s;
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (g.values[n.outputs[k]].desc.shape != outs[k])
        return makeError("node '" + n.name + "' (" + n.op->name + ") computes " +
                         shapeToString(g.values[n.outputs[k]].desc.shape) + " on one rank, " +
                         "where its SBP signature gives " + shapeToString(outs[k]));
  }
  return {};
}

class SbpLowering : public Pass {
 public:
  const char* name() const override { return "sbp"; }
  bool applies(const PassContext& c) const override {
    return c.opts.tensorComm && c.opts.tensorComm->size() > 1;
  }
  Result<std::string> run(PassContext& c) override {
    const int parts = c.opts.tensorComm->size();
    SbpPlanOptions po{
        c.opts.sbpHints, true, c.opts.wholeBatchPerRank, {}, c.opts.tensorComm->link()};
    for (const Value& v : c.g.values)  // as the store holds them, for the model's other plans
      if (const ParamStore::Entry* e = c.store.find(v.name); e && e->shard.parts == parts)
        po.held[v.name] = e->shard.sbp;
    auto plan = planSbp(c.g, parts, po);
    if (!plan) return plan.error();
    if (Status s = cutValues(c.g, *plan, parts, c.opts.tensorComm->rank()); !s) return s.error();
    Lowered l{c.g, *plan, parts, c.opts.tensorComm->rank(), {}, {}};
    insertBoxings(l);
    if (Status s = reinfer(c.g, c.opts.tensorComm->rank()); !s) return s.error();
    int split = 0;
    for (const auto& [v, sbp] : plan->sbp)
      split += (c.g.values[size_t(v)].kind == ValueKind::Param && sbp.isSplit()) ? 1 : 0;
    return "split over " + std::to_string(parts) +
           " ranks: " + counted(size_t(split), "parameter") + " split, " +
           counted(l.boxed.size(), "boxing") + ", " + std::to_string(plan->bytesPerStep()) +
           " bytes per rank forward" + (plan->link.measured ? ", on the measured link" : "");
  }
};

}  // namespace

std::unique_ptr<Pass> sbpPass() {
  return std::make_unique<SbpLowering>();
}

}  // namespace netloom
