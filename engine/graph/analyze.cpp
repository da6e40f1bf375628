#include "engine/graph/analyze.h"

#include <algorithm>
#include <set>

#include "engine/graph/blocks.h"
#include "engine/graph/graph.h"
#include "kernels/core/checked.h"

namespace netloom {

void measureNode(const Graph& g, const Node& n, NodeCost& cost) {
  InferCtx ctx{n.attrs, {}, {}, {}, {}, -1};
  for (int i = 0; i < n.numDataInputs(); ++i) ctx.in.push_back(g.values[n.inputs[i]].desc);
  for (int i = n.numDataInputs(); i < int(n.inputs.size()); ++i) {
    const Value& v = g.values[n.inputs[i]];
    ctx.params.push_back(v.desc);
    // Each size fits (shape inference checked it); sums of many saturate.
    if (v.kind == ValueKind::Param) cost.params = saturatingAdd(cost.params, numel(v.desc.shape));
    if (v.kind == ValueKind::Buffer)
      cost.buffers = saturatingAdd(cost.buffers, numel(v.desc.shape));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const TensorDesc& d = g.values[n.outputs[i]].desc;
    ctx.out.push_back(d);
    if (!n.op->outputs[i].hidden)
      cost.activationBytes =
          saturatingAdd(cost.activationBytes, numel(d.shape) * int64_t(dtypeSize(d.dtype)));
  }
  if (n.op->flops) cost.flops = n.op->flops(ctx);
}

namespace {

// Problems in model order, so a list reads top to bottom like the file.
void sortByModelOrder(std::vector<ModelProblem>& problems,
                      const std::map<std::string, int>& index) {
  std::stable_sort(problems.begin(), problems.end(),
                   [&](const ModelProblem& a, const ModelProblem& b) {
                     auto pos = [&](const std::string& name) {
                       auto it = index.find(name);
                       return it == index.end() ? -1 : it->second;
                     };
                     return pos(a.node) < pos(b.node);
                   });
}

ModelAnalysis analyzeFlat(const proto::ModelDef& model, int64_t batch) {
  std::vector<ModelAnalyzer::NodeRef> refs;
  refs.reserve(model.nodes_size());
  for (int i = 0; i < model.nodes_size(); ++i) refs.push_back({i, &model.nodes(i)});
  ModelAnalyzer analyzer;
  analyzer.reset(refs, batch);
  return analyzer.analysis();
}

}  // namespace

ModelAnalysis analyzeModel(const proto::ModelDef& model, int64_t batch) {
  if (!hasInstances(model)) return analyzeFlat(model, batch);
  // Analyse the inlined model, then fold what each instance became back into it:
  // its output shapes, its costs, and its inner nodes' problems.
  std::vector<ModelProblem> problems;
  InlinedModel flat = inlineBlocks(model, problems);
  ModelAnalysis inner = analyzeFlat(flat.model, batch);
  ModelAnalysis out;
  out.problems = std::move(problems);
  for (ModelProblem& p : inner.problems) {
    auto it = flat.instanceOf.find(p.node);
    if (it != flat.instanceOf.end()) {
      p.message = "in block instance '" + it->second + "': " + p.message;
      p.node = it->second;
      p.port = -1;
    }
    out.problems.push_back(std::move(p));
  }
  for (auto& [name, na] : inner.nodes) {
    auto it = flat.instanceOf.find(name);
    if (it == flat.instanceOf.end()) {
      out.nodes[name] = na;
      continue;
    }
    NodeAnalysis& inst = out.nodes[it->second];
    inst.params = saturatingAdd(inst.params, na.params);
    inst.flops = saturatingAdd(inst.flops, na.flops);
    inst.activationBytes = saturatingAdd(inst.activationBytes, na.activationBytes);
  }
  for (const proto::NodeDef& nd : model.nodes()) {
    if (!findBlock(model, nd.op())) continue;
    NodeAnalysis& inst = out.nodes[nd.name()];
    auto outs = flat.outputsOf.find(nd.name());
    inst.known = outs != flat.outputsOf.end();
    if (!inst.known) continue;
    for (const std::string& ref : outs->second) {
      auto [node, port] = splitInputRef(ref);
      auto src = inner.nodes.find(node);
      if (src == inner.nodes.end() || port >= int(src->second.outputs.size())) {
        inst.outputs.clear();
        break;
      }
      inst.outputs.push_back(src->second.outputs[port]);
    }
  }
  std::map<std::string, int> index;
  for (int i = 0; i < model.nodes_size(); ++i) index.emplace(model.nodes(i).name(), i);
  sortByModelOrder(out.problems, index);
  return out;
}

}  // namespace netloom
