#include "engine/compiler/layout.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace netloom {

namespace {

// Which ports of an op carry N×C×H×W activations that a layout-aware kernel reads in
// the layout the signature gives. `in` and `out` list data ports (kAll: every input);
// `ignored` inputs are read for their shape only. A `free` op (the convolutions)
// takes each port in its own layout; the others need one layout on all their ports,
// and element-wise ones (`sameShape`) one shape too.
struct PortRule {
  std::vector<int> in, out, ignored;
  bool free = false;
  bool sameShape = false;
};

constexpr int kAll = -1;

const std::map<std::string, PortRule>& rules() {
  static const std::map<std::string, PortRule> table = [] {
    std::map<std::string, PortRule> t;
    for (std::string conv : {"Conv2d", "ConvTranspose2d"}) {
      t[conv] = {{0}, {0}, {}, true};
      t[conv + "GradInput"] = {{0}, {0}, {1}, true};
      t[conv + "GradWeight"] = {{0, 1}, {}, {}, true};
    }
    for (const char* op : {"ReLU", "LeakyReLU", "GELU", "Sigmoid", "Tanh", "Dropout", "Identity"})
      t[op] = {{0}, {0}, {}, false, true};
    for (const char* op : {"ReLUGrad", "LeakyReLUGrad", "GELUGrad", "SigmoidGrad", "TanhGrad"})
      t[op] = {{0, 1}, {0}, {}, false, true};
    t["Add"] = {{kAll}, {0}, {}, false, true};
    t["BatchNorm"] = {{0}, {0}, {}, false};
    t["BatchNormGrad"] = {{0, 1}, {0}, {}, false};
    t["MaxPool2d"] = {{0}, {0}, {}, false};
    t["AvgPool2d"] = {{0}, {0}, {}, false};
    t["MaxPool2dGrad"] = {{0, 1}, {0}, {}, false};
    t["AvgPool2dGrad"] = {{0}, {0}, {1}, false};
    t["GlobalAvgPool2d"] = {{0}, {}, {}, false};
    t["GlobalAvgPool2dGrad"] = {{}, {0}, {1}, false};
    t["ReduceChannels"] = {{0}, {}, {}, false};
    return t;
  }();
  return table;
}

std::vector<int> inPorts(const PortRule& r, const Node& n) {
  if (r.in.size() == 1 && r.in[0] == kAll) {
    std::vector<int> all(n.numDataInputs());
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return r.in;
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

struct Sets {
  std::vector<int> parent;
  explicit Sets(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

class LayoutPass {
 public:
  LayoutPass(Graph& g, const std::set<ValueId>& pinned, const KernelRegistry& kernels,
             DeviceKind device)
      : m_g(g), m_kernels(kernels), m_device(device), m_sets(g.values.size()) {
    m_candidate.assign(g.values.size(), false);
    for (size_t v = 0; v < g.values.size(); ++v) {
      const Value& val = g.values[v];
      const Shape& s = val.desc.shape;
      m_candidate[v] = val.kind == ValueKind::Activation && !pinned.count(ValueId(v)) &&
                       s.size() == 4 && s[1] > 0 && s[1] % 16 == 0 && val.desc.dtype == DType::F32;
    }
  }

  LayoutReport run() {
    size_t nn = m_g.nodes.size();
    m_rule.assign(nn, nullptr);
    for (size_t i = 0; i < nn; ++i) m_rule[i] = flexibleRule(m_g.nodes[i]);

    // Regions: uniform nodes tie all their ports together; a region is blocked when
    // it touches a convolution's port.
    // A value no uniform node ties to others is worth blocking only between two
    // convolutions: otherwise a convolution reads or writes it plain directly, with
    // no reorder.
    size_t nv = m_g.values.size();
    std::vector<bool> touches(nv, false), freeIn(nv, false), freeOut(nv, false), tied(nv, false);
    for (size_t i = 0; i < nn; ++i) {
      const PortRule* r = m_rule[i];
      if (!r) continue;
      const Node& n = m_g.nodes[i];
      std::vector<ValueId> ports = dataValues(*r, n);
      for (ValueId v : ports) {
        if (r->free && m_candidate[v]) touches[v] = true;
        if (!r->free) m_sets.join(v, ports[0]), tied[v] = true;
      }
      if (r->free) {
        for (int p : inPorts(*r, n)) freeIn[n.inputs[p]] = true;
        for (int p : r->out) freeOut[n.outputs[p]] = true;
      }
    }
    std::vector<bool> regionBlocked(nv, false);
    for (size_t v = 0; v < nv; ++v)
      if (touches[v] && (tied[v] || (freeIn[v] && freeOut[v])))
        regionBlocked[m_sets.find(int(v))] = true;
    m_blocked.assign(m_g.values.size(), false);
    LayoutReport report;
    for (size_t v = 0; v < m_g.values.size(); ++v) {
      m_blocked[v] = m_candidate[v] && regionBlocked[m_sets.find(int(v))];
      if (m_blocked[v]) {
        m_g.values[v].desc.layout = Layout::Blocked16;
        ++report.blocked;
      }
    }
    if (report.blocked == 0) return report;
    rewrite(report);
    return report;
  }

 private:
  // The values on a node's data ports (inputs, then outputs).
  std::vector<ValueId> dataValues(const PortRule& r, const Node& n) const {
    std::vector<ValueId> vs;
    for (int p : inPorts(r, n)) vs.push_back(n.inputs[p]);
    for (int p : r.out) vs.push_back(n.outputs[p]);
    return vs;
  }

  // The node's rule when a layout-aware kernel runs it blocked; null when it must
  // see plain tensors only.
  const PortRule* flexibleRule(const Node& n) const {
    auto it = rules().find(n.op->name);
    if (it == rules().end()) return nullptr;
    const PortRule& r = it->second;
    std::vector<ValueId> ports = dataValues(r, n);
    bool any = false, all = true;
    for (ValueId v : ports) {
      any = any || m_candidate[v];
      all = all && m_candidate[v];
      if (r.sameShape && m_g.values[v].desc.shape != m_g.values[ports[0]].desc.shape)
        return nullptr;
    }
    if (ports.empty() || !(r.free ? any : all)) return nullptr;
    // Ask the kernels: the configuration with every candidate port blocked.
    KernelSig sig;
    sig.attrs = &n.attrs;
    std::vector<int> ins = inPorts(r, n);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      TensorDesc d = m_g.values[n.inputs[k]].desc;
      d.layout =
          contains(ins, int(k)) && m_candidate[n.inputs[k]] ? Layout::Blocked16 : Layout::Plain;
      sig.in.push_back(d);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      TensorDesc d = m_g.values[n.outputs[k]].desc;
      d.layout =
          contains(r.out, int(k)) && m_candidate[n.outputs[k]] ? Layout::Blocked16 : Layout::Plain;
      sig.out.push_back(d);
    }
    const auto* list = m_kernels.list(n.op->name, m_device);
    if (!list) return nullptr;
    for (const KernelImpl& k : *list)
      if (k.anyLayout && k.decline(sig).empty()) return &r;
    return nullptr;
  }

  // A plain copy of blocked `v` (or the plain tensor a producer writes for it).
  ValueId plainTwin(ValueId v, std::vector<Node>& out, const Node& user, LayoutReport& report) {
    auto it = m_twin.find(v);
    if (it != m_twin.end()) return it->second;
    ValueId twin = addTwin(v);
    out.push_back(reorderNode(v, twin, user));
    ++report.reorders;
    return twin;
  }

  ValueId addTwin(ValueId v) {
    Value t = m_g.values[v];
    t.name += "/nchw";
    t.desc.layout = Layout::Plain;
    t.producer = -1;
    ValueId id = m_g.addValue(std::move(t));
    m_twin[v] = id;
    m_blocked.push_back(false);
    return id;
  }

  Node reorderNode(ValueId from, ValueId to, const Node& near) const {
    Node r;
    r.name = m_g.values[from].name + "/reorder";
    r.op = OpRegistry::instance().find("Reorder");
    r.inputs = {from};
    r.outputs = {to};
    r.backward = near.backward;
    r.origin = near.backward ? near.origin : near.name;
    return r;
  }

  void rewrite(LayoutReport& report) {
    std::vector<Node> out;
    out.reserve(m_g.nodes.size() + 8);
    for (size_t i = 0; i < m_g.nodes.size(); ++i) {
      Node n = m_g.nodes[i];
      const PortRule* r = m_rule[i];
      std::vector<int> ins = r ? inPorts(*r, n) : std::vector<int>{};
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        ValueId v = n.inputs[k];
        if (!m_blocked[v]) continue;
        bool takesBlocked = r && (contains(ins, int(k)) || contains(r->ignored, int(k)));
        if (!takesBlocked) n.inputs[k] = plainTwin(v, out, n, report);
      }
      std::vector<std::pair<ValueId, ValueId>> after;  // (plain written, blocked wanted)
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        ValueId v = n.outputs[k];
        if (!m_blocked[v] || (r && contains(r->out, int(k)))) continue;
        ValueId twin = addTwin(v);
        n.outputs[k] = twin;
        after.push_back({twin, v});
      }
      out.push_back(std::move(n));
      size_t self = out.size() - 1;
      for (auto [plain, blocked] : after) {
        Node r = reorderNode(plain, blocked, out[self]);
        out.push_back(std::move(r));
        ++report.reorders;
      }
    }
    m_g.nodes = std::move(out);
    for (Value& v : m_g.values) v.producer = -1;
    for (size_t i = 0; i < m_g.nodes.size(); ++i)
      for (ValueId v : m_g.nodes[i].outputs) m_g.values[v].producer = NodeId(i);
  }

  Graph& m_g;
  const KernelRegistry& m_kernels;
  DeviceKind m_device;
  Sets m_sets;
  std::vector<bool> m_candidate, m_blocked;
  std::vector<const PortRule*> m_rule;
  std::map<ValueId, ValueId> m_twin;
};

}  // namespace

LayoutReport assignLayouts(Graph& g, const std::set<ValueId>& pinned, const KernelRegistry& kernels,
                           DeviceKind device) {
  return LayoutPass(g, pinned, kernels, device).run();
}

}  // namespace netloom
