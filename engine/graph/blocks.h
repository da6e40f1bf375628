// Blocks: named sub-models that nodes instance by op name (see ModelDef in
// project.proto). The engine never builds a block as such: it inlines every
// instance into plain nodes named "instance/node", substituting the instance's
// params, and builds the result. The editor asks here for an instance's ports.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/graph/analyze.h"
#include "engine/graph/op.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

inline constexpr const char* kBlockInputOp = "BlockInput";
// A node of a block with this attribute ("$p" or "!$p", p a bool param) is there
// only where it holds; where it is left out, its first input passes through (a
// Transformer block's norms before or after the sublayers, by one param).
inline constexpr const char* kWhenAttr = "when";

// The definition named `name` among the top-level model's blocks, or null.
const proto::ModelDef* findBlock(const proto::ModelDef& model, const std::string& name);

// A block's ports as an instance shows them.
struct BlockInterface {
  std::vector<std::string> inputs;   // its BlockInput nodes, in order
  std::vector<std::string> outputs;  // the nodes its outputs name, in order
};
BlockInterface blockInterface(const proto::ModelDef& block);

// A block described as an op, so the editor's canvas, inspector and palette treat
// instances like any node: its ports, its params as attributes (kind and default
// from the param's value), category "Blocks". It has no shape rule of its own; the
// analysis inlines instances instead.
OpDef blockOp(const proto::ModelDef& block);

struct InlinedModel {
  proto::ModelDef model;  // no instances and no blocks left
  // Every node an instance became, and where the instance's output ports now come
  // from ("instance/node:port"), by top-level instance name.
  std::map<std::string, std::string> instanceOf;  // inlined node -> top-level instance
  std::map<std::string, std::vector<std::string>> outputsOf;
};

// Tolerant: an instance that cannot be inlined (unknown block, wrong inputs, a
// block that contains itself, an unknown param) is reported in `problems`, on the
// top-level instance, and left out, so its users see a dangling input.
InlinedModel inlineBlocks(const proto::ModelDef& model, std::vector<ModelProblem>& problems);

// Strict: the first problem is the error. A model without instances comes back as
// it is.
Result<proto::ModelDef> inlineBlocks(const proto::ModelDef& model);

// Whether any node of `model` instances a block (or is a block's input port, which
// belongs inside a definition only).
bool hasInstances(const proto::ModelDef& model);

}  // namespace netloom
