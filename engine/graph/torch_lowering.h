// How an op reads as PyTorch, declared in its op file (OpDef::torch): the module it
// constructs or the function it calls, with PyTorch's argument names and defaults.
// The PyTorch export (engine/interop/pytorch_*.cpp) writes model.py from these and
// has no case of its own for any op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

// One argument of a constructor or a call. `slot` names the block param the value
// came from ("$p" in the block's definition), so a block class can take it as its
// own argument; `dflt` is PyTorch's default, which lets the argument be left out.
struct TorchArg {
  std::string key;  // keyword; empty: positional
  std::string value;
  std::string slot;
  std::string dflt;
  std::string label;  // a positional argument's name, for a block class's own arguments
};

// One node as PyTorch: a module it owns (constructed in __init__) and the expression
// forward() assigns to its outputs. In `expr`, {m} is the module, {0}, {1}, … the
// inputs, {*} all inputs joined, {aK} the K-th of `fwdArgs`. With `call` set the
// expression is `call(inputs…, fwdArgs…)` and arguments equal to their default are
// left out.
struct TorchLowering {
  std::string ctor;  // "nn.Conv2d", a block class; empty: no module
  std::vector<TorchArg> ctorArgs;
  std::string call;
  std::string expr;
  std::vector<TorchArg> fwdArgs;
  std::vector<std::string> paramNames;  // NetLoom's, in the module's state dict order
  std::string init;  // NetLoom's initialiser of the weight when not PyTorch's default
};

// Python source for values the generated code spells out.
std::string pyInt(int64_t v);
std::string pyFloat(double v);
std::string pyBool(bool v);
std::string pyStr(const std::string& s);
std::string pyTuple(const std::vector<int64_t>& v);  // "(1, 2)", "(3,)", "()"

// What an op's lowering reads: the node as built (attributes resolved, shapes
// inferred) in `graph`, and as written (`def`, whose "$p" attributes name a block's
// params), with the helpers that turn them into PyTorch's arguments.
class TorchCtx {
 public:
  TorchCtx(const Graph& graph, const Node& node, const proto::NodeDef& def)
      : m_graph(graph), m_node(node), m_def(def) {}

  const Node& node() const { return m_node; }
  const Attrs& attrs() const { return m_node.attrs; }
  const Shape& inShape(int i) const { return m_graph.values[m_node.inputs[size_t(i)]].desc.shape; }

  // An argument with PyTorch's keyword `key` (empty: positional) and its default,
  // taking its value from NetLoom's attribute `attr` (empty: computed).
  TorchArg arg(std::string key, std::string value, const std::string& attr,
               std::string dflt = {}) const;
  // A positional argument, named for a block class that takes it as its own.
  TorchArg pos(std::string label, std::string value, const std::string& attr) const;
  // A pair attribute (k or [kh, kw]) as PyTorch takes it: an int when both agree.
  std::string pair(const std::string& name, int64_t def) const;
  // The node cannot be written as PyTorch, and why.
  Error refuse(const std::string& why) const;

  // The common shapes: a function called on the inputs, a module constructed once,
  // an expression.
  static TorchLowering call(std::string fn, std::vector<TorchArg> args = {});
  static TorchLowering module(std::string ctor, std::vector<TorchArg> args,
                              std::string expr = "{m}({0})");
  static TorchLowering expr(std::string e, std::vector<TorchArg> args = {});

 private:
  const Graph& m_graph;
  const Node& m_node;
  const proto::NodeDef& m_def;
};

}  // namespace netloom
