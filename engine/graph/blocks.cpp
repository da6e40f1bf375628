#include "engine/graph/blocks.h"

#include <algorithm>
#include <memory>
#include <set>

#include "engine/graph/graph.h"

namespace netloom {

namespace {

// One level of inlining: the top-level model, or the body of one instance.
struct Scope {
  const Scope* parent = nullptr;
  const proto::ModelDef* body = nullptr;
  const proto::NodeDef* instance = nullptr;  // null at the top level
  std::string prefix;                        // "" at the top, then "a/", "a/b/", ...
  std::string top;                           // the top-level instance this lies in
  std::map<std::string, proto::AttrValue> params;
  std::map<std::string, const proto::NodeDef*> byName;
  std::map<std::string, int> inputIndex;  // BlockInput node -> instance input port
};

class Inliner {
 public:
  Inliner(const proto::ModelDef& model, std::vector<ModelProblem>& problems)
      : m_model(model), m_problems(problems) {}

  InlinedModel run() {
    m_out.model.set_name(m_model.name());
    *m_out.model.mutable_shared() = m_model.shared();  // names of the inlined nodes' tensors
    for (const proto::ModelDef& b : m_model.blocks())
      if (OpRegistry::instance().find(b.name()))
        m_problems.push_back({"", -1, "block '" + b.name() + "' has the name of an op: rename it"});
    Scope top;
    top.body = &m_model;
    index(top);
    prepare(top);
    emit(top);
    // The outputs keep naming what they named, through any instance.
    m_out.model.clear_outputs();
    for (const std::string& o : m_model.outputs()) m_out.model.add_outputs(resolve(top, o, 0));
    // Nothing of an instance that failed part way stays.
    auto* nodes = m_out.model.mutable_nodes();
    for (int i = nodes->size(); i-- > 0;) {
      auto it = m_out.instanceOf.find(nodes->Get(i).name());
      if (it == m_out.instanceOf.end() || !m_failed.count(it->second)) continue;
      m_out.instanceOf.erase(it);
      nodes->DeleteSubrange(i, 1);
    }
    for (const proto::NodeDef& nd : m_model.nodes()) {
      if (!isInstance(nd) || m_failed.count(nd.name())) continue;
      std::vector<std::string>& outs = m_out.outputsOf[nd.name()];
      const proto::ModelDef* block = findBlock(m_model, nd.op());
      for (int p = 0; p < block->outputs_size(); ++p)
        outs.push_back(resolve(top, joinInputRef(nd.name(), p), 0));
    }
    return std::move(m_out);
  }

 private:
  bool isInstance(const proto::NodeDef& nd) const { return findBlock(m_model, nd.op()) != nullptr; }

  static void index(Scope& s) {
    int inputs = 0;
    for (const proto::NodeDef& nd : s.body->nodes()) {
      s.byName[nd.name()] = &nd;
      if (nd.op() == kBlockInputOp) s.inputIndex[nd.name()] = inputs++;
    }
  }

  void fail(const Scope& s, const proto::NodeDef& at, const std::string& why) {
    std::string node = s.instance ? s.top : at.name();
    std::string where = s.instance ? "block instance '" + s.top + "': " : "";
    m_problems.push_back({node, -1, "node '" + node + "': " + where + why});
    m_failed.insert(node);
  }

  // What reference `ref`, read in scope `s`, names once everything is inlined.
  // Depth bounds chains of pass-through ports.
  std::string resolve(const Scope& s, const std::string& ref, int depth) {
    if (ref.empty() || depth > 64) return {};
    auto [name, port] = splitInputRef(ref);
    auto it = s.byName.find(name);
    if (it == s.byName.end()) return s.prefix + ref;  // dangling: buildGraph says so
    const proto::NodeDef& nd = *it->second;
    if (!present(s, nd)) {  // left out: its first input passes through
      if (nd.inputs_size() == 0) return {};
      return resolve(s, nd.inputs(0), depth + 1);
    }
    if (nd.op() == kBlockInputOp) {
      if (!s.instance) return s.prefix + ref;
      int k = s.inputIndex.at(name);
      if (k >= s.instance->inputs_size()) return {};
      return resolve(*s.parent, s.instance->inputs(k), depth + 1);
    }
    if (const proto::ModelDef* block = findBlock(m_model, nd.op())) {
      auto child = m_children.find(s.prefix + name);
      if (child == m_children.end() || port >= block->outputs_size()) return {};
      return resolve(*child->second, block->outputs(port), depth + 1);
    }
    return joinInputRef(s.prefix + name, port);
  }

  // A block param or an attribute of an inner node, with "$p" taken from `s`.
  bool substitute(const Scope& s, const proto::NodeDef& at, proto::AttrValue& v) {
    if (v.value_case() != proto::AttrValue::kS || v.s().rfind('$', 0) != 0) return true;
    std::string p = v.s().substr(1);
    auto it = s.params.find(p);
    if (it == s.params.end()) {
      fail(s, at, "attribute refers to '$" + p + "', which is not a param of the block");
      return false;
    }
    v = it->second;
    return true;
  }

  // Whether a node of a block is there: a node whose "when" attribute names a bool
  // param ("$p", or "!$p" for its negation) is left out where that is false.
  bool present(const Scope& s, const proto::NodeDef& nd) {
    auto it = nd.attrs().find(kWhenAttr);
    if (it == nd.attrs().end()) return true;
    const std::string& when = it->second.s();
    const bool negate = when.rfind('!', 0) == 0;
    proto::AttrValue v;
    v.set_s(negate ? when.substr(1) : when);
    if (!s.instance || v.s().rfind('$', 0) != 0 || !substitute(s, nd, v) ||
        v.value_case() != proto::AttrValue::kB) {
      if (m_badWhen.insert(s.prefix + nd.name()).second)
        fail(s, nd, "attribute 'when' must name a bool param of the block, as \"$p\" or \"!$p\"");
      return true;
    }
    return v.b() != negate;
  }

  void emit(const Scope& s) {
    for (const proto::NodeDef& nd : s.body->nodes()) {
      if (!present(s, nd)) continue;
      if (nd.op() == kBlockInputOp) {
        if (!s.instance) fail(s, nd, "BlockInput belongs inside a block definition");
        continue;
      }
      if (findBlock(m_model, nd.op())) {
        auto child = m_children.find(s.prefix + nd.name());
        if (child != m_children.end()) emit(*child->second);
        continue;
      }
      proto::NodeDef* out = m_out.model.add_nodes();
      *out = nd;
      out->set_name(s.prefix + nd.name());
      out->clear_inputs();
      for (const std::string& in : nd.inputs()) out->add_inputs(resolve(s, in, 0));
      out->mutable_attrs()->erase(kWhenAttr);
      for (auto& [key, value] : *out->mutable_attrs())
        if (!substitute(s, nd, value)) return;
      if (s.instance) m_out.instanceOf[out->name()] = s.top;
    }
  }

  // Makes the scope of every instance in `s`, depth first, before any node is
  // emitted, so references may name instances that come later in the file.
  void prepare(const Scope& s) {
    for (const proto::NodeDef& nd : s.body->nodes())
      if (const proto::ModelDef* block = findBlock(m_model, nd.op())) instance(s, nd, *block);
  }

  void instance(const Scope& s, const proto::NodeDef& nd, const proto::ModelDef& block) {
    for (const Scope* up = &s; up && up->instance; up = up->parent)
      if (up->instance->op() == block.name()) {
        fail(s, nd, "block '" + block.name() + "' contains an instance of itself");
        return;
      }
    auto child = std::make_unique<Scope>();
    child->parent = &s;
    child->body = &block;
    child->instance = &nd;
    child->prefix = s.prefix + nd.name() + "/";
    child->top = s.instance ? s.top : nd.name();
    index(*child);
    int inputs = int(child->inputIndex.size());
    if (nd.inputs_size() != inputs) {
      fail(s, nd,
           "block '" + block.name() + "' takes " + std::to_string(inputs) + " input(s), " +
               (s.instance ? "'" + nd.name() + "' inside it" : "the instance") + " has " +
               std::to_string(nd.inputs_size()));
      return;
    }
    child->params = {block.params().begin(), block.params().end()};
    for (auto& [key, value] : child->params)
      if (!substitute(s, nd, value)) return;
    for (const auto& [key, given] : nd.attrs()) {
      if (!block.params().count(key)) {
        fail(s, nd, "block '" + block.name() + "' has no param '" + key + "'");
        return;
      }
      proto::AttrValue v = given;
      if (!substitute(s, nd, v)) return;
      child->params[key] = v;
    }
    // A block's own tied parameters, named inside it, tie the inlined nodes' tensors.
    for (const proto::SharedParam& tie : block.shared()) {
      proto::SharedParam* out = m_out.model.add_shared();
      out->set_param(child->prefix + tie.param());
      out->set_with(child->prefix + tie.with());
    }
    const Scope* raw = child.get();
    m_children[child->prefix.substr(0, child->prefix.size() - 1)] = std::move(child);
    prepare(*raw);
  }

  const proto::ModelDef& m_model;
  std::vector<ModelProblem>& m_problems;
  InlinedModel m_out;
  std::map<std::string, std::unique_ptr<Scope>> m_children;  // by inlined instance name
  std::set<std::string> m_failed;
  std::set<std::string> m_badWhen;  // nodes whose "when" was reported
};

}  // namespace

const proto::ModelDef* findBlock(const proto::ModelDef& model, const std::string& name) {
  for (const proto::ModelDef& b : model.blocks())
    if (b.name() == name) return &b;
  return nullptr;
}

BlockInterface blockInterface(const proto::ModelDef& block) {
  BlockInterface i;
  for (const proto::NodeDef& nd : block.nodes())
    if (nd.op() == kBlockInputOp) i.inputs.push_back(nd.name());
  for (const std::string& o : block.outputs()) i.outputs.push_back(splitInputRef(o).first);
  return i;
}

OpDef blockOp(const proto::ModelDef& block) {
  OpDef op;
  op.name = block.name();
  op.category = "Blocks";
  op.doc = block.doc().empty() ? "block " + block.name() : block.doc();
  BlockInterface io = blockInterface(block);
  for (const std::string& in : io.inputs) op.inputs.push_back({in, "block input"});
  for (const std::string& out : io.outputs) op.outputs.push_back({out, "block output"});
  for (const auto& [key, value] : block.params()) {
    AttrDef a;
    a.name = key;
    a.def = attrFromProto(value);
    a.doc = "block param";
    switch (value.value_case()) {
      case proto::AttrValue::kF: a.kind = AttrKind::Float; break;
      case proto::AttrValue::kB: a.kind = AttrKind::Bool; break;
      case proto::AttrValue::kS: a.kind = AttrKind::String; break;
      case proto::AttrValue::kInts: a.kind = AttrKind::Ints; break;
      default: a.kind = AttrKind::Int; break;
    }
    op.attrs.push_back(std::move(a));
  }
  std::sort(op.attrs.begin(), op.attrs.end(),
            [](const AttrDef& a, const AttrDef& b) { return a.name < b.name; });
  return op;
}

bool hasInstances(const proto::ModelDef& model) {
  for (const proto::NodeDef& nd : model.nodes())
    if (nd.op() == kBlockInputOp || findBlock(model, nd.op())) return true;
  return false;
}

InlinedModel inlineBlocks(const proto::ModelDef& model, std::vector<ModelProblem>& problems) {
  return Inliner(model, problems).run();
}

Result<proto::ModelDef> inlineBlocks(const proto::ModelDef& model) {
  if (!hasInstances(model) && model.blocks_size() == 0) return model;
  std::vector<ModelProblem> problems;
  InlinedModel m = inlineBlocks(model, problems);
  if (!problems.empty()) return makeError(problems.front().message);
  return std::move(m.model);
}

}  // namespace netloom
