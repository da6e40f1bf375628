// ONNX export: the project's evaluation graph (its Input nodes to the model's
// outputs; no loss or metric, Dropout as the identity, BatchNorm on its running
// statistics) as an opset 17 model whose initializers are the weights. The model
// passes libonnx's full check and ONNX's shape inference agrees with NetLoom's on
// every value, or nothing is written.
#ifdef NETLOOM_WITH_ONNX

#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "engine/compiler/compile.h"
#include "engine/graph/blocks.h"
#include "engine/interop/onnx.h"
#include "engine/interop/onnx_export_ops.h"
#include "engine/io/output_file.h"
#include "engine/io/safetensors.h"

namespace netloom {

using namespace onnxio;

namespace {

// The values the ONNX model outputs: ModelDef.outputs, else what the loss reads.
Result<std::vector<ValueId>> modelOutputs(const Graph& g, const proto::ModelDef& model,
                                          const proto::TrainDef& train) {
  std::vector<ValueId> out;
  auto addRef = [&](const std::string& ref, const std::string& field) -> Status {
    ValueId v = g.findValue(ref);
    if (v == kNoValue) return makeError(field + " names '" + ref + "', but there is no such node");
    const Value& val = g.values[size_t(v)];
    if (val.producer >= 0 && g.nodes[size_t(val.producer)].outputs[0] != v)
      return makeError(field + " names '" + ref +
                       "', an output the backward pass keeps, which has no ONNX form");
    for (ValueId o : out)
      if (o == v) return {};
    out.push_back(v);
    return {};
  };
  for (const std::string& o : model.outputs())
    if (Status s = addRef(o, "model.outputs"); !s) return s.error();
  if (!out.empty()) return out;
  const Node* loss = nullptr;
  for (const Node& n : g.nodes)
    if (n.op->role == OpRole::Loss && (train.loss().empty() || n.name == train.loss())) {
      if (loss)
        return makeError("the model names no output (model.outputs) and has several losses");
      loss = &n;
    }
  if (!loss)
    return makeError("the model names no output (model.outputs) and has no loss to follow");
  out.push_back(loss->inputs[0]);
  return out;
}

// Nodes the outputs depend on.
std::vector<bool> liveNodes(const Graph& g, const std::vector<ValueId>& outputs) {
  std::vector<bool> live(g.nodes.size(), false);
  std::vector<ValueId> todo(outputs.begin(), outputs.end());
  while (!todo.empty()) {
    ValueId v = todo.back();
    todo.pop_back();
    NodeId p = g.values[size_t(v)].producer;
    if (p < 0 || live[size_t(p)]) continue;
    live[size_t(p)] = true;
    const Node& n = g.nodes[size_t(p)];
    for (int k = 0; k < n.numDataInputs(); ++k) todo.push_back(n.inputs[size_t(k)]);
  }
  return live;
}

// The weights to export, in PyTorch's layouts: a weights file's, else the seeded
// initialisation a run of the project starts from (the compiler's own, on a program
// of the evaluation graph).
Result<std::map<std::string, Weight>> exportWeights(const proto::Project& project,
                                                    const proto::ModelDef& flat,
                                                    const std::string& file,
                                                    const std::vector<std::string>& keep) {
  proto::ModelDef m = flat;
  // A program needs a loss to compile; this one reads the first output and keeps the
  // graph to what the outputs need.
  std::set<std::string> names;
  for (const auto& n : m.nodes()) names.insert(n.name());
  std::string probe = "onnx_export_probe";
  for (int k = 2; names.count(probe); ++k) probe = "onnx_export_probe_" + std::to_string(k);
  proto::NodeDef* p = m.add_nodes();
  p->set_name(probe);
  p->set_op("MSELoss");
  p->add_inputs(keep[0]);
  p->add_inputs(keep[0]);
  CompileOptions o;
  o.batch = 1;
  o.training = false;
  o.seed = project.train().seed();
  o.fuse = false;
  o.blockedLayouts = false;
  o.loss = probe;
  o.metrics = {probe};
  o.keep = keep;
  ParamStore store;
  auto prog = compile(m, o, store);
  if (!prog) return prog.error();
  if (!file.empty()) {
    auto tensors = readSafetensors(file);
    if (!tensors) return tensors.error();
    // Weights of nodes outside the evaluation graph (a second head read only by a
    // loss) are not exported.
    std::vector<NamedTensor> wanted;
    for (NamedTensor& t : *tensors)
      if (store.find(t.name)) wanted.push_back(std::move(t));
    if (Status s = store.importParams(wanted, file); !s) return s.error();
  }
  std::map<std::string, Weight> out;
  for (const auto& e : store.entries())
    if (e->kind == ValueKind::Param || e->kind == ValueKind::Buffer)
      out[e->name] = Weight{e->desc.shape, ParamStore::read(*e)};
  return out;
}

// BatchNorm nodes to fold: each directly after a Conv2d, or a Linear over matrices,
// whose output nothing else reads.
void chooseFolds(const Graph& g, const std::vector<bool>& live, const std::vector<ValueId>& outputs,
                 Exporter& ex) {
  std::map<ValueId, int> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (live[i])
      for (ValueId v : g.nodes[i].inputs) ++readers[v];
  for (ValueId v : outputs) ++readers[v];
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    if (!live[i] || bn.op->foldsInto.empty()) continue;
    ValueId x = bn.inputs[0];
    NodeId p = g.values[size_t(x)].producer;
    if (p < 0 || readers[x] != 1) continue;
    const Node& prod = g.nodes[size_t(p)];
    const bool foldable = prod.op->foldsChannelAffine &&
                          prod.op->foldsChannelAffine(g.values[size_t(x)].desc.shape) &&
                          prod.attrs.s("activation", "none") == "none";
    if (!foldable || prod.outputs[0] != x) continue;
    ex.foldInto[p] = NodeId(i);
    ex.folded.insert(NodeId(i));
  }
}

std::string normalizationText(const proto::Normalization& n) {
  std::ostringstream s;
  s.precision(9);
  if (n.kind() == proto::Normalization::FIXED)
    s << "x' = (x * " << (n.scale() == 0 ? 1.0 : n.scale()) << " - " << n.mean() << ") / "
      << (n.has_std() ? n.std() : 1.0);
  else if (n.kind() == proto::Normalization::STANDARDIZE)
    s << "x' = (x * " << (n.scale() == 0 ? 1.0 : n.scale())
      << " - mean) / std, the mean and std of the training split";
  return s.str();
}

// ONNX's shape inference against NetLoom's, dimension by dimension after the batch:
// any difference means an op computes something else there.
Status compareShapes(const Graph& g, const onnx::ModelProto& model,
                     const std::map<std::string, Shape>& expected) {
  onnx::ModelProto inferred = model;
  try {
    onnx::shape_inference::InferShapes(inferred);
  } catch (const std::exception& e) {
    return makeError(std::string("ONNX shape inference fails: ") + e.what());
  }
  const std::map<std::string, Shape> got = shapesOf(inferred.graph());
  for (const auto& [name, want] : expected) {
    auto it = got.find(name);
    if (it == got.end()) continue;
    const Shape& have = it->second;
    bool same = have.size() == want.size();
    for (size_t d = 1; same && d < have.size(); ++d) same = have[d] < 0 || have[d] == want[d];
    if (same) continue;
    ValueId v = g.findValue(name);
    const Node& n = g.nodes[size_t(g.values[size_t(v)].producer)];
    return makeError("node '" + n.name + "' (op " + n.op->name + "): ONNX computes " +
                     shapeToString(have) + " where NetLoom computes " + shapeToString(want) +
                     " (batch first): these attributes have no ONNX form");
  }
  return {};
}

}  // namespace

Status exportOnnx(const proto::Project& project, const std::string& projectDir,
                  const std::string& path, const OnnxExportOptions& options) {
  auto flat = inlineBlocks(project.model());
  if (!flat) return flat.error();
  auto built = buildGraph(*flat, 1);
  if (!built) return built.error();
  const Graph& g = *built;
  auto outputs = modelOutputs(g, *flat, project.train());
  if (!outputs) return outputs.error();
  std::vector<bool> live = liveNodes(g, *outputs);

  // Refusals first, all by name, before any weight is read.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    const Node& n = g.nodes[i];
    if (n.op->role == OpRole::Loss || n.op->role == OpRole::Metric)
      return makeError("node '" + n.name + "' (op " + n.op->name +
                       "): a loss or metric on the way to the model's outputs has no ONNX form "
                       "in an inference graph");
    for (int k = 0; k < n.numDataInputs(); ++k) {
      const Value& v = g.values[size_t(n.inputs[size_t(k)])];
      if (v.producer >= 0 && g.nodes[size_t(v.producer)].outputs[0] != n.inputs[size_t(k)])
        return makeError("node '" + n.name + "' (op " + n.op->name + "): its input '" + v.name +
                         "' is a statistic the backward pass keeps, which has no ONNX form");
    }
  }

  std::string weightsFile = options.initWeights;
  if (weightsFile.empty() && !project.train().init_weights().empty())
    weightsFile = (std::filesystem::path(projectDir) / project.train().init_weights()).string();
  std::vector<std::string> keep;
  for (ValueId v : *outputs) keep.push_back(g.values[size_t(v)].name);
  auto weights = exportWeights(project, *flat, weightsFile, keep);
  if (!weights) return weights.error();

  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("NetLoom");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  if (std::string norm = normalizationText(project.data().normalization()); !norm.empty()) {
    auto* meta = model.add_metadata_props();
    meta->set_key("netloom.normalization");
    meta->set_value(norm);
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(flat->name().empty() ? project.name() : flat->name());
  Exporter ex(g, std::move(*weights), graph);
  if (options.foldBatchNorm) chooseFolds(g, live, *outputs, ex);

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    const Node& n = g.nodes[i];
    if (n.op->external) {  // the data the model reads
      const TensorDesc& d = g.values[size_t(n.outputs[0])].desc;
      Shape s = d.shape;
      s[0] = -1;
      setTensorType(*graph.add_input(),
                    d.dtype == DType::I32 ? onnx::TensorProto::INT32 : onnx::TensorProto::FLOAT, s);
      graph.mutable_input(graph.input_size() - 1)->set_name(ex.name(n.outputs[0]));
      continue;
    }
    if (Status s = ex.emit(NodeId(i)); !s) return s;
  }
  for (ValueId v : *outputs) {
    Shape s = g.values[size_t(v)].desc.shape;
    if (!s.empty()) s[0] = -1;
    onnx::ValueInfoProto* o = graph.add_output();
    o->set_name(ex.name(v));
    setTensorType(*o, onnx::TensorProto::FLOAT, s);
  }

  if (Status s = checkModel(model, "the exported model"); !s) return s;
  if (Status s = compareShapes(g, model, ex.expected()); !s) return s;
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return makeError("the ONNX model could not be serialised");
  return writeFileAtomic(path, bytes);
}

}  // namespace netloom

#endif  // NETLOOM_WITH_ONNX
