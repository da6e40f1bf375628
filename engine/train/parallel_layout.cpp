#include "engine/train/parallel_layout.h"

#include <set>

#include "engine/compiler/pipeline.h"
#include "engine/compiler/sbp_plan.h"
#include "engine/graph/blocks.h"

namespace netloom {
namespace {

std::string bytesText(int64_t b) {
  if (b < 10 * 1024) return std::to_string(b) + " B";
  if (b < 10 * 1024 * 1024) return std::to_string(b / 1024) + " KiB";
  return std::to_string(b / (1024 * 1024)) + " MiB";
}

// The model built at `batch`, blocks inlined.
Result<Graph> built(const proto::Project& project, int64_t batch) {
  auto flat = inlineBlocks(project.model());
  if (!flat) return flat.error();
  return buildGraph(*flat, batch);
}

int64_t batchOf(const proto::Project& p) {
  return p.train().batch_size() > 0 ? p.train().batch_size() : 32;
}

// (node, output port) of a value.
std::pair<std::string, int> outputOf(const Graph& g, ValueId v) {
  const Node& n = g.nodes[size_t(g.values[size_t(v)].producer)];
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (n.outputs[k] == v) return {n.name, int(k)};
  return {n.name, 0};
}

// The optimizer's state tensors per parameter: Adam's two moments, SGD's momentum.
int stateCopies(const proto::Project& p) {
  const proto::Optimizer& o = p.train().optimizer();
  if (o.kind() == proto::Optimizer::SGD) return o.momentum() > 0 ? 1 : 0;
  return 2;
}

// A pipeline's fullest stage: its weights and the activations its nodes write.
void stageMemory(const proto::Project& p, const Graph& g, const std::vector<int>& stage,
                 ParallelLayout& out) {
  std::map<int, int64_t> weights, activations;
  std::set<ValueId> seen;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (stage[i] < 0) continue;
    const Node& n = g.nodes[i];
    for (size_t k = size_t(n.numDataInputs()); k < n.inputs.size(); ++k)
      if (seen.insert(n.inputs[k]).second) weights[stage[i]] += bytesOf(g.values[n.inputs[k]].desc);
    for (ValueId v : n.outputs) activations[stage[i]] += bytesOf(g.values[v].desc);
  }
  for (const auto& [s, w] : weights) out.weights = std::max(out.weights, w);
  for (const auto& [s, a] : activations) out.activations = std::max(out.activations, a);
  out.gradients = out.weights;
  out.optimizerState = out.weights * stateCopies(p);
}

void planSplits(const proto::Project& p, const Graph& g, ParallelLayout& out) {
  std::vector<SbpHint> hints;
  for (const proto::SbpHint& h : p.train().distributed().sbp())
    hints.push_back({h.node(), h.signature()});
  auto plan = planSbp(
      g, out.parts,
      SbpPlanOptions{hints, out.strategy == ParallelLayout::Strategy::Tensor, false, {}, {}});
  if (!plan) {
    out.error = plan.error().message;
    return;
  }
  const RankMemory m = plan->memory(g, stateCopies(p));
  out.weights = m.weights;
  out.gradients = m.gradients;
  out.optimizerState = m.optimizerState;
  out.activations = m.activations;
  out.boxing = m.boxing;
  if (out.strategy == ParallelLayout::Strategy::Data && out.zero > 0) {
    out.optimizerState /= out.ranks;  // ZeRO's shard
    if (out.zero >= 2) out.gradients /= out.ranks;
  }
  for (const auto& [id, sig] : plan->signature) {
    out.signature[g.nodes[size_t(id)].name] = sig.str();
    for (const Sbp& w : sig.params)
      if (w.isSplit()) out.splitWeights.insert(g.nodes[size_t(id)].name);
  }
  for (const auto& [v, sbp] : plan->sbp)
    if (g.values[size_t(v)].producer >= 0)
      out.wires[outputOf(g, v)] = describeLocal(g.values[size_t(v)].desc.shape, sbp, out.parts);
  for (const SbpBoxingStep& b : plan->boxings) {
    const Node& reader = g.nodes[size_t(b.reader)];
    for (size_t k = 0; k < reader.inputs.size(); ++k)
      if (reader.inputs[k] == b.value && int(k) < reader.numDataInputs())
        out.boxings[{reader.name, int(k)}] = {
            b.box.str() + " " + b.from.str() + " -> " + b.to.str() + ", " +
                bytesText(b.box.bytesPerRank) + " per rank each step",
            b.box.bytesPerRank};
  }
}

}  // namespace

std::string ParallelLayout::describe() const {
  const std::string of = " of " + std::to_string(ranks) + " ranks";
  switch (strategy) {
    case Strategy::None: return "one rank";
    case Strategy::Tensor: return "tensor parallel ×" + std::to_string(parts) + of;
    case Strategy::Pipeline: return std::to_string(parts) + " pipeline stages" + of;
    case Strategy::Data: break;
  }
  return (zero > 0 ? "ZeRO-" + std::to_string(zero) + ", " : std::string()) + "data parallel" + of;
}

bool ParallelLayout::splits(const std::string& node) const {
  return strategy == Strategy::Tensor && splitWeights.count(node) > 0;
}

ParallelLayout layoutParallel(const proto::Project& p) {
  ParallelLayout out;
  const proto::Distributed& d = p.train().distributed();
  out.ranks = std::max(1, d.ranks());
  out.zero = d.zero();
  if (out.ranks <= 1) return out;
  using S = ParallelLayout::Strategy;
  out.strategy = d.pipeline_stages() > 1   ? S::Pipeline
                 : d.tensor_parallel() > 1 ? S::Tensor
                                           : S::Data;
  out.parts = out.strategy == S::Pipeline ? d.pipeline_stages()
              : out.strategy == S::Tensor ? d.tensor_parallel()
                                          : out.ranks;
  if (out.ranks % out.parts != 0) {
    out.error = "train.distributed: " + std::to_string(out.parts) + " does not divide the " +
                std::to_string(out.ranks) + " ranks";
    return out;
  }
  auto g = built(p, out.strategy == S::Pipeline ? batchOf(p) : batchOf(p) * out.parts);
  if (!g) {
    out.error = g.error().message;
    return out;
  }
  if (out.strategy == S::Pipeline) {
    std::map<std::string, int> placed;
    for (const proto::StageHint& h : d.stages()) placed[h.node()] = h.stage();
    auto stages = pipelineStages(*g, out.parts, placed);
    if (!stages) {
      out.error = stages.error().message;
      return out;
    }
    for (size_t i = 0; i < g->nodes.size(); ++i)
      if ((*stages)[i] >= 0) out.stage[g->nodes[i].name] = (*stages)[i];
    stageMemory(p, *g, *stages, out);
    return out;
  }
  planSplits(p, *g, out);
  return out;
}

std::string signatureFor(const proto::Project& project, const std::string& node,
                         const std::string& kind, int parts) {
  auto g = built(project, batchOf(project) * std::max(1, parts));
  if (!g) return {};
  const Node* n = g->findNode(node);
  if (!n) return {};
  SbpCtx c{n->attrs, {}, {}, {}};
  for (size_t k = 0; k < n->inputs.size(); ++k)
    (int(k) < n->numDataInputs() ? c.in : c.params).push_back(g->values[n->inputs[k]].desc.shape);
  for (ValueId v : n->outputs) c.out.push_back(g->values[v].desc.shape);
  for (const SbpSignature& s : sbpSignatures(*n->op, c)) {
    const bool weights = !s.params.empty();
    const Sbp w = weights ? s.params[0] : Sbp::broadcast();
    const Sbp in = s.in.empty() ? Sbp::broadcast() : s.in[0];
    if ((kind == "column" && weights && w == Sbp::split(0)) ||
        (kind == "row" && weights && w == Sbp::split(1)) ||
        (kind == "heads" && !weights && in == Sbp::split(1)) ||
        (kind == "data" && in == Sbp::split(0) && !w.isSplit()))
      return s.str();
  }
  return {};
}

}  // namespace netloom
