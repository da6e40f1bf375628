// What the PyTorch export's parts share: Python literals and identifiers, one node
// lowered to a line of PyTorch, and the generators of model.py and train.py. The
// export writes nothing until every text is generated, so a refused node leaves no
// half-written folder behind.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/graph/torch_lowering.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom::pytorch {

// Python source for values the generated code spells out.
using netloom::pyBool;
using netloom::pyFloat;
using netloom::pyInt;
using netloom::pyStr;
using netloom::pyTuple;

// Whether `s` can be written as a Python attribute or variable as it is.
bool isIdentifier(const std::string& s);
// A Python identifier for `name`: itself when it is one (and no keyword), else its
// characters outside [A-Za-z0-9_] as '_', prefixed with '_' when it starts with a
// digit. Deterministic; callers make it unique.
std::string sanitize(const std::string& name);

// One node as PyTorch (engine/graph/torch_lowering.h).
using Arg = TorchArg;
using Lowered = TorchLowering;

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
// Layers an older PyTorch lacks (RMSNorm, PositionEmbedding, rotary_embedding,
// scaled_dot_product_attention); model.py holds them where it uses one.
std::string layersRuntime();

}  // namespace netloom::pytorch
