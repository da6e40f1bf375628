// Tolerant analysis of a model while it is being drawn: unlike buildGraph, which
// stops at the first error, it reports every problem it can find and the shape of
// every output whose inputs are known, so an editor can label the wires that are
// fine and badge the nodes that are not.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
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

// The analysis of a flat model (no block instances) kept current across edits, as an
// editor needs it at every keystroke. An edit of attributes resolves again only the
// nodes it touched; one that adds, removes, renames or rewires nodes resolves every
// node's wiring (cheap) but reuses what was inferred. Shapes are inferred again only
// for the touched nodes and, downstream, for nodes whose inputs' shapes changed: an
// edit that keeps its node's shapes costs one inference however large the graph.
// The result equals analyzeModel's, except that a name used twice is analysed (in
// `nodes`) as its first node.
class ModelAnalyzer {
 public:
  ModelAnalyzer();
  ~ModelAnalyzer();
  ModelAnalyzer(const ModelAnalyzer&) = delete;
  ModelAnalyzer& operator=(const ModelAnalyzer&) = delete;

  // A node as the caller holds it: `key` names it across edits (an editor's node id)
  // and `def` must stay valid, and unchanged unless its key is given as dirty, until
  // the next call.
  struct NodeRef {
    int key = 0;
    const proto::NodeDef* def = nullptr;
  };
  // Analyses `nodes`, in model order, from scratch.
  void reset(const std::vector<NodeRef>& nodes, int64_t batch);
  // After an edit: `nodes` is the model now, `dirty` the keys whose definitions
  // changed or appeared (keys that went may be given too).
  void update(const std::vector<NodeRef>& nodes, const std::vector<int>& dirty);
  const ModelAnalysis& analysis() const { return m_out; }
  // The keys whose analysis or problems the last call may have changed: a superset
  // of those that did, all of them after reset().
  const std::vector<int>& changed() const { return m_changed; }
  // How many nodes the last call inferred shapes for.
  int inferred() const { return m_inferred; }
  // The problems the node `key` would have with definition `def` instead (its
  // wiring, and its shapes from its sources as they are now), the analysis left as
  // it is: whether an edit would be accepted, at the cost of one node.
  std::vector<ModelProblem> problemsIf(int key, const proto::NodeDef& def);

 private:
  struct Entry;
  void run(const std::vector<NodeRef>& nodes, const std::vector<int>& dirty, bool all);
  void refreshOwn(Entry& e);
  // `self`: the node whose name `e` holds (a copy of it stands in for it).
  bool relink(Entry& e, const Entry* self = nullptr);
  bool linkPort(const Entry& e, size_t k, Entry*& source, int& port,
                std::vector<ModelProblem>& problems) const;
  bool reorder(const std::vector<NodeRef>& nodes, bool all, std::vector<std::string>& names);
  bool refreshDirty(bool all, std::vector<std::string>& names);
  void relinkAll(bool structural);
  void inferInOrder();
  void publishChanges(const std::vector<std::string>& names);
  void sortTopologically();
  void infer(Entry& e);
  void publish(Entry& e);

  std::unordered_map<int, Entry> m_entries;
  std::vector<Entry*> m_order;  // model order
  std::vector<Entry*> m_topo;   // inference order; nodes on or below a cycle are left out
  std::unordered_map<std::string, Entry*> m_byName;  // each name's first node
  int64_t m_batch = 1;
  ModelAnalysis m_out;
  std::vector<int> m_changed;
  int m_inferred = 0;
};

}  // namespace netloom
