// Tolerant analysis of a model while it is being drawn: unlike buildGraph, which
// stops at the first error, it reports every problem it can find and the shape of
// every output whose inputs are known, so an editor can label the wires that are
// fine and badge the nodes that are not.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/proto/project.pb.h"
#include "kernels/core/kernel.h"

namespace netloom {

struct ModelProblem {
  std::string node;  // the node at fault; empty for whole-graph problems
  int port = -1;     // its input port at fault, or -1
  std::string message;
};

struct NodeAnalysis {
  bool known = false;               // the op exists in the registry
  std::vector<TensorDesc> outputs;  // empty while the shapes cannot be inferred
  int64_t params = 0;               // trainable parameter count
  int64_t flops = 0;                // forward FLOPs for the batch
  int64_t activationBytes = 0;      // bytes of the visible outputs
};

struct ModelAnalysis {
  std::map<std::string, NodeAnalysis> nodes;  // by node name
  std::vector<ModelProblem> problems;         // in model order

  bool ok() const { return problems.empty(); }
};

struct NodeCost {
  int64_t params = 0, buffers = 0, flops = 0, activationBytes = 0;
};
class Graph;
struct Node;
// Adds a built node's parameter and buffer counts, forward FLOPs and visible
// activation bytes to `cost`.
void measureNode(const Graph& g, const Node& n, NodeCost& cost);

// Unconnected inputs are written as empty references (""); they are problems here
// and in buildGraph.
ModelAnalysis analyzeModel(const proto::ModelDef& model, int64_t batch);

}  // namespace netloom
