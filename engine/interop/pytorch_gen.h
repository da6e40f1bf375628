// What the PyTorch export's parts share: Python literals and identifiers, one node
// lowered to a line of PyTorch, and the generators of model.py and train.py. The
// export writes nothing until every text is generated, so a refused node leaves no
// half-written folder behind.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom::pytorch {

// Python source for values the generated code spells out.
std::string pyInt(int64_t v);
std::string pyFloat(double v);
std::string pyBool(bool v);
std::string pyStr(const std::string& s);
std::string pyTuple(const std::vector<int64_t>& v);  // "(1, 2)", "(3,)", "()"

// Whether `s` can be written as a Python attribute or variable as it is.
bool isIdentifier(const std::string& s);
// A Python identifier for `name`: itself when it is one (and no keyword), else its
// characters outside [A-Za-z0-9_] as '_', prefixed with '_' when it starts with a
// digit. Deterministic; callers make it unique.
std::string sanitize(const std::string& name);

// One argument of a constructor or a call. `slot` names the block param the value
// came from ("$p" in the block's definition), so a block class can take it as its
// own argument; `dflt` is PyTorch's default, which lets the argument be left out.
struct Arg {
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
struct Lowered {
  std::string ctor;  // "nn.Conv2d", a block class; empty: no module
  std::vector<Arg> ctorArgs;
  std::string call;
  std::string expr;
  std::vector<Arg> fwdArgs;
  std::vector<std::string> paramNames;  // NetLoom's, in the module's state dict order
  std::string init;  // NetLoom's initialiser of the weight when not PyTorch's default
};

// Lowers a built node (attributes resolved, shapes inferred) of `g`. `def` is the
// node as written, whose "$p" attributes name slots. Fails naming the node and op
// when PyTorch has no form for it.
Result<Lowered> lowerNode(const Graph& g, const Node& n, const proto::NodeDef& def);

// model.py: the module classes, the weight names and the safetensors reader/writer.
// `forwardOutputs` receives the references forward() returns, in order.
struct ModelText {
  std::string text;
  std::string className;
  std::vector<std::string> returns;  // top-level references forward() returns
  std::string inputNode;             // the Input node forward() takes
  std::vector<int64_t> inputShape;   // its per-sample shape
};
Result<ModelText> generateModel(const proto::Project& project);

// train.py: data, optimizer, schedule, loss and metrics of the project.
Result<std::string> generateTrain(const proto::Project& project, const std::string& projectDir,
                                  const ModelText& model);

// The Python text of train.py that does not depend on the project.
std::string trainRuntime();
// Its part that reads image folders and lists as NetLoom does (PIL, numpy).
std::string imageRuntime();

}  // namespace netloom::pytorch
