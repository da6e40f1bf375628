#include "engine/graph/graph.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <queue>
#include <set>

#include "engine/graph/blocks.h"
#include "engine/graph/data_labels.h"
#include "engine/util/memory_budget.h"

namespace netloom {

ValueId Graph::addValue(Value v) {
  values.push_back(std::move(v));
  return static_cast<ValueId>(values.size() - 1);
}

Result<NodeId> Graph::addNode(Node n, int* errorPort) {
  NodeId id = static_cast<NodeId>(nodes.size());
  if (n.outputs.empty()) {
    for (size_t i = 0; i < n.op->outputs.size(); ++i) {
      Value v;
      v.name = i == 0 ? n.name : n.name + ":" + std::to_string(i);
      v.producer = id;
      n.outputs.push_back(addValue(std::move(v)));
    }
  }
  nodes.push_back(std::move(n));
  if (Status s = inferNode(*this, id, errorPort); !s) return s.error();
  return id;
}

const Node* Graph::findNode(const std::string& name) const {
  for (const Node& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

ValueId Graph::findValue(const std::string& name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == name) return static_cast<ValueId>(i);
  if (name.size() > 2 && name.compare(name.size() - 2, 2, ":0") == 0)
    return findValue(name.substr(0, name.size() - 2));
  return kNoValue;
}

std::vector<ValueId> Graph::params() const {
  std::vector<ValueId> out;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].kind == ValueKind::Param) out.push_back(static_cast<ValueId>(i));
  return out;
}

namespace {

// No tensor may be larger than this. Far above any memory there is, it keeps every
// later sum of sizes (arena offsets, totals, FLOPs) far from int64's end, so the
// memory budget, not a wrapped number, is what refuses a huge model.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 50;

bool sizeFits(const TensorDesc& d) {
  auto bytes = checkedBytes(d.shape, d.dtype);
  return bytes && *bytes <= kMaxTensorBytes;
}

// Names the node and the tensor whose size does not fit.
Error sizeError(const Node& n, const std::string& tensor, const TensorDesc& d) {
  std::string what =
      "node '" + n.name + "' (" + n.op->name + "): " + tensor + " " + shapeToString(d.shape);
  for (int64_t dim : d.shape)
    if (dim < 0) return makeError(what + " has a negative dimension");
  auto bytes = checkedBytes(d.shape, d.dtype);
  return makeRefusal(what +
                     (bytes ? " would take " + formatBytes(*bytes)
                            : " has more elements than a 64-bit size can count") +
                     ", more than any tensor may hold (" + formatBytes(kMaxTensorBytes) + ")");
}

}  // namespace

Status inferNode(Graph& g, NodeId id, int* errorPort) {
  Node& n = g.nodes[id];
  InferCtx ctx{n.attrs, {}, {}, {}, {}, -1};
  int ndata = n.numDataInputs();
  for (int i = 0; i < ndata; ++i) ctx.in.push_back(g.values[n.inputs[i]].desc);
  ctx.params.resize(n.numParams);
  ctx.out.resize(n.outputs.size());
  if (!n.op->infer(ctx)) {
    if (errorPort) *errorPort = ctx.errorPort;
    std::string where = "node '" + n.name + "' (" + n.op->name + ")";
    if (ctx.errorPort >= 0) {
      const auto& ports = n.op->inputs;
      std::string port = ports.empty()                       ? std::to_string(ctx.errorPort)
                         : ctx.errorPort < int(ports.size()) ? ports[ctx.errorPort].name
                                                             : ports.back().name;
      where += ", input '" + port + "'";
      if (ctx.errorPort < ndata) {
        const Value& v = g.values[n.inputs[ctx.errorPort]];
        where += " from '" + v.name + "'";
      }
    }
    return makeError(where + ": " + ctx.error);
  }
  for (int i = 0; i < n.numParams; ++i)
    if (!sizeFits(ctx.params[i])) {
      const std::string& v = g.values[n.inputs[ndata + i]].name;
      return sizeError(n, "parameter '" + v.substr(v.rfind('.') + 1) + "'", ctx.params[i]);
    }
  for (size_t i = 0; i < ctx.out.size(); ++i)
    if (!sizeFits(ctx.out[i]))
      return sizeError(
          n,
          "output '" + (i < n.op->outputs.size() ? n.op->outputs[i].name : std::to_string(i)) + "'",
          ctx.out[i]);
  for (int i = 0; i < n.numParams; ++i) {
    Value& v = g.values[n.inputs[ndata + i]];
    // A shared tensor: every node that reads it must want its shape.
    if (!v.desc.shape.empty() && v.desc.shape != ctx.params[i].shape)
      return makeError("node '" + n.name + "' (" + n.op->name + "): its parameter '" + v.name +
                       "' is shared, of shape " + shapeToString(v.desc.shape) + ", and it needs " +
                       shapeToString(ctx.params[i].shape));
  }
  for (int i = 0; i < n.numParams; ++i) g.values[n.inputs[ndata + i]].desc = ctx.params[i];
  for (size_t i = 0; i < n.outputs.size(); ++i) g.values[n.outputs[i]].desc = ctx.out[i];
  return {};
}

AttrVal attrFromProto(const proto::AttrValue& v) {
  switch (v.value_case()) {
    case proto::AttrValue::kI: return v.i();
    case proto::AttrValue::kF: return v.f();
    case proto::AttrValue::kS: return v.s();
    case proto::AttrValue::kB: return v.b();
    case proto::AttrValue::kInts:
      return std::vector<int64_t>(v.ints().values().begin(), v.ints().values().end());
    case proto::AttrValue::kFloats:
      return std::vector<double>(v.floats().values().begin(), v.floats().values().end());
    default: return int64_t{0};
  }
}

proto::AttrValue attrToProto(const AttrVal& v) {
  proto::AttrValue out;
  if (auto* i = std::get_if<int64_t>(&v)) out.set_i(*i);
  if (auto* f = std::get_if<double>(&v)) out.set_f(*f);
  if (auto* s = std::get_if<std::string>(&v)) out.set_s(*s);
  if (auto* b = std::get_if<bool>(&v)) out.set_b(*b);
  // mutable_*() selects the list even when it is empty (an empty shape is a scalar).
  if (auto* is = std::get_if<std::vector<int64_t>>(&v))
    *out.mutable_ints()->mutable_values() = {is->begin(), is->end()};
  if (auto* fs = std::get_if<std::vector<double>>(&v))
    *out.mutable_floats()->mutable_values() = {fs->begin(), fs->end()};
  return out;
}

namespace {

bool isDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A port written in a reference, or nullopt when it is not a number below kMaxPorts.
std::optional<int> portNumber(const std::string& s) {
  if (!isDigits(s)) return std::nullopt;
  int port = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  if (ec != std::errc() || end != s.data() + s.size() || port >= kMaxPorts) return std::nullopt;
  return port;
}

}  // namespace

Result<InputRef> parseInputRef(const std::string& nodeName, size_t index, const std::string& s) {
  InputRef r{s, 0};
  auto colon = s.rfind(':');
  if (colon != std::string::npos) {
    r.node = s.substr(0, colon);
    std::string port = s.substr(colon + 1);
    std::string where =
        "node '" + nodeName + "' input " + std::to_string(index) + " ('" + s + "'): ";
    if (!isDigits(port)) return makeError(where + "the port after ':' must be a number");
    auto n = portNumber(port);
    if (!n)
      return makeError(where + "port " + port + " is out of range (an op has fewer than " +
                       std::to_string(kMaxPorts) + " outputs)");
    r.port = *n;
  }
  return r;
}

std::pair<std::string, int> splitInputRef(const std::string& ref) {
  auto colon = ref.rfind(':');
  if (colon == std::string::npos) return {ref, 0};
  auto port = portNumber(ref.substr(colon + 1));
  if (!port) return {ref, 0};
  return {ref.substr(0, colon), *port};
}

std::string joinInputRef(const std::string& node, int port) {
  return port == 0 ? node : node + ":" + std::to_string(port);
}

void addPersistentInputs(Graph& g, Node& node, SharedParams* shared) {
  auto persistent = [&](const auto& names, ValueKind kind) {
    if (!names) return;
    for (const std::string& p : names(node.attrs)) {
      Value v;
      v.name = node.name + "." + p;
      if (shared && kind == ValueKind::Param) {
        if (auto a = shared->alias.find(v.name); a != shared->alias.end()) {
          shared->aliased.insert(v.name);
          v.name = a->second;
        } else {
          shared->own.insert(v.name);
        }
        if (auto m = shared->made.find(v.name); m != shared->made.end()) {
          node.inputs.push_back(m->second);
          ++node.numParams;
          continue;
        }
      }
      v.kind = kind;
      v.requiresGrad = kind == ValueKind::Param;
      const std::string name = v.name;
      const ValueId id = g.addValue(std::move(v));
      if (shared && kind == ValueKind::Param) shared->made[name] = id;
      node.inputs.push_back(id);
      ++node.numParams;
    }
  };
  persistent(node.op->params, ValueKind::Param);
  persistent(node.op->buffers, ValueKind::Buffer);
}

std::vector<int> topologicalOrder(const std::vector<std::vector<int>>& users,
                                  std::vector<int>& indegree) {
  // Kahn's algorithm, preferring file order among ready nodes so plans are stable.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < int(indegree.size()); ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[i])
      if (--indegree[u] == 0) ready.push(u);
  }
  return order;
}

namespace {

// A node of the model with its op, attributes and input references resolved.
struct Pending {
  const OpDef* op;
  Attrs attrs;
  std::vector<InputRef> inputs;
};

// Each node's position in the model, by name; names are there and unique.
Result<std::map<std::string, int>> indexNames(const proto::ModelDef& model) {
  std::map<std::string, int> index;
  for (int i = 0; i < model.nodes_size(); ++i) {
    const auto& nd = model.nodes(i);
    if (nd.name().empty())
      return makeError("node #" + std::to_string(i + 1) + " (" + nd.op() + ") has no name");
    if (!index.emplace(nd.name(), i).second)
      return makeError("node '" + nd.name() + "': the name is used by another node");
  }
  return index;
}

Result<Pending> resolveNode(const proto::ModelDef& model, int i,
                            const std::map<std::string, int>& index) {
  const OpRegistry& reg = OpRegistry::instance();
  const auto& nd = model.nodes(i);
  const OpDef* op = reg.find(nd.op());
  if (!op || op->role == OpRole::Internal || op->role == OpRole::Optimizer)
    return makeError("node '" + nd.name() + "': unknown op '" + nd.op() + "'");
  Attrs given;
  for (const auto& [k, v] : nd.attrs()) given.set(k, attrFromProto(v));
  auto attrs = resolveAttrs(*op, given, true);
  if (!attrs)
    return makeError("node '" + nd.name() + "' (" + op->name + "): " + attrs.error().message);
  Pending p{op, std::move(*attrs), {}};
  size_t nports = op->inputs.size();
  bool variadic = nports && op->inputs.back().variadic;
  size_t required = requiredInputs(*op);
  size_t given_n = nd.inputs_size();
  while (given_n > required && given_n <= nports && op->inputs[given_n - 1].optional &&
         nd.inputs(int(given_n) - 1).empty())
    --given_n;  // an optional port left unconnected
  if (given_n < required || (!variadic && given_n > nports)) {
    return makeError("node '" + nd.name() + "' (" + op->name + "): expects " +
                     (variadic ? "at least " + std::to_string(required)
                      : required < nports
                          ? std::to_string(required) + " to " + std::to_string(nports)
                          : std::to_string(nports)) +
                     " input(s), has " + std::to_string(given_n));
  }
  for (int k = 0; k < int(given_n); ++k) {
    std::string port = k < int(nports) ? op->inputs[k].name : op->inputs.back().name;
    if (nd.inputs(k).empty())
      return makeError("node '" + nd.name() + "', input '" + port + "' is not connected");
    auto ref = parseInputRef(nd.name(), k, nd.inputs(k));
    if (!ref) return ref.error();
    auto it = index.find(ref->node);
    if (it == index.end())
      return makeError("node '" + nd.name() + "', input '" + port + "': no node named '" +
                       ref->node + "' (dangling input)");
    const OpDef* src = reg.find(model.nodes(it->second).op());
    if (src && ref->port >= int(src->outputs.size()))
      return makeError("node '" + nd.name() + "', input '" + port + "': node '" + ref->node +
                       "' has no output port " + std::to_string(ref->port));
    p.inputs.push_back(*ref);
  }
  return p;
}

// Kahn's algorithm, preferring file order among ready nodes so plans are stable; a
// cycle is named by its nodes.
Result<std::vector<int>> orderNodes(const proto::ModelDef& model,
                                    const std::vector<Pending>& pending,
                                    const std::map<std::string, int>& index) {
  int n = model.nodes_size();
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i)
    for (const auto& r : pending[i].inputs) {
      users[index.at(r.node)].push_back(i);
      ++indegree[i];
    }
  std::vector<int> order = topologicalOrder(users, indegree);
  if (int(order.size()) == n) return order;
  std::string names;
  for (int i = 0; i < n; ++i)
    if (indegree[i] > 0) names += (names.empty() ? "'" : ", '") + model.nodes(i).name() + "'";
  return makeError("the graph has a cycle through nodes " + names);
}

// Adds the resolved nodes to a graph in `order`.
Result<Graph> assemble(const proto::ModelDef& model, std::vector<Pending>& pending,
                       const std::vector<int>& order, int64_t batch) {
  Graph g;
  std::map<std::string, NodeId> built;
  SharedParams shared;
  for (const proto::SharedParam& t : model.shared()) {
    if (t.param() == t.with() || !shared.alias.emplace(t.param(), t.with()).second)
      return makeError("model.shared: parameter '" + t.param() +
                       "' is shared twice or with itself");
  }
  for (const auto& [from, to] : shared.alias)
    if (shared.alias.count(to))
      return makeError("model.shared: '" + from + "' is shared with '" + to +
                       "', which is itself shared: name the tensor it is shared with");
  for (int i : order) {
    const auto& nd = model.nodes(i);
    Node node;
    node.name = nd.name();
    node.op = pending[i].op;
    node.attrs = std::move(pending[i].attrs);
    for (const auto& r : pending[i].inputs)
      node.inputs.push_back(g.nodes[built[r.node]].outputs[r.port]);
    addPersistentInputs(g, node, &shared);
    if (node.op->external) node.attrs.set("__batch", batch);
    node.attrs.set("__salt", int64_t(nameHash(node.name) >> 1));
    auto id = g.addNode(std::move(node));
    if (!id) return id.error();
    built[nd.name()] = *id;
    const Node& added = g.nodes[*id];
    if (added.op->external) {
      g.values[added.outputs[0]].kind = ValueKind::Input;
      std::string field = added.attrs.s("field");
      if (g.inputsByField.count(field))
        return makeError("node '" + added.name + "': another Input already reads field '" + field +
                         "'");
      g.inputsByField[field] = added.outputs[0];
    }
  }
  for (const auto& [from, to] : shared.alias)
    for (const std::string& name : {from, to})
      if (!(name == from ? shared.aliased.count(name) : shared.own.count(name)))
        return makeError("model.shared: '" + name + "' is no parameter of the model");
  return g;
}

}  // namespace

Result<Graph> buildGraph(const proto::ModelDef& model, int64_t batch) {
  if (model.blocks_size() > 0 || hasInstances(model)) {
    auto flat = inlineBlocks(model);
    if (!flat) return flat.error();
    proto::ModelDef m = std::move(*flat);
    m.clear_blocks();
    return buildGraph(m, batch);
  }
  if (readsDataLabels(model)) return buildGraph(withDataLabels(model), batch);
  auto index = indexNames(model);
  if (!index) return index.error();
  // Resolve ops, attributes and input references before ordering.
  std::vector<Pending> pending;
  pending.reserve(model.nodes_size());
  for (int i = 0; i < model.nodes_size(); ++i) {
    auto p = resolveNode(model, i, *index);
    if (!p) return p.error();
    pending.push_back(std::move(*p));
  }
  auto order = orderNodes(model, pending, *index);
  if (!order) return order.error();
  return assemble(model, pending, *order, batch);
}

}  // namespace netloom

namespace netloom {

void removeNodes(Graph& g, const std::vector<bool>& dead) {
  std::vector<NodeId> remap(g.nodes.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dead[i]) continue;
    remap[i] = NodeId(kept.size());
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (Value& v : g.values)
    if (v.producer >= 0) v.producer = remap[v.producer];
}

std::vector<std::vector<NodeId>> consumers(const Graph& g) {
  std::vector<std::vector<NodeId>> out(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].inputs) out[v].push_back(NodeId(i));
  return out;
}

uint64_t nameHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool isValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char b = s[i];
    int extra = b < 0x80           ? 0
                : (b >> 5) == 0x6  ? 1
                : (b >> 4) == 0xE  ? 2
                : (b >> 3) == 0x1E ? 3
                                   : -1;
    if (extra < 0 || i + extra >= s.size()) return false;
    uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      unsigned char cont = s[i + k];
      if ((cont & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cont & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += extra + 1;
  }
  return true;
}

std::string nodeNameProblem(const std::string& name) {
  if (name.empty()) return "a node has no name";
  const bool utf8 = isValidUtf8(name);
  // The name as it can be shown: control bytes (and any byte, when the name is not
  // UTF-8) written as \xNN.
  std::string shown;
  bool control = false;
  for (unsigned char b : name) {
    bool escape = b < 0x20 || b == 0x7F || (!utf8 && b >= 0x80);
    control |= b < 0x20 || b == 0x7F;
    static const char* d = "0123456789abcdef";
    shown += escape ? std::string("\\x") + d[b >> 4] + d[b & 15] : std::string(1, char(b));
  }
  const std::string node = "node '" + shown + "': ";
  if (!utf8) return node + "the name is not valid UTF-8";
  if (control) return node + "the name holds a control character";
  if (name.size() > kMaxNodeNameBytes) {
    size_t cut = 40;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    return "node '" + name.substr(0, cut) + "…': the name is " + std::to_string(name.size()) +
           " bytes long; at most " + std::to_string(kMaxNodeNameBytes) + " are allowed";
  }
  if (name.find(':') != std::string::npos)
    return node + "the name holds ':', which separates a node from its output port";
  return {};
}

}  // namespace netloom
