// ONNX import: an ONNX model as a NetLoom project whose initial weights are the
// model's initializers. Constant subgraphs are computed, patterns recognised, every
// other node mapped to its NetLoom op; NetLoom's shapes must then agree with ONNX's
// shape inference on every value. Any node or attribute without a NetLoom form is
// listed, and nothing is written.
#ifdef NETLOOM_WITH_ONNX

#include "engine/interop/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/graph/graph.h"
#include "engine/interop/onnx.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"

namespace netloom {

using namespace onnxio;

namespace {

// A model file is read whole; past this it is not a model this importer can hold.
constexpr uint64_t kMaxModelBytes = uint64_t(2) << 30;

Result<onnx::ModelProto> readModel(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return makeError(path + ": " + ec.message());
  if (size > kMaxModelBytes) return makeError(path + ": larger than 2 GiB");
  std::ifstream f(path, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  if (!f) return makeError(path + ": could not be read");
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes.str())) return makeError(path + ": is not an ONNX model");
  return m;
}

// The graph input (the model's one data input) as a NetLoom Input node.
Status addInput(ImportState& s, const std::string& file) {
  std::set<std::string> inits;
  for (const auto& t : s.graph.initializer()) inits.insert(t.name());
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const auto& in : s.graph.input())
    if (!inits.count(in.name())) inputs.push_back(&in);
  if (inputs.size() != 1)
    return makeError(file + ": the model has " + std::to_string(inputs.size()) +
                     " inputs; a NetLoom project reads one (its samples)");
  const onnx::ValueInfoProto& in = *inputs[0];
  auto shape = shapeOf(in);
  const int elem = in.type().tensor_type().elem_type();
  const bool isFloat = elem == onnx::TensorProto::FLOAT, isInt = elem == onnx::TensorProto::INT32;
  bool known = shape && shape->size() >= 2;
  for (size_t k = 1; known && k < shape->size(); ++k) known = (*shape)[k] > 0;
  if (!(isFloat || isInt) || !known)
    return makeError(file + ": input '" + in.name() +
                     "' must be float32 (or int32 token ids) with a batch dimension first and "
                     "every other dimension known");
  onnx::NodeProto named;
  named.set_name(in.name());
  named.set_op_type("Input");
  proto::NodeDef* d = s.model.add_nodes();
  d->set_name(s.nameFor(named));
  d->set_op("Input");
  auto* dims = (*d->mutable_attrs())["shape"].mutable_ints();
  for (size_t k = 1; k < shape->size(); ++k) dims->add_values((*shape)[k]);
  if (isInt) (*d->mutable_attrs())["dtype"].set_s("int32");
  d->set_doc("ONNX input '" + in.name() + "'");
  s.refOf[in.name()] = d->name();
  return {};
}

// Classification heads ([batch, classes] out) get a cross-entropy loss and an
// accuracy metric reading int32 labels, as the example projects have; other outputs
// are left for the user to give a loss.
void addTraining(ImportState& s, proto::Project& p) {
  if (s.graph.output_size() != 1) return;
  const std::string& y = s.graph.output(0).name();
  const Shape* shape = s.shapeOf(y);
  if (!shape || shape->size() != 2 || (*shape)[1] < 2) return;
  std::string logits = s.refOf[y];
  // A model that ends in Softmax is trained on the logits before it.
  for (const auto& n : s.model.nodes())
    if (n.name() == logits && n.op() == "Softmax" && n.inputs_size() == 1) logits = n.inputs(0);
  proto::NodeDef* label = s.model.add_nodes();
  label->set_name(s.unique("label"));
  label->set_op("Input");
  (*label->mutable_attrs())["field"].set_s("label");
  (*label->mutable_attrs())["dtype"].set_s("int32");
  proto::NodeDef* loss = s.model.add_nodes();
  loss->set_name(s.unique("loss"));
  loss->set_op("SoftmaxCrossEntropy");
  loss->add_inputs(logits);
  loss->add_inputs(label->name());
  proto::NodeDef* acc = s.model.add_nodes();
  acc->set_name(s.unique("accuracy"));
  acc->set_op("Accuracy");
  acc->add_inputs(logits);
  acc->add_inputs(label->name());
  p.mutable_train()->set_loss(loss->name());
}

// NetLoom's shapes against ONNX's, after the batch dimension; the weights against
// the parameters the NetLoom model declares.
Result<std::vector<NamedTensor>> checkAndCollect(const ImportState& s, const std::string& file) {
  auto built = buildGraph(s.model, 1);
  if (!built)
    return makeError(file + ": the imported model does not build: " + built.error().message);
  const Graph& g = *built;
  for (const auto& [onnxName, ref] : s.refOf) {
    const Shape* want = s.shapeOf(onnxName);
    ValueId v = g.findValue(ref);
    if (!want || v == kNoValue) continue;
    const Shape& have = g.values[size_t(v)].desc.shape;
    bool same = have.size() == want->size();
    for (size_t d = 1; same && d < have.size(); ++d) same = (*want)[d] < 0 || (*want)[d] == have[d];
    if (!same) {
      const Node& n = g.nodes[size_t(g.values[size_t(v)].producer)];
      return makeError(file + ": ONNX value '" + onnxName + "' has shape " + shapeToString(*want) +
                       " but NetLoom's node '" + n.name + "' (op " + n.op->name + ") computes " +
                       shapeToString(have) + ", so the op has no NetLoom form here");
    }
  }
  std::vector<NamedTensor> out;
  for (const Value& v : g.values) {
    if (v.kind != ValueKind::Param && v.kind != ValueKind::Buffer) continue;
    const auto dot = v.name.rfind('.');
    auto node = s.params.find(v.name.substr(0, dot));
    const ConstTensor* t = nullptr;
    if (node != s.params.end())
      if (auto it = node->second.find(v.name.substr(dot + 1)); it != node->second.end())
        t = &it->second;
    if (!t) return makeError(file + ": no weights for '" + v.name + "'");
    if (t->shape != v.desc.shape)
      return makeError(file + ": weights '" + v.name + "' are " + shapeToString(t->shape) +
                       " where NetLoom expects " + shapeToString(v.desc.shape));
    NamedTensor nt;
    nt.name = v.name;
    nt.shape = t->shape;
    nt.data.resize(t->f.size() * sizeof(float));
    // safetensors is little-endian, as every host NetLoom runs on.
    if (!t->f.empty()) std::memcpy(nt.data.data(), t->f.data(), nt.data.size());
    out.push_back(std::move(nt));
  }
  return out;
}

}  // namespace

Status importOnnx(const std::string& onnxPath, const std::string& projectPath) {
  auto read = readModel(onnxPath);
  if (!read) return read.error();
  onnx::ModelProto& model = *read;
  int64_t opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 11 || opset > kOpset)
    return makeError(onnxPath + ": opset " + std::to_string(opset) +
                     "; NetLoom reads opsets 11 to " + std::to_string(kOpset));
  try {
    onnx::checker::check_model(model);
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0,
                                        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return makeError(onnxPath + ": the ONNX checker refuses it: " + e.what());
  }

  ImportState s(model.graph());
  s.opset = opset;
  s.shapes = shapesOf(model.graph());
  for (const auto& t : model.graph().initializer()) {
    auto c = readTensor(t);
    if (!c) return makeError(onnxPath + ": " + c.error().message);
    s.consts[t.name()] = std::move(*c);
  }
  for (const auto& o : model.graph().output()) s.graphOutputs.insert(o.name());
  if (Status st = addInput(s, onnxPath); !st) return st;
  foldConstants(s);
  mapNodes(s);
  // An output a refused node computes is no problem of its own.
  for (const auto& o : model.graph().output())
    if (s.problems.empty() && !s.refOf.count(o.name()))
      s.problems.push_back("graph output '" + o.name() + "' is not computed by NetLoom nodes");
  if (!s.problems.empty()) {
    std::string msg =
        onnxPath + ": " + std::to_string(s.problems.size()) +
        (s.problems.size() == 1 ? " node or attribute has" : " nodes or attributes have") +
        " no NetLoom form, so nothing was imported:";
    for (const std::string& p : s.problems) msg += "\n  " + p;
    return makeError(msg);
  }
  for (const auto& o : model.graph().output()) s.model.add_outputs(s.refOf[o.name()]);

  const std::filesystem::path target(projectPath);
  proto::Project project;
  const std::string stem = std::filesystem::path(onnxPath).stem().string();
  project.set_name(model.graph().name().empty() ? stem : model.graph().name());
  project.set_format_version(kProjectFormatVersion);
  s.model.set_name(stem);
  addTraining(s, project);
  auto weights = checkAndCollect(s, onnxPath);
  if (!weights) return weights.error();
  *project.mutable_model() = s.model;
  proto::TrainDef& train = *project.mutable_train();
  train.mutable_optimizer()->set_kind(proto::Optimizer::ADAM);
  train.set_batch_size(32);
  train.set_epochs(10);
  train.set_seed(1);
  const std::filesystem::path weightsPath =
      std::filesystem::path(target).replace_extension(".safetensors");
  train.set_init_weights(weightsPath.filename().string());
  std::error_code ec;
  const bool hadWeights = std::filesystem::exists(weightsPath, ec);
  if (Status st =
          writeSafetensors(weightsPath.string(), *weights,
                           {{"source", std::filesystem::path(onnxPath).filename().string()}});
      !st)
    return st;
  Status saved = saveProject(projectPath, project);
  // Weights with no project to name them are not left behind.
  if (!saved && !hadWeights) std::filesystem::remove(weightsPath, ec);
  return saved;
}

}  // namespace netloom

#endif  // NETLOOM_WITH_ONNX
