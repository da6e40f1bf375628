#include "engine/train/heads.h"

#include <vector>

#include "engine/graph/blocks.h"
#include "engine/graph/op.h"

namespace netloom {

namespace {

const proto::NodeDef* findNode(const proto::ModelDef& m, const std::string& name) {
  for (const proto::NodeDef& n : m.nodes())
    if (n.name() == name) return &n;
  return nullptr;
}

}  // namespace

Result<std::string> lossNode(const proto::Project& project) {
  auto flat = inlineBlocks(project.model());
  if (!flat) return flat.error();
  const std::string& named = project.train().loss();
  if (!named.empty()) {
    if (!findNode(*flat, named))
      return makeError("train.loss names '" + named + "', but the model has no such node");
    return named;
  }
  const OpRegistry& reg = OpRegistry::instance();
  std::vector<std::string> losses;
  for (const proto::NodeDef& n : flat->nodes())
    if (const OpDef* op = reg.find(n.op()); op && op->role == OpRole::Loss)
      losses.push_back(n.name());
  if (losses.empty())
    return makeError(
        "train.loss: the model has no loss node; add one (SoftmaxCrossEntropy for classes, "
        "MSELoss for values) and wire the network's output into it");
  if (losses.size() > 1)
    return makeError("train.loss is not set and the model has several loss nodes ('" + losses[0] +
                     "', '" + losses[1] + "'): choose the one to minimise");
  return losses[0];
}

Result<std::string> predictionOutput(const proto::Project& project) {
  if (project.model().outputs_size() > 0) return project.model().outputs(0);
  auto loss = lossNode(project);
  if (!loss)
    return makeError("the model names no output (model.outputs) and " + loss.error().message);
  auto flat = inlineBlocks(project.model());
  if (!flat) return flat.error();
  const proto::NodeDef* n = findNode(*flat, *loss);
  if (!n || n->inputs_size() == 0 || n->inputs(0).empty())
    return makeError("the loss '" + *loss +
                     "' has no input to predict with: wire the network's "
                     "output into it");
  return n->inputs(0);
}

}  // namespace netloom
