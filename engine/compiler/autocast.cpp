// Autocast (train.precision bf16 or fp16): RoundHalf around the matrix ops.
#include <functional>
#include <map>
#include <set>

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
    // Its operands hold bf16 values: a kernel may read them as bf16 (the CPU's
    // convolutions do; the attribute goes to the op's gradients with the others).
    if (matrix && format == "bf16") n.attrs.set("bf16_operands", true);
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

namespace {

bool isMatrixOp(const Node& n) {
  return n.op->name == "Linear" || n.op->name == "MatMul";
}

bool roundsToBf16(const Node& n) {
  return n.op == &internal_ops::roundHalf() && n.attrs.s("format") == "bf16";
}

}  // namespace

std::vector<std::string> storeBf16Operands(Graph& g, const KernelRegistry& kernels,
                                           const KernelSig& context) {
  const std::vector<std::vector<NodeId>> readers = consumers(g);
  // Values that hold bf16 values already: a rounding's, and a ReLU gradient's whose
  // incoming gradient does (it only zeroes some of them).
  std::map<ValueId, bool> exact;
  std::function<bool(ValueId)> isExact = [&](ValueId v) {
    if (auto it = exact.find(v); it != exact.end()) return it->second;
    const NodeId p = g.values[v].producer;
    bool yes = false;
    if (p >= 0 && g.values[v].desc.dtype == DType::F32) {
      const Node& n = g.nodes[size_t(p)];
      yes = roundsToBf16(n) || (n.op->name == "ReLUGrad" && isExact(n.inputs[0]));
    }
    return exact[v] = yes;
  };
  // The matrix ops whose two operands are both exact and which the device can run on
  // bf16 operands (asked as they would stand).
  std::set<NodeId> matrices;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& m = g.nodes[i];
    if (!isMatrixOp(m) || m.inputs.size() < 2 || !isExact(m.inputs[0]) || !isExact(m.inputs[1]))
      continue;
    for (size_t k = 0; k < 2; ++k) g.values[m.inputs[k]].desc.dtype = DType::BF16;
    if (hasKernel(g, m, kernels, context)) matrices.insert(NodeId(i));
    for (size_t k = 0; k < 2; ++k) g.values[m.inputs[k]].desc.dtype = DType::F32;
  }
  if (matrices.empty()) return {};
  // Each operand value becomes bf16 itself where it is a rounding's read only as such
  // operands; otherwise a cast beside it feeds them alone.
  std::map<ValueId, bool> castWhole;
  for (NodeId i : matrices)
    for (size_t k = 0; k < 2; ++k) {
      const ValueId v = g.nodes[size_t(i)].inputs[k];
      castWhole[v] = roundsToBf16(g.nodes[size_t(g.values[v].producer)]);
    }
  for (auto& [v, whole] : castWhole)
    for (NodeId reader : readers[v]) {
      const Node& m = g.nodes[size_t(reader)];
      for (size_t k = 0; k < m.inputs.size(); ++k)
        if (m.inputs[k] == v && (!matrices.count(reader) || k > 1)) whole = false;
    }
  std::vector<Node> old = std::move(g.nodes);
  g.nodes.clear();
  std::map<ValueId, ValueId> castOf;  // a value -> the cast beside it
  std::vector<std::string> ops;
  for (size_t i = 0; i < old.size(); ++i) {
    Node& n = old[i];
    if (matrices.count(NodeId(i))) {
      for (size_t k = 0; k < 2; ++k)
        if (auto it = castOf.find(n.inputs[k]); it != castOf.end()) n.inputs[k] = it->second;
      ops.push_back(n.name);
    }
    const NodeId id = NodeId(g.nodes.size());
    for (ValueId v : n.outputs) g.values[v].producer = id;
    g.nodes.push_back(std::move(n));
    const std::vector<ValueId> outputs = g.nodes.back().outputs;
    for (ValueId v : outputs) {
      auto cast = castWhole.find(v);
      if (cast == castWhole.end()) continue;
      if (cast->second) {
        Node& r = g.nodes[size_t(id)];
        r.op = &internal_ops::castBf16();
        r.attrs = Attrs();
        g.values[v].desc.dtype = DType::BF16;
        continue;
      }
      Node beside;
      beside.name = g.values[v].name + "/bf16";
      beside.op = &internal_ops::castBf16();
      beside.inputs = {v};
      beside.origin = g.nodes[size_t(id)].origin;
      auto added = g.addNode(std::move(beside));  // a float tensor always passes inference
      castOf[v] = g.nodes[size_t(*added)].outputs[0];
    }
  }
  return ops;
}

}  // namespace netloom
