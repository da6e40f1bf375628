// The engine's IR: nodes over typed tensor values, kept in execution order. Built
// from a ModelDef, then extended by the compiler passes (autodiff, optimizer).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/op.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

using ValueId = int32_t;
using NodeId = int32_t;
constexpr ValueId kNoValue = -1;

enum class ValueKind {
  Activation,  // produced by a node inside a step; lives in the planned arena
  Input,       // filled by the data loader before each step
  Param,       // a trainable weight; persistent
  State,       // optimizer state (momentum, moments); persistent
  Buffer,      // persistent, saved with the weights, not trained (running statistics)
};

struct Value {
  std::string name;
  TensorDesc desc;
  ValueKind kind = ValueKind::Activation;
  NodeId producer = -1;
  bool requiresGrad = false;  // depends on a parameter
  // Under tensor parallelism (the "sbp" pass), how the value is spread over the
  // ranks of its group; desc is this rank's part.
  ValueShard shard;
  // Under ZeRO, optimizer state that is one rank's shard of a bucket's.
  std::shared_ptr<const FlatShard> flat;
};

struct Node {
  std::string name;
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<ValueId> inputs;  // data inputs first, then parameters
  std::vector<ValueId> outputs;
  int numParams = 0;
  bool backward = false;  // emitted by autodiff or the optimizer
  std::string origin;     // the user node a backward node serves

  int numDataInputs() const { return static_cast<int>(inputs.size()) - numParams; }
};

class Graph {
 public:
  std::vector<Node> nodes;
  std::vector<Value> values;
  std::map<std::string, ValueId> inputsByField;  // Input nodes: data field -> value

  ValueId addValue(Value v);
  // Appends a node and infers its output shapes; fails with a message naming it (and
  // sets `errorPort` to the input port at fault, when there is one).
  Result<NodeId> addNode(Node n, int* errorPort = nullptr);
  const Node* findNode(const std::string& name) const;
  ValueId findValue(const std::string& name) const;  // "node:port" or param "node.weight"
  std::vector<ValueId> params() const;
};

// Infers the shapes of node `id` from its inputs; errors name node, port and shapes.
Status inferNode(Graph& g, NodeId id, int* errorPort = nullptr);

// Builds the forward graph: resolves attributes, orders nodes topologically and
// infers every shape for the given batch size. Errors name the node and the port.
Result<Graph> buildGraph(const proto::ModelDef& model, int64_t batch);

// An input reference as written in a NodeDef: "node" (port 0) or "node:port".
// Port numbers stay below kMaxPorts, far above any op's outputs, so that a reference
// cannot make a tool draw or count billions of ports.
constexpr int kMaxPorts = 1024;
struct InputRef {
  std::string node;
  int port = 0;
};
Result<InputRef> parseInputRef(const std::string& nodeName, size_t index, const std::string& s);
// The lenient forms, for tools that hold references being edited: "node:port" ->
// (node, port); a reference whose port is not a number is all node name, port 0.
std::pair<std::string, int> splitInputRef(const std::string& ref);

// The longest node name, in bytes: names become tensor names in weights files.
constexpr size_t kMaxNodeNameBytes = 256;
// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
bool isValidUtf8(const std::string& s);
// Why `name` cannot name a node (empty, bad UTF-8, too long, a control character,
// the port separator ':'), or empty when it can.
std::string nodeNameProblem(const std::string& name);
std::string joinInputRef(const std::string& node, int port);  // "node" for port 0

// Orders nodes 0..n-1 given each node's users and in-degrees, file order first among
// ready nodes; nodes left with a positive in-degree sit on or below a cycle.
std::vector<int> topologicalOrder(const std::vector<std::vector<int>>& users,
                                  std::vector<int>& indegree);

// Tensors several nodes read as one (ModelDef.shared): a parameter name to the name
// of the tensor it is, and the values made so far by name.
struct SharedParams {
  std::map<std::string, std::string> alias;
  std::map<std::string, ValueId> made;
  std::set<std::string> own;  // names a node's parameter has as its own (not an alias)
  std::set<std::string> aliased;
};

// Parameter and buffer values a node of `op` with `attrs` reads, appended to its
// inputs as buildGraph lays them out; with `shared`, a tied parameter reads the one
// value of its tensor.
void addPersistentInputs(Graph& g, Node& node, SharedParams* shared = nullptr);

// Converts a project attribute into the engine's form, and back.
AttrVal attrFromProto(const proto::AttrValue& v);
proto::AttrValue attrToProto(const AttrVal& v);

}  // namespace netloom

namespace netloom {

// Drops the nodes marked dead and renumbers producers; values stay (unused ones
// are simply never bound).
void removeNodes(Graph& g, const std::vector<bool>& dead);

// For every value, the nodes that read it.
std::vector<std::vector<NodeId>> consumers(const Graph& g);

// A stable 64-bit name hash (FNV-1a), used to salt per-node random streams.
uint64_t nameHash(const std::string& s);

}  // namespace netloom
