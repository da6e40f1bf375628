// A whole model's loss in float64, node by node through the op harness's references:
// an interpretation of the built graph that shares no code with the engine's kernels
// or its autodiff, so that finite differences of it check the engine's gradients.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "op_cases.h"

namespace harness {

namespace model_ref {

using netloom::Attrs;

// [h, w] from an attribute written as one value or two; `fallback` where it is empty.
inline std::pair<int64_t, int64_t> pairOf(const Attrs& a, const std::string& name,
                                          std::pair<int64_t, int64_t> fallback) {
  std::vector<int64_t> v = a.ints(name);
  if (v.empty()) return fallback;
  return {v[0], v.size() > 1 ? v[1] : v[0]};
}

inline Vec withActivation(const Attrs& a, Vec y) {
  if (a.s("activation", "none") == "relu")
    for (double& v : y) v = std::max(v, 0.0);
  return y;
}

inline Vec leakyRelu(const RefArgs& a, double slope) {
  Vec y(a.in[0]);
  for (double& v : y) v = v > 0 ? v : slope * v;
  return y;
}

inline Vec add(const RefArgs& a) {
  Vec y(a.in[0]);
  for (size_t i = 0; i < y.size(); ++i) y[i] += a.in[1][i];
  return y;
}

inline ConvSpec convSpec(const Attrs& a) {
  ConvSpec p;
  std::tie(p.sh, p.sw) = pairOf(a, "stride", {1, 1});
  std::tie(p.ph, p.pw) = pairOf(a, "padding", {0, 0});
  std::tie(p.dh, p.dw) = pairOf(a, "dilation", {1, 1});
  p.groups = a.i("groups", 1);
  p.same = a.b("same_padding");
  return p;
}

inline norm_ref::Pool poolSpec(const Attrs& a) {
  norm_ref::Pool p{};
  std::tie(p.kh, p.kw) = pairOf(a, "kernel_size", {2, 2});
  std::tie(p.sh, p.sw) = pairOf(a, "stride", {p.kh, p.kw});
  std::tie(p.ph, p.pw) = pairOf(a, "padding", {0, 0});
  p.ceil = a.b("ceil_mode");
  p.includePad = a.b("count_include_pad", true);
  return p;
}

// The forward of one node's first output; nullopt for an op with no reference here.
inline std::optional<Vec> forward(const std::string& op, const Attrs& at, const RefArgs& a) {
  if (op == "Linear") return withActivation(at, linear(a));
  if (op == "Conv2d") return conv2dRef(a, convSpec(at));
  if (op == "BatchNorm") return withActivation(at, norm_ref::batchNorm(a, at.f("eps", 1e-5)));
  if (op == "LayerNorm") return norm_ref::layerNorm(a, at.i("normalized_dims", 1), at.f("eps"));
  if (op == "MaxPool2d" || op == "AvgPool2d")
    return norm_ref::pool(a, poolSpec(at), op == "AvgPool2d");
  if (op == "GlobalAvgPool2d") return norm_ref::globalAvg(a);
  if (op == "ReLU") return unary(a, [](double x) { return std::max(x, 0.0); });
  if (op == "LeakyReLU") return leakyRelu(a, at.f("negative_slope"));
  if (op == "Tanh") return unary(a, [](double x) { return std::tanh(x); });
  if (op == "Sigmoid") return unary(a, [](double x) { return 1 / (1 + std::exp(-x)); });
  if (op == "GELU") return unary(a, at.s("approximate") == "tanh" ? geluTanh : gelu);
  if (op == "Softmax") return softmax(a, at.i("axis", -1));
  if (op == "Add") return withActivation(at, add(a));
  if (op == "Concat") return concat(a, at.i("axis", 1));
  if (op == "Flatten" || op == "Reshape" || op == "Identity") return same(a);
  if (op == "SoftmaxCrossEntropy") return crossEntropy(a, at.f("label_smoothing"));
  return std::nullopt;
}

}  // namespace model_ref

// The loss of `g` in float64 from `values`: every Input's value and every parameter's,
// by value id. Only the nodes the loss depends on are evaluated, in the graph's
// (topological) order; the first missing reference is named in `error`.
inline double referenceLoss(const netloom::Graph& g, netloom::ValueId loss,
                            std::map<netloom::ValueId, Vec> values, std::string& error) {
  using namespace netloom;
  std::set<ValueId> needed{loss};
  for (auto n = g.nodes.rbegin(); n != g.nodes.rend(); ++n)
    if (needed.count(n->outputs[0]))
      for (ValueId v : n->inputs) needed.insert(v);
  for (const Node& n : g.nodes) {
    if (!needed.count(n.outputs[0]) || values.count(n.outputs[0])) continue;
    RefArgs a;
    for (int k = 0; k < int(n.inputs.size()); ++k) {
      const Value& v = g.values[n.inputs[k]];
      if (v.kind == ValueKind::Buffer) continue;  // running statistics: not read in training
      if (!values.count(n.inputs[k])) {
        error = "'" + n.name + "' reads '" + v.name + "', which has no float64 value";
        return NAN;
      }
      auto& to = k < n.numDataInputs() ? a.in : a.params;
      auto& shapes = k < n.numDataInputs() ? a.inShapes : a.paramShapes;
      to.push_back(values.at(n.inputs[k]));
      shapes.push_back(v.desc.shape);
    }
    a.outShape = g.values[n.outputs[0]].desc.shape;
    std::optional<Vec> y = model_ref::forward(n.op->name, n.attrs, a);
    if (!y) {
      error = "no float64 reference for " + n.op->name + " ('" + n.name + "')";
      return NAN;
    }
    values[n.outputs[0]] = std::move(*y);
  }
  return values.at(loss).at(0);
}

}  // namespace harness
