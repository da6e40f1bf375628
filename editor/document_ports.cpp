// Which ops and blocks can take a port's tensor: quick-add from a wire offers those,
// each tried as a two-node model. And the blocks a user may place.
#include <algorithm>

#include "editor/document.h"
#include "editor/library.h"
#include "engine/graph/blocks.h"

namespace netloom::editor {

std::vector<proto::ModelDef> GraphDocument::placeableBlocks() const {
  std::vector<proto::ModelDef> out;
  for (const proto::ModelDef& b : m_project.model().blocks())
    if (!OpRegistry::instance().find(b.name())) out.push_back(b);
  for (const proto::ModelDef& b : libraryBlocks())
    if (!block(b.name())) out.push_back(b);
  return out;
}

std::vector<std::string> GraphDocument::opsAccepting(NodeId from, int fromPort) const {
  std::optional<TensorDesc> source;
  if (contains(from)) {
    auto it = analysis().nodes.find(node(from).def.name());
    if (it != analysis().nodes.end() && fromPort < int(it->second.outputs.size()))
      source = it->second.outputs[fromPort];
  }
  const std::vector<proto::ModelDef> blocks = placeableBlocks();
  std::vector<std::string> names;
  for (const OpDef* op : OpRegistry::instance().all())
    if (!op->inputs.empty() && isPlaceable(*op) && (!source || accepts(*source, *op, {})))
      names.push_back(op->name);
  for (const proto::ModelDef& b : blocks)
    if (blockInterface(b).inputs.size() > 0 && (!source || accepts(*source, blockOp(b), blocks)))
      names.push_back(b.name());
  return names;
}

// A two-node model: an Input of that tensor feeding the op. Only a problem on the
// op's first port rules it out; missing attributes do not.
bool GraphDocument::accepts(const TensorDesc& source, const OpDef& op,
                            const std::vector<proto::ModelDef>& blocks) {
  if (source.shape.empty()) return true;
  proto::ModelDef m;
  for (const proto::ModelDef& b : blocks) *m.add_blocks() = b;
  proto::NodeDef* in = m.add_nodes();
  in->set_name("source");
  in->set_op("Input");
  proto::AttrValue shape, dtype;
  for (size_t i = 1; i < source.shape.size(); ++i)
    shape.mutable_ints()->add_values(source.shape[i]);
  dtype.set_s(source.dtype == DType::I32 ? "int32" : "float32");
  (*in->mutable_attrs())["shape"] = shape;
  (*in->mutable_attrs())["dtype"] = dtype;
  proto::NodeDef* n = m.add_nodes();
  n->set_name("candidate");
  n->set_op(op.name);
  n->add_inputs("source");
  // Required attributes get the smallest value their range allows, so the op's
  // shape rule runs and only the input decides.
  for (const AttrDef& ad : op.attrs) {
    if (!ad.required) continue;
    proto::AttrValue v;
    int64_t least = int64_t(std::max(1.0, ad.min));
    if (ad.kind == AttrKind::Int) v.set_i(least);
    if (ad.kind == AttrKind::Ints) v.mutable_ints()->add_values(least);
    if (ad.kind == AttrKind::Float) v.set_f(std::max(ad.min, 1e-3));
    if (ad.kind == AttrKind::String && !ad.choices.empty()) v.set_s(ad.choices.front());
    (*n->mutable_attrs())[ad.name] = v;
  }
  ModelAnalysis a = analyzeModel(m, source.shape[0]);
  return std::none_of(a.problems.begin(), a.problems.end(),
                      [](const ModelProblem& p) { return p.node == "candidate" && p.port == 0; });
}

}  // namespace netloom::editor
