#include "engine/runtime/nonfinite.h"

#include <cmath>
#include <map>
#include <vector>

namespace netloom {

namespace {

// The first NaN or infinity in a float or bf16 tensor of `d` (its value in `value`),
// or -1: the index where it is stored (a padded block's padding holds zeros). A float
// tensor the host can address is read in place, any other copied out.
int64_t firstBad(Device& device, const TensorRef& t, const TensorDesc& d, float& value) {
  const int64_t n = storedElements(d);
  if (!t.data || (t.dtype != DType::F32 && t.dtype != DType::BF16)) return -1;
  std::vector<float> copy;
  const float* x = t.f32();
  if (t.dtype != DType::F32 || !device.hostAddressable()) {
    copy = readAsFloats(device, t.data, t.dtype, n);
    x = copy.data();
  }
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) {
      value = x[i];
      return i;
    }
  return -1;
}

std::string kindOf(const Graph& g, ValueId v) {
  switch (g.values[v].kind) {
    case ValueKind::Input: return "input";
    case ValueKind::Param: return "parameter";
    case ValueKind::Buffer: return "buffer";
    case ValueKind::State: return "optimizer state";
    case ValueKind::Activation: break;
  }
  const Value& val = g.values[v];
  return val.producer >= 0 && g.nodes[val.producer].backward ? "gradient" : "activation";
}

}  // namespace

double updateGradientSquares(const Program& p) {
  return p.device->sumOfSquares(p.updateGradients());
}

std::string NonFiniteTensor::describe() const {
  std::string v = std::isnan(value) ? "NaN" : (value > 0 ? "inf" : "-inf");
  std::string s = kind + " '" + name + "'";
  if (!node.empty() && node != name) s += " (from node '" + node + "')";
  return s + " holds " + v + " at element " + std::to_string(index);
}

std::optional<NonFiniteTensor> firstNonFinite(const Program& p, const StepContext& ctx) {
  const Graph& g = p.graph;
  std::vector<bool> seen(g.values.size(), false);
  std::map<ValueId, std::string> gradientOf;  // a parameter's gradient, as its update reads it
  for (size_t i = p.updatesBegin; i < p.steps.size(); ++i) {
    const Node& n = g.nodes[p.steps[i].node];
    if (n.op->role == OpRole::Optimizer && n.inputs.size() >= 2)
      gradientOf[n.inputs[1]] = g.values[n.inputs[0]].name;
  }
  auto check = [&](ValueId v) -> std::optional<NonFiniteTensor> {
    if (seen[v]) return std::nullopt;
    seen[v] = true;
    float value = 0;
    int64_t at = firstBad(*p.device, p.refs[v], g.values[v].desc, value);
    if (at < 0) return std::nullopt;
    NonFiniteTensor t;
    t.name = g.values[v].name;
    t.kind = kindOf(g, v);
    const Value& val = g.values[v];
    if (auto it = gradientOf.find(v); it != gradientOf.end()) {
      t.name = it->second;
      t.kind = "gradient of";
    } else if (val.kind == ValueKind::Activation && val.producer >= 0) {
      const Node& n = g.nodes[val.producer];
      t.node = n.backward && !n.origin.empty() ? n.origin : n.name;
    }
    t.index = at;
    t.value = value;
    return t;
  };
  for (size_t i = 0; i < p.updatesBegin && i < p.steps.size(); ++i) {
    const Node& n = g.nodes[p.steps[i].node];
    for (ValueId v : n.inputs)
      if (g.values[v].kind != ValueKind::Activation)
        if (auto bad = check(v)) return bad;
    p.run(ctx, i, i + 1);
    for (ValueId v : n.outputs)
      if (auto bad = check(v)) return bad;
  }
  return std::nullopt;
}

}  // namespace netloom
