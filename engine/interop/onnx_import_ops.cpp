// ONNX nodes as NetLoom nodes (onnx_import.h). Patterns of several nodes (an
// element-wise op written out as arithmetic, an op's declared ONNX form) become the
// one NetLoom op they compute; every other node is mapped by the op file that
// declares its ONNX op (OpDef::onnxImport), which reads every attribute the node has
// and refuses, by name, what NetLoom would compute differently.
#ifdef NETLOOM_WITH_ONNX

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <optional>

#include "engine/interop/onnx_form.h"
#include "engine/interop/onnx_import.h"
#include "engine/interop/onnx_import_map.h"

namespace netloom::onnxio {

int ImportState::users(const std::string& v) const {
  auto it = readers.find(v);
  return (it == readers.end() ? 0 : int(it->second.size())) + int(graphOutputs.count(v));
}

void ImportState::countReaders() {
  readers.clear();
  for (int i = 0; i < graph.node_size(); ++i)
    if (!done[size_t(i)])
      for (const std::string& in : node(i).input())
        if (!in.empty()) readers[in].push_back(i);
}

std::string ImportState::nameFor(const onnx::NodeProto& n) {
  std::vector<std::string> parts;
  std::string cur;
  const std::string src = n.name().empty() ? n.output(0) : n.name();
  for (char c : src + "/") {
    if (c == '/') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += (c == ':' || c == '.' || std::iscntrl(static_cast<unsigned char>(c))) ? '_' : c;
    }
  }
  // PyTorch names a layer's node "/layer/Conv": the layer is the name.
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  if (parts.size() > 1 && lower(parts.back()).rfind(lower(n.op_type()), 0) == 0) parts.pop_back();
  std::string base;
  for (const std::string& p : parts) base += (base.empty() ? "" : "_") + p;
  if (base.empty()) base = lower(n.op_type());
  return unique(base);
}

std::string ImportState::unique(const std::string& wanted) {
  std::string base = wanted.size() > 200 ? wanted.substr(0, 200) : wanted;
  std::string name = base;
  for (int k = 2; names.count(name); ++k) name = base + "_" + std::to_string(k);
  names.insert(name);
  return name;
}

std::string ImportState::where(const onnx::NodeProto& n) {
  return "node '" + (n.name().empty() ? n.output(0) : n.name()) + "' (op " +
         (n.domain().empty() ? "" : n.domain() + ".") + n.op_type() + ")";
}

void ImportState::problem(const onnx::NodeProto& n, const std::string& what) {
  problems.push_back(where(n) + ": " + what);
}

namespace {

const std::set<std::string> kPointwise = {"Div", "Mul",  "Add",  "Sub", "Pow",
                                          "Erf", "Tanh", "Sqrt", "Neg", "Sigmoid"};

// Evaluates the element-wise region `nodes` (in graph order) on `xs` for input `x`;
// nullopt when a node reads something else.
std::optional<std::vector<double>> evaluate(const ImportState& s, const std::vector<int>& nodes,
                                            const std::string& x, const std::string& out,
                                            const std::vector<double>& xs) {
  std::map<std::string, std::vector<double>> v{{x, xs}};
  for (int i : nodes) {
    const onnx::NodeProto& n = s.node(i);
    std::vector<std::vector<double>> in;
    for (const std::string& name : n.input()) {
      if (auto it = v.find(name); it != v.end()) {
        in.push_back(it->second);
      } else if (const ConstTensor* c = s.constOf(name); c && c->size() == 1) {
        in.push_back(std::vector<double>(xs.size(), c->at(0)));
      } else {
        return std::nullopt;
      }
    }
    std::vector<double> y(xs.size());
    const std::string& op = n.op_type();
    for (size_t k = 0; k < xs.size(); ++k) {
      double a = in[0][k], b = in.size() > 1 ? in[1][k] : 0;
      y[k] = op == "Div"    ? a / b
             : op == "Mul"  ? a * b
             : op == "Add"  ? a + b
             : op == "Sub"  ? a - b
             : op == "Pow"  ? std::pow(a, b)
             : op == "Erf"  ? std::erf(a)
             : op == "Tanh" ? std::tanh(a)
             : op == "Sqrt" ? std::sqrt(a)
             : op == "Neg"  ? -a
                            : 1 / (1 + std::exp(-a));
    }
    v[n.output(0)] = y;
  }
  auto it = v.find(out);
  if (it == v.end()) return std::nullopt;
  return it->second;
}

// Whether every value `nodes` make but the last is read only inside them.
bool closed(const ImportState& s, const std::vector<int>& nodes) {
  std::set<int> inside(nodes.begin(), nodes.end());
  for (size_t k = 0; k + 1 < nodes.size(); ++k) {
    const std::string& v = s.node(nodes[k]).output(0);
    if (s.graphOutputs.count(v)) return false;
    auto it = s.readers.find(v);
    if (it != s.readers.end())
      for (int r : it->second)
        if (!inside.count(r)) return false;
  }
  return true;
}

const std::vector<double> kSamples = {-3.1, -1.7, -0.6, -0.05, 0.2, 0.9, 1.6, 2.8};

}  // namespace

// An element-wise op as exporters write it out (GELU's 0.5·x·(1 + erf(x/√2))): a
// region of element-wise nodes over one input and scalar constants that computes,
// at sample points, what the op computes with one of its variants' attributes.
std::optional<Attrs> Mapper::matchPointwise(int head, const OnnxPointwise& p,
                                            std::vector<int>& region, std::string& x,
                                            std::string& out) {
  const onnx::NodeProto& h = s.node(head);
  if (!kPointwise.count(h.op_type()) || h.output_size() != 1) return std::nullopt;
  x.clear();
  for (const std::string& in : h.input()) {
    if (s.isConst(in)) continue;
    if (!x.empty() && in != x) return std::nullopt;
    x = in;
  }
  if (x.empty()) return std::nullopt;
  std::vector<int> nodes{head};
  std::set<std::string> made{h.output(0)};
  // Exporters write the pattern's nodes one after another.
  for (int j = head + 1; j < s.graph.node_size() && j < head + 24; ++j) {
    const onnx::NodeProto& n = s.node(j);
    if (s.done[size_t(j)] || !kPointwise.count(n.op_type()) || n.output_size() != 1) continue;
    bool reads = false, ok = true;
    for (const std::string& in : n.input()) {
      if (made.count(in)) {
        reads = true;
      } else if (in != x) {
        const ConstTensor* c = s.constOf(in);
        ok = ok && c && c->size() == 1;
      }
    }
    if (!reads || !ok) continue;
    nodes.push_back(j);
    made.insert(n.output(0));
  }
  // The longest closed prefix first: every value it makes but its last is read
  // inside it.
  for (size_t end = nodes.size(); end-- > 0;) {
    std::vector<int> sub(nodes.begin(), nodes.begin() + long(end) + 1);
    if (!closed(s, sub)) continue;
    const std::string last = s.node(sub.back()).output(0);
    auto y = evaluate(s, sub, x, last, kSamples);
    if (!y) continue;
    for (const Attrs& variant : p.variants) {
      bool same = true;
      for (size_t k = 0; k < kSamples.size() && same; ++k) {
        const double want = p.f(kSamples[k], variant);
        same = std::abs((*y)[k] - want) <= 1e-5 * (1 + std::abs(want));
      }
      if (same) {
        region = sub;
        out = last;
        return variant;
      }
    }
  }
  return std::nullopt;
}

namespace {

// What a pattern of ONNX nodes becomes: one NetLoom op at the pattern's last node.
struct Taken {
  std::string op;
  std::vector<std::string> inputs;
  Attrs attrs;
  std::vector<OnnxPatternMatch::Weight> params;
};

// An op's declared pattern (OpDef::onnxPattern) tried with node `root` last.
class PatternCtx : public OnnxPatternCtx {
 public:
  PatternCtx(const ImportState& s, const std::map<std::string, int>& producer, int root)
      : s(s), m_producer(producer), m_root(readNode(s.node(root))), m_taken{root} {}

  const OnnxNode& root() const override { return m_root; }
  const OnnxNode* producerOf(const std::string& v) const override {
    auto it = m_producer.find(v);
    if (it == m_producer.end() || s.done[size_t(it->second)] || s.isConst(v)) return nullptr;
    m_read.push_back(readNode(s.node(it->second)));
    m_readIndex[&m_read.back()] = it->second;
    return &m_read.back();
  }
  const OnnxConst* constOf(const std::string& v) const override { return s.constOf(v); }
  const Shape* shapeOf(const std::string& v) const override { return s.shapeOf(v); }
  void take(const OnnxNode& n) override {
    auto it = m_readIndex.find(&n);
    if (it != m_readIndex.end()) m_taken.push_back(it->second);
  }

  // The taken nodes in graph order (root last), where nothing outside reads them.
  std::optional<std::vector<int>> region() const {
    std::vector<int> nodes(m_taken.begin() + 1, m_taken.end());
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    nodes.push_back(m_taken.front());
    if (!closed(s, nodes)) return std::nullopt;
    return nodes;
  }

 private:
  const ImportState& s;
  const std::map<std::string, int>& m_producer;
  OnnxNode m_root;
  std::vector<int> m_taken;
  mutable std::deque<OnnxNode> m_read;  // stable addresses for take()
  mutable std::map<const OnnxNode*, int> m_readIndex;
};

// Ops declared as patterns of ONNX nodes (OpDef::onnxPattern), from the last node
// back, so that a pattern takes its nodes before a smaller one inside it could.
void takeDeclaredPatterns(ImportState& s, std::map<int, Taken>& taken) {
  std::map<std::string, int> producer;
  for (int i = 0; i < s.graph.node_size(); ++i)
    for (const std::string& y : s.node(i).output()) producer[y] = i;
  for (int i = s.graph.node_size(); i-- > 0;) {
    if (s.done[size_t(i)]) continue;
    for (const OpDef* op : OpRegistry::instance().all()) {
      if (!op->onnxPattern) continue;
      PatternCtx ctx(s, producer, i);
      OnnxPatternMatch match;
      if (!op->onnxPattern(ctx, match)) continue;
      std::optional<std::vector<int>> nodes = ctx.region();
      if (!nodes) continue;
      for (int r : *nodes) s.done[size_t(r)] = true;
      taken[i] = Taken{match.op, match.inputs, match.attrs, match.params};
      break;
    }
  }
}

// Element-wise ops written out as arithmetic (OnnxPointwise), then every op's
// declared ONNX forms (onnx_form.h), from the last node back, so that a form takes
// its nodes before a smaller one inside it could.
std::map<int, Taken> takePatterns(ImportState& s, Mapper& m) {
  std::map<int, Taken> taken;
  takeDeclaredPatterns(s, taken);
  for (const OpDef* op : OpRegistry::instance().all()) {
    if (!op->onnxPointwise) continue;
    for (int i = 0; i < s.graph.node_size(); ++i) {
      std::vector<int> region;
      std::string x, out;
      if (s.done[size_t(i)]) continue;
      if (auto attrs = m.matchPointwise(i, *op->onnxPointwise, region, x, out)) {
        for (int r : region) s.done[size_t(r)] = true;
        taken[region.back()] = Taken{op->name, {x}, *attrs, {}};
      }
    }
  }
  std::vector<std::pair<const OpDef*, Form>> forms;
  for (const OpDef* op : OpRegistry::instance().all())
    if (!op->onnxForm.empty())
      if (auto parsed = parseForms(*op))
        for (Form& f : *parsed) forms.emplace_back(op, std::move(f));
  std::stable_sort(forms.begin(), forms.end(), [](const auto& a, const auto& b) {
    return a.second.calls() > b.second.calls();
  });
  std::map<std::string, int> producer;
  for (int i = 0; i < s.graph.node_size(); ++i)
    for (const std::string& y : s.node(i).output()) producer[y] = i;
  for (int i = s.graph.node_size(); i-- > 0;) {
    if (s.done[size_t(i)]) continue;
    for (const auto& [op, form] : forms) {
      auto match = matchForm(form, s, i, producer);
      if (!match) continue;
      for (int r : match->nodes) s.done[size_t(r)] = true;
      Taken t{op->name, {match->input}, {}, {}};
      for (const auto& [key, v] : match->params) t.attrs.set(key, v);
      taken[i] = t;
      break;
    }
  }
  return taken;
}

}  // namespace

void mapNodes(ImportState& s) {
  s.countReaders();
  Mapper m(s);
  const std::map<int, Taken> taken = takePatterns(s, m);
  for (int i = 0; i < s.graph.node_size(); ++i) {
    if (auto it = taken.find(i); it != taken.end()) {
      const Taken& t = it->second;
      m.begin(i);
      std::vector<std::string> refs;
      for (const std::string& in : t.inputs) refs.push_back(m.ref(in));
      const std::string made = m.add(t.op, refs, t.attrs);
      for (const OnnxPatternMatch::Weight& w : t.params)
        m.param(made, w.key, w.value, w.value.shape);
      m.produce(made);
      continue;
    }
    if (s.done[size_t(i)]) continue;
    s.done[size_t(i)] = true;
    if (!m.map(i)) m.failed();
  }
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
