// model.py: the model as nn.Modules. The top-level model is one class; each block
// is a class instanced once per block instance, so "res1/conv1.weight" is the
// module path res1.conv1.weight. Values that differ between a block's instances
// (channels, strides) become the class's own arguments; instances that differ in
// structure get classes of their own.
#include <algorithm>
#include <cctype>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>

#include "engine/graph/blocks.h"
#include "engine/interop/pytorch_gen.h"

namespace netloom::pytorch {

std::string modelRuntime();

namespace {

// One node of a scope as forward() and __init__ write it.
struct Line {
  std::string node;  // as NetLoom names it in the scope
  std::string attr;  // module attribute; empty: no module
  Lowered low;
  std::vector<std::string> ins, outs;
  std::string child;  // a block instance: its inlined prefix ("res1/")
};

struct Scope {
  const proto::ModelDef* body = nullptr;
  std::string prefix;       // inlined names' prefix: "", "res1/", "res1/inner/"
  std::string torchPrefix;  // the module path: "", "res1.", "res1.inner."
  std::vector<std::string> args;
  std::vector<Line> lines;
  std::vector<std::string> returns;
};

// A class made for a group of alike instances of one block.
struct Class {
  std::string name;
  struct Param {
    std::string name, slot;
    bool forward = false;  // read by forward(), so kept as self.<name>
  };
  std::vector<Param> params;
  std::map<std::string, std::vector<std::string>> values;  // by instance prefix
  // Per line and argument: the param it takes (-1: literal), ctor then forward args.
  std::vector<std::vector<int>> ctorParam, fwdParam;
  const Scope* first = nullptr;
};

// Attributes nn.Module has already; a node so named gets another attribute name.
const std::set<std::string>& moduleMembers() {
  static const std::set<std::string> m = [] {
    std::istringstream words(
        "training forward eval train to cuda cpu float double half bfloat16 parameters "
        "buffers "
        "children modules state_dict load_state_dict apply zero_grad register_buffer "
        "register_parameter add_module named_parameters named_buffers named_children "
        "named_modules requires_grad_ type extra_repr get_submodule get_parameter "
        "get_buffer share_memory dump_patches T_destination call_super_init ipu xpu "
        "register_module register_forward_hook register_forward_pre_hook "
        "register_full_backward_hook register_backward_hook");
    return std::set<std::string>(std::istream_iterator<std::string>(words), {});
  }();
  return m;
}

const std::set<std::string>& reservedVars() {
  static const std::set<std::string> r = {"self", "torch", "nn", "F", "json", "struct", "math"};
  return r;
}

std::string unique(std::string base, std::set<std::string>& taken) {
  std::string s = base;
  for (int k = 2; taken.count(s); ++k) s = base + "_" + std::to_string(k);
  taken.insert(s);
  return s;
}

class ModelGen {
 public:
  ModelGen(const proto::Project& p, const Graph& g) : m_project(p), m_model(p.model()), m_g(g) {}

  Result<ModelText> run() {
    ModelText out;
    Scope& top = m_scopes[""];
    top.body = &m_model;
    if (Status st = build(top); !st) return st.error();
    if (Status st = topReturns(top, out); !st) return st.error();
    if (Status st = makeClasses(); !st) return st.error();
    out.className = className(m_model.name().empty() ? "Model" : m_model.name());
    std::string text = header(out.className);
    for (const Class& c : m_classes) text += classText(c, *c.first, c.name);
    Class topClass;
    topClass.ctorParam.resize(top.lines.size());
    topClass.fwdParam.resize(top.lines.size());
    for (size_t i = 0; i < top.lines.size(); ++i) {
      topClass.ctorParam[i].assign(top.lines[i].low.ctorArgs.size(), -1);
      topClass.fwdParam[i].assign(top.lines[i].low.fwdArgs.size(), -1);
    }
    text += classText(topClass, top, out.className);
    text += "\n\nINPUT_SHAPE = " + pyTuple(m_inputShape) + "\n";
    text +=
        "\n# NetLoom's tensor name -> the PyTorch state dict's, where a NetLoom name holds\n"
        "# that differ: \"/\" between a block instance and its nodes, \".\" or \"-\" in a node "
        "name.\n"
        "TORCH_NAMES = {";
    for (const auto& [from, to] : m_renames)
      text += "\n    " + pyStr(from) + ": " + pyStr(to) + ",";
    text += m_renames.empty() ? "}\n" : "\n}\n";
    text += "NETLOOM_NAMES = {torch_name: name for name, torch_name in TORCH_NAMES.items()}\n";
    text +=
        "\n# Parameters that are the tensor of another (NetLoom's model.shared, weight tying).\n"
        "SHARED = {";
    for (const proto::SharedParam& t : m_model.shared())
      text += "\n    " + pyStr(t.param()) + ": " + pyStr(t.with()) + ",";
    text += m_model.shared().empty() ? "}\n\n\n" : "\n}\n\n\n";
    text += "def build_model():\n    return tie_shared(" + out.className + "())\n";
    text += modelRuntime();
    for (const char* name :
         {"RMSNorm(", "PositionEmbedding(", "rotary_embedding(", "scaled_dot_product_attention("})
      if (text.find(name) != std::string::npos) {
        text += layersRuntime();
        if (text.find("\nimport math\n") == std::string::npos)
          text.insert(text.find("import struct\n"), "import math\n");
        break;
      }
    // torch.nn.functional only where a layer calls it (no import nothing uses).
    const std::string functional = "import torch.nn.functional as F\n";
    bool usesF = false;
    for (size_t at = text.find("F."); at != std::string::npos && !usesF;
         at = text.find("F.", at + 1))
      usesF = at == 0 ||
              !(std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_');
    if (!usesF) text.erase(text.find(functional), functional.size());
    out.text = std::move(text);
    out.inputNode = m_inputNode;
    out.inputShape = m_inputShape;
    return out;
  }

 private:
  static std::string className(const std::string& name) {
    std::string s = sanitize(name), out;
    bool up = true;
    for (char c : s) {
      if (c == '_' && !out.empty()) {
        up = true;
        continue;
      }
      out += up ? char(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
    return out.empty() ? "Model" : out;
  }

  std::string header(const std::string& cls) const {
    std::string name = m_project.name().empty() ? cls : m_project.name();
    return "\"\"\"" + name +
           ": the model as PyTorch, exported from NetLoom.\n\n"
           "Parameter and buffer names are NetLoom's, so a run's weights load strictly:\n\n"
           "    model = build_model()\n"
           "    load_weights(model, \"weights.safetensors\")  # load_state_dict(strict=True)\n\n"
           "Blocks are classes, one submodule per instance: NetLoom's \"res1/conv1.weight\" is\n"
           "the module path res1.conv1.weight. A name that a module path cannot hold is\n"
           "mapped by TORCH_NAMES (sanitised: characters outside [A-Za-z0-9_] become \"_\"),\n"
           "which load_weights() and netloom_state_dict() apply both ways. BatchNorm's\n"
           "num_batches_tracked is PyTorch's own counter: NetLoom keeps none, PyTorch fills\n"
           "it when it is missing, and netloom_state_dict() leaves it out.\n"
           "The safetensors reader needs only json and struct, not the safetensors package.\n"
           "\"\"\"\nimport json\nimport struct\n\nimport torch\nimport torch.nn.functional as F\n"
           "from torch import nn\n";
  }

  Status fail(const std::string& node, const std::string& why) const {
    return makeError("node '" + node + "': " + why);
  }

  // The names a scope's lowering has taken: local variables, module attributes, and
  // each node's variable per output port.
  struct Names {
    std::set<std::string> vars, attrs;
    std::map<std::string, std::vector<std::string>> outVars;
  };

  // The nodes of `s` in an order that computes each after what it reads.
  Result<std::vector<int>> nodeOrder(const Scope& s) const {
    const proto::ModelDef& body = *s.body;
    std::map<std::string, int> index;
    for (int i = 0; i < body.nodes_size(); ++i) index[body.nodes(i).name()] = i;
    std::vector<std::vector<int>> users(body.nodes_size());
    std::vector<int> indegree(body.nodes_size(), 0);
    for (int i = 0; i < body.nodes_size(); ++i)
      for (const std::string& in : body.nodes(i).inputs()) {
        auto it = index.find(splitInputRef(in).first);
        if (it == index.end())
          return fail(s.prefix + body.nodes(i).name(), "reads '" + in + "', which is not a node")
              .error();
        users[it->second].push_back(i);
        ++indegree[i];
      }
    std::vector<int> order = topologicalOrder(users, indegree);
    if (int(order.size()) != body.nodes_size())
      return makeError("model '" + body.name() + "' has a cycle");
    return order;
  }

  // An Input (of the model, or of a block): the features become forward()'s
  // argument; other fields (labels) are read by train.py only.
  Status addInput(Scope& s, const proto::NodeDef& nd, Names& names) {
    const std::string full = s.prefix + nd.name();
    if (nd.op() == "Input" && !s.prefix.empty()) return fail(full, "an Input inside a block");
    bool feature = nd.op() == kBlockInputOp;
    if (!feature) {
      const Node* n = m_g.findNode(full);
      feature = n && n->attrs.s("field") == "x";
      if (feature && m_inputNode.empty()) {
        m_inputNode = nd.name();
        m_inputShape = n->attrs.ints("shape");
      }
    }
    std::string v = unique(sanitize(nd.name()), names.vars);
    names.outVars[nd.name()] = {v};
    if (!feature) return {};
    if (nd.op() == "Input" && !s.args.empty()) {
      // Every Input of field x reads the same features.
      s.lines.push_back(
          Line{nd.name(), "", Lowered{{}, {}, {}, s.args[0], {}, {}, {}}, {}, {v}, {}});
      return {};
    }
    s.args.push_back(v);
    return {};
  }

  // An instance of a block: a submodule of its own, lowered depth first.
  Status addInstance(Scope& s, const proto::NodeDef& nd, const proto::ModelDef& block, Line& line,
                     Names& names) {
    const std::string full = s.prefix + nd.name();
    Scope& child = m_scopes[full + "/"];
    child.body = &block;
    child.prefix = full + "/";
    line.attr = unique(sanitize(nd.name()), names.attrs);
    if (moduleMembers().count(line.attr)) line.attr = unique(line.attr + "_", names.attrs);
    child.torchPrefix = s.torchPrefix + line.attr + ".";
    if (Status st = build(child); !st) return st;
    line.child = child.prefix;
    line.low.expr = "{m}({*})";
    m_instances[block.name()].push_back(child.prefix);
    std::string base = unique(sanitize(nd.name()), names.vars);
    line.outs.push_back(base);
    for (int p = 1; p < block.outputs_size(); ++p)
      line.outs.push_back(unique(base + "_" + std::to_string(p), names.vars));
    return {};
  }

  // A node of an op: its PyTorch form, its parameters renamed where the module's
  // attribute path differs from NetLoom's name. False: not part of forward().
  Result<bool> addOp(Scope& s, const proto::NodeDef& nd, Line& line, Names& names) {
    const std::string full = s.prefix + nd.name();
    const Node* n = m_g.findNode(full);
    if (!n) return fail(full, "is not in the built model").error();
    if (n->op->role == OpRole::Loss || n->op->role == OpRole::Metric) {
      if (!s.prefix.empty())
        return fail(full, "a loss or metric inside a block (train.py computes them at the top)")
            .error();
      return false;
    }
    auto low = lowerNode(m_g, *n, nd);
    if (!low) return low.error();
    line.low = std::move(*low);
    if (!line.low.ctor.empty()) {
      line.attr = unique(sanitize(nd.name()), names.attrs);
      for (const std::string& p : line.low.paramNames) {
        std::string from = full + "." + p, to = s.torchPrefix + line.attr + "." + p;
        if (from != to) m_renames[from] = to;
      }
    }
    line.outs.push_back(unique(sanitize(nd.name()), names.vars));
    return true;
  }

  // Lowers every node of `s` (and, depth first, of every instance in it).
  Status build(Scope& s) {
    const proto::ModelDef& body = *s.body;
    auto order = nodeOrder(s);
    if (!order) return order.error();
    Names names{reservedVars(), moduleMembers(), {}};
    for (int i : *order) {
      const proto::NodeDef& nd = body.nodes(i);
      const std::string full = s.prefix + nd.name();
      if (nd.op() == kBlockInputOp || nd.op() == "Input") {
        if (Status st = addInput(s, nd, names); !st) return st;
        continue;
      }
      Line line;
      line.node = nd.name();
      for (const std::string& in : nd.inputs()) {
        auto [name, port] = splitInputRef(in);
        const auto& ov = names.outVars[name];
        if (port >= int(ov.size()))
          return fail(full, "reads output " + std::to_string(port) + " of '" + name +
                                "', which has no PyTorch counterpart");
        line.ins.push_back(ov[port]);
      }
      if (nd.attrs().count(kWhenAttr) && !m_g.findNode(full) && !line.ins.empty()) {
        names.outVars[nd.name()] = {line.ins[0]};  // left out by its "when": passes x on
        continue;
      }
      if (const proto::ModelDef* block = findBlock(m_model, nd.op())) {
        if (Status st = addInstance(s, nd, *block, line, names); !st) return st;
      } else {
        auto added = addOp(s, nd, line, names);
        if (!added) return added.error();
        if (!*added) continue;
      }
      names.outVars[nd.name()] = line.outs;
      s.lines.push_back(std::move(line));
    }
    m_outVars[s.prefix] = names.outVars;
    if (!s.prefix.empty())
      for (const std::string& o : body.outputs()) {
        auto [name, port] = splitInputRef(o);
        const auto& ov = names.outVars[name];
        if (port >= int(ov.size())) return fail(s.prefix + name, "output '" + o + "' is not there");
        s.returns.push_back(ov[port]);
      }
    return {};
  }

  // What the top-level forward() returns: the model's outputs, then what the loss and
  // metrics read that is not data.
  Status topReturns(Scope& top, ModelText& out) {
    if (top.args.empty())
      return makeError("the model has no Input of field 'x' for forward() to take");
    std::vector<std::string> refs(m_model.outputs().begin(), m_model.outputs().end());
    for (const proto::NodeDef& nd : m_model.nodes()) {
      const OpDef* op = OpRegistry::instance().find(nd.op());
      if (!op || (op->role != OpRole::Loss && op->role != OpRole::Metric)) continue;
      if (refs.empty() && nd.name() == m_project.train().loss() && nd.inputs_size() > 0)
        refs.push_back(nd.inputs(0));
      for (const std::string& in : nd.inputs()) {
        auto [name, port] = splitInputRef(in);
        const proto::NodeDef* src = nullptr;
        for (const proto::NodeDef& c : m_model.nodes())
          if (c.name() == name) src = &c;
        if (src && src->op() != "Input") refs.push_back(in);
      }
    }
    const auto& vars = m_outVars[""];
    for (const std::string& r : refs) {
      auto [name, port] = splitInputRef(r);
      std::string canon = joinInputRef(name, port);
      if (std::find(out.returns.begin(), out.returns.end(), canon) != out.returns.end()) continue;
      auto it = vars.find(name);
      if (it == vars.end() || port >= int(it->second.size()))
        return makeError("model output '" + r + "' is not a node's output PyTorch can give");
      out.returns.push_back(canon);
      top.returns.push_back(it->second[port]);
    }
    if (top.returns.empty()) return makeError("the model names no output (model.outputs)");
    return {};
  }

  static std::string signature(const Scope& s) {
    std::string sig;
    for (const Line& l : s.lines) {
      sig +=
          l.attr + "|" + l.low.ctor + "|" + l.low.call + "|" + l.low.expr + "|" + l.low.init + "|";
      for (const Arg& a : l.low.ctorArgs) sig += a.key + "," + a.label + ",";
      sig += "|";
      for (const Arg& a : l.low.fwdArgs) sig += a.key + ",";
      for (const auto& v : l.ins) sig += v + ",";
      for (const auto& v : l.outs) sig += v + ",";
      sig += l.child.empty() ? "\n" : "instance\n";
    }
    return sig;
  }

  // The block definitions, those a block instances before the block itself.
  std::vector<const proto::ModelDef*> blockOrder() const {
    std::vector<const proto::ModelDef*> order;
    std::set<std::string> seen;
    std::function<void(const proto::ModelDef&)> visit = [&](const proto::ModelDef& b) {
      if (!seen.insert(b.name()).second) return;
      for (const proto::NodeDef& nd : b.nodes())
        if (const proto::ModelDef* inner = findBlock(m_model, nd.op())) visit(*inner);
      order.push_back(&b);
    };
    for (const proto::ModelDef& b : m_model.blocks()) visit(b);
    return order;
  }

  Status makeClasses() {
    std::set<std::string> names = {className(m_model.name().empty() ? "Model" : m_model.name())};
    for (const auto& r : reservedVars()) names.insert(r);
    for (const proto::ModelDef* block : blockOrder()) {
      auto it = m_instances.find(block->name());
      if (it == m_instances.end()) continue;
      // Instances alike in structure share a class.
      std::vector<std::pair<std::string, std::vector<std::string>>> groups;
      for (const std::string& prefix : it->second) {
        std::string sig = signature(m_scopes[prefix]);
        auto g =
            std::find_if(groups.begin(), groups.end(), [&](auto& x) { return x.first == sig; });
        if (g == groups.end())
          groups.push_back({sig, {prefix}});
        else
          g->second.push_back(prefix);
      }
      for (auto& [sig, members] : groups) {
        Class c = decideParams(members);
        c.name = unique(className(block->name()), names);
        for (const std::string& m : members) m_classOf[m] = m_classes.size();
        m_classes.push_back(std::move(c));
        fillInstances(m_classes.back(), members);
      }
    }
    return {};
  }

  // Which arguments differ between the instances, and so become the class's own.
  Class decideParams(const std::vector<std::string>& members) {
    Class c;
    const Scope& first = m_scopes[members.front()];
    c.first = &first;
    std::set<std::string> taken = reservedVars();
    std::map<std::string, int> bySlot;
    auto consider = [&](size_t li, const std::vector<Arg> Lowered::*list, size_t ai, bool fwd) {
      std::vector<std::string> vals;
      for (const std::string& m : members)
        vals.push_back((m_scopes[m].lines[li].low.*list)[ai].value);
      if (std::all_of(vals.begin(), vals.end(), [&](auto& v) { return v == vals[0]; })) return -1;
      const Arg& a = (first.lines[li].low.*list)[ai];
      if (!a.slot.empty()) {
        auto it = bySlot.find(a.slot);
        if (it != bySlot.end() && valuesOf(c, it->second, members) == vals) {
          c.params[it->second].forward = c.params[it->second].forward || fwd;
          return it->second;
        }
      }
      // A value that follows another argument everywhere (a BatchNorm's channels after
      // its convolution's) reads the same argument.
      if (a.slot.empty())
        for (size_t k = 0; k < c.params.size(); ++k)
          if (valuesOf(c, int(k), members) == vals) {
            c.params[k].forward = c.params[k].forward || fwd;
            return int(k);
          }
      std::string base = !a.slot.empty() && !bySlot.count(a.slot)
                             ? sanitize(a.slot)
                             : first.lines[li].outs[0] + "_" + (a.key.empty() ? a.label : a.key);
      int k = int(c.params.size());
      c.params.push_back({unique(base, taken), a.slot, fwd});
      if (!a.slot.empty() && !bySlot.count(a.slot)) bySlot[a.slot] = k;
      for (size_t m = 0; m < members.size(); ++m) c.values[members[m]].push_back(vals[m]);
      return k;
    };
    for (size_t li = 0; li < first.lines.size(); ++li) {
      c.ctorParam.emplace_back();
      c.fwdParam.emplace_back();
      for (size_t ai = 0; ai < first.lines[li].low.ctorArgs.size(); ++ai)
        c.ctorParam[li].push_back(consider(li, &Lowered::ctorArgs, ai, false));
      for (size_t ai = 0; ai < first.lines[li].low.fwdArgs.size(); ++ai)
        c.fwdParam[li].push_back(consider(li, &Lowered::fwdArgs, ai, true));
    }
    return c;
  }

  static std::vector<std::string> valuesOf(const Class& c, int k,
                                           const std::vector<std::string>& members) {
    std::vector<std::string> v;
    for (const std::string& m : members) v.push_back(c.values.at(m)[k]);
    return v;
  }

  // Each instance's line in its parent constructs the class with its own values.
  void fillInstances(const Class& c, const std::vector<std::string>& members) {
    for (const std::string& m : members) {
      std::string parentPrefix = m.substr(0, m.rfind('/', m.size() - 2) + 1);
      if (m.rfind('/', m.size() - 2) == std::string::npos) parentPrefix = "";
      Scope& parent = m_scopes[parentPrefix];
      for (Line& l : parent.lines) {
        if (l.child != m) continue;
        l.low.ctor = c.name;
        const proto::NodeDef* def = nullptr;
        for (const proto::NodeDef& nd : parent.body->nodes())
          if (nd.name() == l.node) def = &nd;
        for (size_t k = 0; k < c.params.size(); ++k) {
          Arg a{c.params[k].name, c.values.at(m)[k], {}, {}, {}};
          if (def && !c.params[k].slot.empty()) {
            auto it = def->attrs().find(c.params[k].slot);
            if (it != def->attrs().end() && it->second.value_case() == proto::AttrValue::kS &&
                it->second.s().rfind('$', 0) == 0)
              a.slot = it->second.s().substr(1);
          }
          l.low.ctorArgs.push_back(std::move(a));
        }
      }
    }
  }

  static std::string renderArgs(const std::vector<Arg>& args, const std::vector<int>& params,
                                const Class& c, bool inForward) {
    std::string out;
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      int p = i < params.size() ? params[i] : -1;
      if (p < 0 && !a.dflt.empty() && a.value == a.dflt) continue;
      std::string v = p < 0 ? a.value : (inForward ? "self." : "") + c.params[p].name;
      out += (out.empty() ? "" : ", ") + (a.key.empty() ? v : a.key + "=" + v);
    }
    return out;
  }

  static std::string expression(const Line& l, const std::vector<int>& params, const Class& c) {
    if (!l.low.call.empty()) {
      std::string ins;
      for (const auto& v : l.ins) ins += (ins.empty() ? "" : ", ") + v;
      std::string args = renderArgs(l.low.fwdArgs, params, c, true);
      return l.low.call + "(" + ins + (args.empty() || ins.empty() ? "" : ", ") + args + ")";
    }
    std::string e, t = l.low.expr;
    for (size_t i = 0; i < t.size(); ++i) {
      size_t close = t.find('}', i);
      if (t[i] != '{' || close == std::string::npos) {
        e += t[i];
        continue;
      }
      std::string key = t.substr(i + 1, close - i - 1);
      i = close;
      if (key == "m") {
        e += "self." + l.attr;
      } else if (key == "*") {
        for (size_t k = 0; k < l.ins.size(); ++k) e += (k ? ", " : "") + l.ins[k];
      } else if (key[0] == 'a') {
        size_t k = std::stoul(key.substr(1));
        int p = k < params.size() ? params[k] : -1;
        e += p < 0 ? l.low.fwdArgs[k].value : "self." + c.params[p].name;
      } else {
        e += l.ins[std::stoul(key)];
      }
    }
    return e;
  }

  static std::string initLine(const std::string& attr, const std::string& init) {
    std::string w = "self." + attr + ".weight";
    if (init == "kaiming_uniform")
      return "nn.init.kaiming_uniform_(" + w + ", nonlinearity=\"relu\")";
    if (init == "kaiming_normal")
      return "nn.init.kaiming_normal_(" + w + ", nonlinearity=\"relu\")";
    if (init == "xavier_uniform") return "nn.init.xavier_uniform_(" + w + ")";
    if (init == "xavier_normal") return "nn.init.xavier_normal_(" + w + ")";
    if (init.rfind("normal:", 0) == 0)  // N(0, std²), std after the colon
      return "nn.init.normal_(" + w + ", std=" + init.substr(7) + ")";
    return "nn.init.zeros_(" + w + ")";
  }

  std::string classText(const Class& c, const Scope& s, const std::string& name) const {
    std::string t = "\n\nclass " + name + "(nn.Module):\n";
    if (!s.prefix.empty())
      t += "    \"\"\"NetLoom block '" + s.body->name() + "'" +
           (s.body->doc().empty() ? "" : ": " + s.body->doc()) + "\"\"\"\n\n";
    t += "    def __init__(self";
    for (const auto& p : c.params) t += ", " + p.name;
    t += "):\n        super().__init__()\n";
    for (const auto& p : c.params)
      if (p.forward) t += "        self." + p.name + " = " + p.name + "\n";
    for (size_t i = 0; i < s.lines.size(); ++i) {
      const Line& l = s.lines[i];
      if (l.low.ctor.empty()) continue;
      if (l.attr != sanitize(l.node) || !isIdentifier(l.node))
        t += "        # NetLoom node " + pyStr(l.node) + "\n";
      t += "        self." + l.attr + " = " + l.low.ctor + "(" +
           renderArgs(l.low.ctorArgs, c.ctorParam[i], c, false) + ")\n";
      if (!l.low.init.empty()) t += "        " + initLine(l.attr, l.low.init) + "\n";
    }
    t += "\n    def forward(self";
    for (const auto& a : s.args) t += ", " + a;
    t += "):\n";
    for (size_t i = 0; i < s.lines.size(); ++i) {
      const Line& l = s.lines[i];
      std::string outs;
      for (size_t k = 0; k < l.outs.size(); ++k) outs += (k ? ", " : "") + l.outs[k];
      t += "        " + outs + " = " + expression(l, c.fwdParam[i], c) + "\n";
    }
    t += "        return ";
    for (size_t k = 0; k < s.returns.size(); ++k) t += (k ? ", " : "") + s.returns[k];
    return t + "\n";
  }

  const proto::Project& m_project;
  const proto::ModelDef& m_model;
  const Graph& m_g;
  std::map<std::string, Scope> m_scopes;  // by prefix; std::map keeps references stable
  std::map<std::string, std::map<std::string, std::vector<std::string>>> m_outVars;
  std::map<std::string, std::vector<std::string>> m_instances;  // block -> instance prefixes
  std::map<std::string, size_t> m_classOf;
  std::vector<Class> m_classes;
  std::map<std::string, std::string> m_renames;
  std::string m_inputNode;
  std::vector<int64_t> m_inputShape;
};

// Every node names an op PyTorch can be given, or a block; said before anything is built.
Status checkOps(const proto::ModelDef& model, const proto::ModelDef& body, bool inBlock) {
  const OpRegistry& reg = OpRegistry::instance();
  for (const proto::NodeDef& nd : body.nodes()) {
    if (findBlock(model, nd.op()) || (inBlock && nd.op() == kBlockInputOp)) continue;
    const OpDef* op = reg.find(nd.op());
    if (!op || op->role == OpRole::Internal || op->role == OpRole::Optimizer)
      return makeError("node '" + nd.name() + "'" +
                       (inBlock ? " of block '" + body.name() + "'" : "") + ": op '" + nd.op() +
                       "' has no PyTorch form (not a NetLoom layer)");
  }
  return {};
}

}  // namespace

Result<ModelText> generateModel(const proto::Project& project) {
  const proto::ModelDef& model = project.model();
  if (Status st = checkOps(model, model, false); !st) return st.error();
  for (const proto::ModelDef& b : model.blocks())
    if (Status st = checkOps(model, b, true); !st) return st.error();
  auto g = buildGraph(model, 2);
  if (!g) return g.error();
  return ModelGen(project, *g).run();
}

}  // namespace netloom::pytorch
