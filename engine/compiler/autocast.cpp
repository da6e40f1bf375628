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
    // An op in its input's precision: its output 0 rounded where its float data
    // inputs all are.
    bool follows = n.op->halfFollows && n.op->role == OpRole::Layer;
    int floats = 0;
    for (int k = 0; follows && k < n.numDataInputs(); ++k) {
      const ValueId v = n.inputs[size_t(k)];
      if (g.values[v].desc.dtype != DType::F32) continue;
      ++floats;
      follows = isRounded.count(v) > 0;
    }
    follows = follows && floats > 0 && !n.outputs.empty() &&
              g.values[n.outputs[0]].desc.dtype == DType::F32;
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
    if (follows) {
      replaced[outputs[0]] = roundOf(outputs[0], name + "/autocast/out0", name);
      continue;
    }
    if (!matrix) continue;
    for (size_t k = 0; k < outputs.size(); ++k)
      if (g.values[outputs[k]].desc.dtype == DType::F32)
        replaced[outputs[k]] =
            roundOf(outputs[k], name + "/autocast/out" + std::to_string(k), name);
    rounded.push_back(name);
  }
  return rounded;
}

int shareRoundings(Graph& g, const std::set<ValueId>& keep) {
  std::map<std::pair<ValueId, std::string>, ValueId> first;  // (input, format) -> rounding
  std::map<ValueId, ValueId> same;                           // a later rounding -> the first
  for (Node& n : g.nodes) {
    for (ValueId& v : n.inputs)
      if (auto it = same.find(v); it != same.end()) v = it->second;
    if (n.op != &internal_ops::roundHalf() || n.outputs.empty()) continue;
    const ValueId out = n.outputs[0];
    auto [it, fresh] = first.emplace(std::make_pair(n.inputs[0], n.attrs.s("format")), out);
    if (!fresh && !keep.count(out) && !keep.count(it->second)) same[out] = it->second;
  }
  return int(same.size());
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
    const KernelImpl* k = firstKernel(g, m, kernels, context);
    if (k && !k->widened) matrices.insert(NodeId(i));  // a kernel of its own, not widened
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

namespace {

// Whether a node computes on its tensors within its launch alone: no optimizer state
// it writes, nothing sent, summed or kept past the launch (those take float tensors).
bool computesAlone(const Node& n) {
  using namespace internal_ops;
  static const std::set<const OpDef*> moving = {
      &boxing(),     &pipeSend(),    &pipeRecv(),   &pipeTie(),    &bucketStart(),
      &bucketWait(), &zeroScatter(), &zeroUpdate(), &microBatch(), &lossScaleCheck()};
  return n.op->role != OpRole::Optimizer && n.op->mutates.empty() && !moving.count(n.op);
}

// The steps of storeBf16Activations over one graph, marking the nodes they remove.
class Bf16Storer {
 public:
  Bf16Storer(Graph& g, const KernelRegistry& kernels, const KernelSig& context,
             const std::set<ValueId>& keep)
      : m_g(g),
        m_kernels(kernels),
        m_context(context),
        m_keep(keep),
        m_readers(consumers(g)),
        m_dead(g.nodes.size(), false) {}

  // Where the value a rounding rounds is read otherwise only by the backward pass, the
  // backward pass reads the rounding (as PyTorch's autograd reads the 16-bit tensors
  // autocast saved): the value then dies at its rounding, which writes over it, and
  // the plan keeps one tensor, not two.
  void readRoundingsBackward() {
    for (size_t i = 0; i < m_g.nodes.size(); ++i) {
      const Node& n = m_g.nodes[i];
      if (m_dead[i] || n.op != &internal_ops::roundHalf()) continue;  // bf16 or fp16
      const ValueId u = n.inputs[0], v = n.outputs[0];
      if (m_keep.count(u) || m_g.values[size_t(u)].kind != ValueKind::Activation) continue;
      bool backwardOnly = true;
      for (NodeId r : m_readers[size_t(u)])
        backwardOnly = backwardOnly && (r == NodeId(i) || m_g.nodes[size_t(r)].backward);
      if (!backwardOnly) continue;
      for (NodeId r : m_readers[size_t(u)]) {
        if (r == NodeId(i)) continue;
        for (ValueId& in : m_g.nodes[size_t(r)].inputs)
          if (in == u) in = v;
        m_readers[size_t(v)].push_back(r);
      }
      m_readers[size_t(u)] = {NodeId(i)};
    }
  }

  // A rounding of a rounding changes nothing: it goes.
  void dropDoubleRoundings() {
    for (size_t i = 0; i < m_g.nodes.size(); ++i) {
      const Node& n = m_g.nodes[i];
      if (!roundsToBf16(n) || m_keep.count(n.outputs[0])) continue;
      const NodeId p = m_g.values[size_t(n.inputs[0])].producer;
      if (p >= 0 && roundsToBf16(m_g.nodes[size_t(p)]))
        redirect(NodeId(i), n.outputs[0], n.inputs[0]);
    }
  }

  // A rounding to bf16 whose readers all run on bf16 tensors becomes a cast; not of a
  // weight (its few bytes are read by the matrix op's own kernels, in float).
  void castRoundings() {
    for (size_t i = 0; i < m_g.nodes.size(); ++i) {
      Node& n = m_g.nodes[i];
      if (m_dead[i] || !roundsToBf16(n)) continue;
      const ValueId v = n.outputs[0];
      const Value& in = m_g.values[size_t(n.inputs[0])];
      if (m_keep.count(v) || m_readers[size_t(v)].empty() || in.desc.dtype != DType::F32 ||
          in.kind != ValueKind::Activation)
        continue;
      if (!tryBf16(v, [&] { return runs(v, -1, false); })) continue;
      n.op = &internal_ops::castBf16();
      n.attrs = Attrs();
    }
  }

  // A cast whose input nothing else reads but the backward pass moves into the input's
  // producer, which then writes bf16; the backward pass reads the stored values (as
  // PyTorch's autograd reads the bf16 tensors autocast saved).
  void moveCastsIntoProducers() {
    for (size_t i = 0; i < m_g.nodes.size(); ++i) {
      const Node& cast = m_g.nodes[i];
      if (m_dead[i] || cast.op != &internal_ops::castBf16()) continue;
      const ValueId u = cast.inputs[0], w = cast.outputs[0];
      const Value& from = m_g.values[size_t(u)];
      if (from.desc.dtype == DType::BF16) {  // another cast of it moved into its producer
        redirect(NodeId(i), w, u);
        continue;
      }
      if (from.kind != ValueKind::Activation || from.desc.dtype != DType::F32 || m_keep.count(u) ||
          from.producer < 0 || m_dead[size_t(from.producer)])
        continue;
      const Node& producer = m_g.nodes[size_t(from.producer)];
      if (computesAlone(producer) &&
          tryBf16(u, [&] { return runsAsIs(producer) && runs(u, NodeId(i), true); }))
        redirect(NodeId(i), w, u);
    }
  }

  // A ReLU gradient of a bf16 gradient holds bf16 values (it only zeroes some): it
  // writes bf16 where its readers read it.
  void storeReluGradients() {
    for (size_t i = 0; i < m_g.nodes.size(); ++i) {
      const Node& n = m_g.nodes[i];
      if (m_dead[i] || n.op->name != "ReLUGrad" ||
          m_g.values[size_t(n.inputs[0])].desc.dtype != DType::BF16)
        continue;
      const ValueId v = n.outputs[0];
      if (m_keep.count(v) || m_g.values[size_t(v)].desc.dtype != DType::F32) continue;
      tryBf16(v, [&] { return runsAsIs(n) && runs(v, -1, false); });
    }
  }

  Bf16Activations finish() {
    removeNodes(m_g, m_dead);
    Bf16Activations out;
    for (const Value& v : m_g.values)
      if (v.kind == ValueKind::Activation && v.desc.dtype == DType::BF16 && v.producer >= 0) {
        ++out.values;
        out.bytes += bytesOf(v.desc);
      }
    return out;
  }

 private:
  // Whether node n runs as its tensors now stand: with a kernel of the device's, and a
  // matrix op with one of its own (widening its operands would cost more than it saves).
  bool runsAsIs(const Node& n) const {
    const KernelImpl* k = firstKernel(m_g, n, m_kernels, m_context);
    const bool matrix = n.op->autocast || n.attrs.b("bf16_operands");  // or its gradient
    return k && !(matrix && k->widened);
  }
  // Whether every reader of v but `except` (with `backwardOnly`, each a backward node)
  // runs as it stands.
  bool runs(ValueId v, NodeId except, bool backwardOnly) const {
    for (NodeId r : m_readers[size_t(v)]) {
      if (r == except || m_dead[size_t(r)]) continue;
      const Node& n = m_g.nodes[size_t(r)];
      if ((backwardOnly && !n.backward) || !computesAlone(n) || !runsAsIs(n)) return false;
    }
    return true;
  }
  template <class Accepted>
  bool tryBf16(ValueId v, Accepted accepted) {
    m_g.values[size_t(v)].desc.dtype = DType::BF16;
    if (accepted()) return true;
    m_g.values[size_t(v)].desc.dtype = DType::F32;
    return false;
  }
  // Node i goes; its output's readers read `to` instead.
  void redirect(NodeId i, ValueId from, ValueId to) {
    for (NodeId r : m_readers[size_t(from)])
      for (ValueId& in : m_g.nodes[size_t(r)].inputs)
        if (in == from) in = to;
    auto& into = m_readers[size_t(to)];
    into.insert(into.end(), m_readers[size_t(from)].begin(), m_readers[size_t(from)].end());
    m_readers[size_t(from)].clear();
    m_dead[size_t(i)] = true;
  }

  Graph& m_g;
  const KernelRegistry& m_kernels;
  const KernelSig& m_context;
  const std::set<ValueId>& m_keep;
  std::vector<std::vector<NodeId>> m_readers;
  std::vector<bool> m_dead;
};

}  // namespace

Bf16Activations storeBf16Activations(Graph& g, const KernelRegistry& kernels,
                                     const KernelSig& context, const std::set<ValueId>& keep,
                                     bool store) {
  Bf16Storer storer(g, kernels, context, keep);
  storer.readRoundingsBackward();
  if (!store) return storer.finish();
  storer.dropDoubleRoundings();
  storer.castRoundings();
  storer.moveCastsIntoProducers();
  storer.storeReluGradients();
  return storer.finish();
}

}  // namespace netloom
