// Inside ONNX import: the graph being read (constants known so far, shapes, who
// reads what) and the NetLoom model being written. onnx_import.cpp drives it,
// onnx_import_fold.cpp computes constant subgraphs, onnx_import_ops.cpp maps the
// remaining nodes to NetLoom ops.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/onnx_lowering.h"
#include "engine/interop/onnx_common.h"
#include "engine/proto/project.pb.h"

namespace netloom::onnxio {

// An integer a shape computation reads from the batch dimension (Shape of an
// activation, dimension 0): known only when the model runs.
inline constexpr int64_t kBatchSym = kOnnxBatchSym;

struct ImportState {
  const onnx::GraphProto& graph;
  int64_t opset = 0;
  std::map<std::string, ConstTensor> consts;        // initializers, Constant outputs, folded values
  std::map<std::string, Shape> shapes;              // shape inference's, -1 where unknown
  std::vector<bool> done;                           // nodes folded or taken by a pattern
  std::map<std::string, std::vector<int>> readers;  // value -> nodes still to map reading it
  std::set<std::string> graphOutputs;

  // The NetLoom model being built.
  proto::ModelDef model;
  std::map<std::string, std::string> refOf;  // ONNX value -> NetLoom "node" or "node:port"
  // Weights by NetLoom node, then parameter ("weight", "bias", "running_mean").
  std::map<std::string, std::map<std::string, ConstTensor>> params;
  std::vector<std::string> problems;  // every node or attribute that has no NetLoom form
  std::set<std::string> names;        // NetLoom node names taken

  explicit ImportState(const onnx::GraphProto& g) : graph(g), done(size_t(g.node_size()), false) {}

  const onnx::NodeProto& node(int i) const { return graph.node(i); }
  bool isConst(const std::string& v) const { return consts.count(v) != 0; }
  const ConstTensor* constOf(const std::string& v) const {
    auto it = consts.find(v);
    return it == consts.end() ? nullptr : &it->second;
  }
  const Shape* shapeOf(const std::string& v) const {
    auto it = shapes.find(v);
    return it == shapes.end() ? nullptr : &it->second;
  }
  // How many nodes still to map, and graph outputs, read `v`.
  int users(const std::string& v) const;
  // Refreshes `readers` from the nodes not yet done.
  void countReaders();
  // A NetLoom node name from an ONNX one ("/layer1/conv/Conv" -> "layer1_conv"),
  // unique in the model.
  std::string nameFor(const onnx::NodeProto& n);
  // `base`, or base_2, base_3...: a node name not taken yet, now taken.
  std::string unique(const std::string& base);
  // "node 'n' (op T)" for messages.
  static std::string where(const onnx::NodeProto& n);
  void problem(const onnx::NodeProto& n, const std::string& what);
};

// Computes every node whose inputs are all known constants (or that reads only a
// static shape), marking it done and its outputs constant.
void foldConstants(ImportState& s);

// Maps every node not done to NetLoom nodes and weights, or records why it cannot.
void mapNodes(ImportState& s);

}  // namespace netloom::onnxio
