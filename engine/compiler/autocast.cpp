// Autocast (train.precision bf16 or fp16): RoundHalf around the matrix ops.
#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"

namespace netloom {

std::vector<std::string> insertAutocast(Graph& g, const std::string& format) {
  const OpDef* round = &internal_ops::roundHalf();
  std::vector<std::string> rounded;
  std::vector<Node> old = std::move(g.nodes);
  g.nodes.clear();
  std::map<ValueId, ValueId> replaced;  // a matrix op's output -> its rounded value
  std::set<ValueId> isRounded;
  auto roundOf = [&](ValueId v, const std::string& name, const std::string& origin) -> ValueId {
    Node r;
    r.name = name;
    r.op = round;
    r.attrs.set("format", format);
    r.inputs = {v};
    r.origin = origin;
    auto id = g.addNode(std::move(r));  // a float tensor always passes inference
    ValueId out = g.nodes[*id].outputs[0];
    isRounded.insert(out);
    return out;
  };
  for (Node& n : old) {
    for (ValueId& v : n.inputs)
      if (auto it = replaced.find(v); it != replaced.end()) v = it->second;
    bool matrix = n.op->autocast;
    if (matrix)
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        ValueId v = n.inputs[k];
        if (g.values[v].desc.dtype != DType::F32 || isRounded.count(v)) continue;
        n.inputs[k] = roundOf(v, n.name + "/autocast/in" + std::to_string(k), n.name);
      }
    NodeId id = NodeId(g.nodes.size());
    for (ValueId v : n.outputs) g.values[v].producer = id;
    std::string name = n.name;
    std::vector<ValueId> outputs = n.outputs;
    g.nodes.push_back(std::move(n));
    if (!matrix) continue;
    for (size_t k = 0; k < outputs.size(); ++k)
      if (g.values[outputs[k]].desc.dtype == DType::F32)
        replaced[outputs[k]] =
            roundOf(outputs[k], name + "/autocast/out" + std::to_string(k), name);
    rounded.push_back(name);
  }
  return rounded;
}

}  // namespace netloom
