#include "engine/graph/data_labels.h"

#include <set>

#include "engine/graph/op.h"

namespace netloom {

namespace {

// Calls `fn(node, port)` for each unconnected dataLabels port, in model order.
template <class Model, class Fn>
void forEachOpenLabelPort(Model& model, Fn fn) {
  const OpRegistry& reg = OpRegistry::instance();
  for (int i = 0; i < model.nodes_size(); ++i) {
    const OpDef* op = reg.find(model.nodes(i).op());
    if (!op) continue;
    for (size_t k = 0; k < op->inputs.size(); ++k) {
      if (!op->inputs[k].dataLabels) continue;
      const auto& in = model.nodes(i).inputs();
      if (int(k) >= in.size() || in.Get(int(k)).empty()) fn(i, int(k));
    }
  }
}

std::string labelsInput(proto::ModelDef& model) {
  const OpRegistry& reg = OpRegistry::instance();
  std::set<std::string> names;
  for (const proto::NodeDef& n : model.nodes()) {
    names.insert(n.name());
    const OpDef* op = reg.find(n.op());
    if (!op || !op->external) continue;
    auto field = n.attrs().find("field");
    if (field != n.attrs().end() && field->second.s() == kLabelsField) return n.name();
  }
  std::string name = kLabelsField;
  for (int i = 2; names.count(name); ++i)
    name = std::string(kLabelsField) + "_" + std::to_string(i);
  proto::NodeDef* input = model.add_nodes();
  input->set_name(name);
  input->set_op("Input");
  (*input->mutable_attrs())["field"].set_s(kLabelsField);
  (*input->mutable_attrs())["dtype"].set_s("int32");
  // The loader fills inputs whatever their place; first in the file reads as data.
  std::rotate(model.mutable_nodes()->rbegin(), model.mutable_nodes()->rbegin() + 1,
              model.mutable_nodes()->rend());
  return name;
}

}  // namespace

bool readsDataLabels(const proto::ModelDef& model) {
  bool found = false;
  forEachOpenLabelPort(model, [&](int, int) { found = true; });
  return found;
}

proto::ModelDef withDataLabels(proto::ModelDef model) {
  if (!readsDataLabels(model)) return model;
  const std::string source = labelsInput(model);
  std::vector<int> classifiers;  // losses over classes that read the labels by default
  const OpRegistry& reg = OpRegistry::instance();
  forEachOpenLabelPort(model, [&](int node, int port) {
    proto::NodeDef* n = model.mutable_nodes(node);
    while (n->inputs_size() <= port) n->add_inputs("");
    n->set_inputs(port, source);
    const OpDef* op = reg.find(n->op());
    if (op->role == OpRole::Loss && op->definesClasses) classifiers.push_back(node);
  });
  // Such a model is reported with its accuracy unless it names metrics of its own.
  bool metrics = false;
  std::set<std::string> names;
  for (const proto::NodeDef& n : model.nodes()) {
    const OpDef* op = reg.find(n.op());
    metrics = metrics || (op && op->role == OpRole::Metric);
    names.insert(n.name());
  }
  if (metrics || classifiers.empty()) return model;
  std::string name = "accuracy";
  for (int i = 2; names.count(name); ++i) name = "accuracy_" + std::to_string(i);
  const proto::NodeDef loss = model.nodes(classifiers.front());
  proto::NodeDef* accuracy = model.add_nodes();
  accuracy->set_name(name);
  accuracy->set_op("Accuracy");
  accuracy->add_inputs(loss.inputs(0));
  accuracy->add_inputs(source);
  return model;
}

}  // namespace netloom
