#include "engine/compiler/sbp_plan.h"

#include <cstdio>
#include <set>

namespace netloom {

namespace {

// A loss or metric over batch-split inputs: each rank's own mean, partial.
std::vector<SbpSignature> reportSignatures(const SbpCtx& c) {
  std::vector<SbpSignature> out{
      {std::vector<Sbp>(c.in.size()), {}, std::vector<Sbp>(c.out.size())}};
  out.push_back({std::vector<Sbp>(c.in.size(), Sbp::split(0)),
                 {},
                 std::vector<Sbp>(c.out.size(), Sbp::partial())});
  return out;
}

bool divides(const SbpSignature& s, const SbpCtx& c, int ranks) {
  for (size_t k = 0; k < s.in.size() && k < c.in.size(); ++k)
    if (!localShape(c.in[k], s.in[k], ranks)) return false;
  for (size_t k = 0; k < s.params.size() && k < c.params.size(); ++k)
    if (!localShape(c.params[k], s.params[k], ranks)) return false;
  for (size_t k = 0; k < s.out.size() && k < c.out.size(); ++k)
    if (!localShape(c.out[k], s.out[k], ranks)) return false;
  return true;
}

// What signature `s` needs of input k of `n` (data inputs, then parameters).
Sbp wantedOf(const SbpSignature& s, const Node& n, size_t k) {
  const size_t data = size_t(n.numDataInputs());
  return k < data ? s.in[k] : s.params[k - data];
}

bool splitsParams(const SbpSignature& s) {
  for (const Sbp& p : s.params)
    if (p.isSplit()) return true;
  return false;
}

// The time on the plan's link of boxing `n`'s inputs for signature `s` (a parameter
// not yet laid out costs nothing: its first reader lays it out).
double inputSeconds(const Graph& g, const SbpPlan& plan, const Node& n, const SbpSignature& s) {
  double cost = 0;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    auto have = plan.sbp.find(n.inputs[k]);
    if (have == plan.sbp.end()) continue;
    const Boxing b =
        boxing(have->second, wantedOf(s, n, k), g.values[n.inputs[k]].desc, plan.ranks);
    cost += plan.link.seconds(b.bytesPerRank, b.messages);
  }
  return cost;
}

// Between signatures that cost alike now, what their outputs leave to pay later: a
// partial output must be summed by some reader (2), a broadcast one is held whole on
// every rank (1), a split one neither. (Flatten after a channel split: its split
// signature, not a partial one that a reduce-scatter would have to undo.)
int owedLater(const SbpSignature& s) {
  int owed = 0;
  for (const Sbp& o : s.out)
    owed += o.kind == Sbp::Kind::Partial ? 2 : o.kind == Sbp::Kind::Broadcast ? 1 : 0;
  return owed;
}

std::string listed(const std::vector<SbpSignature>& sigs) {
  std::string s;
  for (const SbpSignature& x : sigs) s += (s.empty() ? "" : "; ") + x.str();
  return s;
}

}  // namespace

Sbp gradientSbp(const Sbp& param) {
  return dual(param);
}

int64_t SbpPlan::gradientBytes(const Graph& g) const {
  int64_t total = 0;
  std::set<ValueId> seen;
  for (const auto& [id, sig] : signature) {
    const Node& n = g.nodes[size_t(id)];
    for (size_t k = size_t(n.numDataInputs()); k < n.inputs.size(); ++k) {
      const ValueId v = n.inputs[k];
      if (!seen.insert(v).second || gradientSbp(sbp.at(v)).kind != Sbp::Kind::Partial) continue;
      Shape local = *localShape(g.values[v].desc.shape, sbp.at(v), ranks);
      total += boxing(Sbp::partial(), Sbp::broadcast(),
                      TensorDesc{local, g.values[v].desc.dtype, {}}, ranks)
                   .bytesPerRank;
    }
  }
  return total;
}

RankMemory SbpPlan::memory(const Graph& g, int stateCopies) const {
  RankMemory m;
  std::set<ValueId> params;
  auto localBytes = [&](ValueId v) {
    const TensorDesc& d = g.values[v].desc;
    auto local = localShape(d.shape, sbp.at(v), ranks);
    return numel(local ? *local : d.shape) * int64_t(dtypeSize(d.dtype));
  };
  for (const auto& [id, sig] : signature) {
    const Node& n = g.nodes[size_t(id)];
    for (size_t k = size_t(n.numDataInputs()); k < n.inputs.size(); ++k)
      if (params.insert(n.inputs[k]).second) m.weights += localBytes(n.inputs[k]);
    for (ValueId v : n.outputs) m.activations += localBytes(v);
  }
  m.gradients = m.weights;
  m.optimizerState = m.weights * stateCopies;
  for (const SbpBoxingStep& b : boxings)
    m.boxing = std::max(m.boxing, numel(g.values[b.value].desc.shape) *
                                      int64_t(dtypeSize(g.values[b.value].desc.dtype)));
  return m;
}

int64_t SbpPlan::bytesPerStep() const {
  int64_t total = 0;
  for (const SbpBoxingStep& b : boxings) total += b.box.bytesPerRank;
  return total;
}

double SbpPlan::secondsPerStep() const {
  double total = 0;
  for (const SbpBoxingStep& b : boxings) total += link.seconds(b.box.bytesPerRank, b.box.messages);
  return total;
}

Result<SbpPlan> planSbp(const Graph& g, int ranks, const SbpPlanOptions& opts) {
  const std::vector<SbpHint>& hints = opts.hints;
  const bool splitWeights = opts.splitWeights, wholeInputs = opts.wholeInputs;
  std::map<std::string, std::string> wanted;
  for (const auto& [node, sig] : hints) {
    if (!g.findNode(node))
      return makeError("an SBP hint names node '" + node + "', which the model has not");
    wanted[node] = sig;
  }
  SbpPlan plan;
  plan.ranks = ranks;
  plan.link = opts.link;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (auto it = opts.held.find(g.values[v].name); it != opts.held.end())
      plan.sbp[ValueId(v)] = it->second;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.backward) continue;
    SbpCtx c{n.attrs, {}, {}, {}};
    for (size_t k = 0; k < n.inputs.size(); ++k)
      (int(k) < n.numDataInputs() ? c.in : c.params).push_back(g.values[n.inputs[k]].desc.shape);
    for (ValueId v : n.outputs) c.out.push_back(g.values[v].desc.shape);
    std::vector<SbpSignature> sigs;
    if (n.op->external && wholeInputs)
      sigs = {{{}, {}, std::vector<Sbp>(c.out.size())}};
    else if (n.op->external)  // data: split by the batch where it divides
      sigs = {{{}, {}, std::vector<Sbp>(c.out.size(), Sbp::split(0))},
              {{}, {}, std::vector<Sbp>(c.out.size())}};
    else if ((n.op->role == OpRole::Loss || n.op->role == OpRole::Metric) && wholeInputs)
      sigs = {reportSignatures(c).front()};  // each rank the whole batch's value
    else if (n.op->role == OpRole::Loss || n.op->role == OpRole::Metric)
      sigs = reportSignatures(c);
    else
      sigs = sbpSignatures(*n.op, c);
    const auto hint = wanted.find(n.name);
    bool mustSplit = false;
    if (splitWeights && hint == wanted.end())
      for (const SbpSignature& s : sigs)
        mustSplit = mustSplit || (splitsParams(s) && divides(s, c, ranks));
    const SbpSignature* best = nullptr;
    double bestCost = 0;
    int bestOwed = 0;
    for (const SbpSignature& s : sigs) {
      if (hint != wanted.end() && s.str() != hint->second) continue;
      if (mustSplit && !splitsParams(s)) continue;
      if (!divides(s, c, ranks)) {
        if (hint == wanted.end()) continue;
        for (size_t k = 0; k < s.out.size(); ++k)
          if (auto l = localShape(c.out[k], s.out[k], ranks); !l)
            return makeError("node '" + n.name + "': " + l.error().message);
        return makeError("node '" + n.name + "': signature " + s.str() + " does not divide by " +
                         std::to_string(ranks) + " ranks");
      }
      const double cost = inputSeconds(g, plan, n, s);
      const int owed = owedLater(s);
      if (!best || cost < bestCost || (cost == bestCost && owed < bestOwed))
        best = &s, bestCost = cost, bestOwed = owed;
    }
    if (!best)
      return makeError(
          "node '" + n.name + "': " +
          (hint != wanted.end()
               ? "has no signature '" + hint->second + "'; it takes: " + listed(sigs)
               : std::string("no signature of it divides by ") + std::to_string(ranks) + " ranks"));
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ValueId v = n.inputs[k];
      const Sbp want = wantedOf(*best, n, k);
      if (int(k) >= n.numDataInputs() && !plan.sbp.count(v))
        plan.sbp[v] = want;  // its first reader's
      const Boxing b = boxing(plan.sbp[v], want, g.values[v].desc, ranks);
      if (b.kind != Boxing::Kind::None)
        plan.boxings.push_back({v, NodeId(id), plan.sbp[v], want, b});
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) plan.sbp[n.outputs[k]] = best->out[k];
    plan.signature[NodeId(id)] = *best;
  }
  return plan;
}

std::string SbpPlan::explain(const Graph& g) const {
  std::string s =
      "parallel plan at " + std::to_string(ranks) + " ranks (SBP per value, shape per rank):\n";
  for (const auto& [id, sig] : signature) {
    const Node& n = g.nodes[size_t(id)];
    s += "  " + n.name + " (" + n.op->name + "): " + sig.str() + "\n";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (int(k) < n.numDataInputs()) continue;
      const Value& v = g.values[n.inputs[k]];
      s += "    param " + v.name + ": " + describeLocal(v.desc.shape, sbp.at(n.inputs[k]), ranks) +
           "\n";
    }
    for (ValueId out : n.outputs)
      s += "    -> " + g.values[out].name + ": " +
           describeLocal(g.values[out].desc.shape, sbp.at(out), ranks) + "\n";
  }
  for (const SbpBoxingStep& b : boxings)
    s += "  boxing " + b.from.str() + " -> " + b.to.str() + " of " + g.values[b.value].name +
         " for " + g.nodes[size_t(b.reader)].name + ": " + b.box.str() + ", " +
         std::to_string(b.box.bytesPerRank) + " bytes per rank\n";
  char timing[32];
  std::snprintf(timing, sizeof timing, "%.1f", secondsPerStep() * 1e6);
  s += "  boxing in all: " + std::to_string(bytesPerStep()) + " bytes per rank per forward pass, " +
       timing + " µs on the link (" + link.describe() + ")" +
       " (the backward pass moves as much again, each boxing's dual); the partial gradients " +
       "summed each step: " + std::to_string(gradientBytes(g)) + " bytes per rank\n";
  const RankMemory m = memory(g, 2);
  s += "  each rank holds: weights " + std::to_string(m.weights) + ", gradients " +
       std::to_string(m.gradients) + ", Adam's state " + std::to_string(m.optimizerState) +
       ", activations " + std::to_string(m.activations) + ", boxing buffers " +
       std::to_string(m.boxing) + " bytes\n";
  return s;
}

}  // namespace netloom
