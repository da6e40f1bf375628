#include "engine/compiler/layout.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "engine/ops/internal_ops.h"
#include "kernels/core/device.h"

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

constexpr int kAll = -1;  // PortRule::in or out: every data port

// A tensor whose channels do not divide by 16 is blocked padded only where the
// padding at most quadruples it (4 channels and more): a convolution's blocked code
// on 6 channels padded to 16 runs 2.5-4x faster than its plain code here, on 1
// channel padded to 16 slower.
constexpr int64_t kMaxPadding = 4;

// From the op files: each op's LayoutPorts, and element-wise ops (activations, their
// gradients, Add, Dropout, Identity) one layout and one shape on every port.
const std::map<std::string, PortRule>& rules() {
  static const std::map<std::string, PortRule> table = [] {
    std::map<std::string, PortRule> t;
    for (const OpDef* op : OpRegistry::instance().all()) {
      if (op->layoutPorts)
        t[op->name] = {op->layoutPorts->in, op->layoutPorts->out, op->layoutPorts->ignored,
                       op->layoutPorts->free, false};
      else if (op->elementwise)
        t[op->name] = {{kAll}, {kAll}, {}, false, true};
    }
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

std::vector<int> outPorts(const PortRule& r, const Node& n) {
  if (r.out.size() == 1 && r.out[0] == kAll) {
    std::vector<int> all(n.outputs.size());
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return r.out;
}

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
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
             const KernelSig& context)
      : m_g(g),
        m_pinned(pinned),
        m_kernels(kernels),
        m_device(context.device->id().kind),
        m_context(context),
        m_sets(g.values.size()) {
    m_candidate.assign(g.values.size(), false);
    for (size_t v = 0; v < g.values.size(); ++v) {
      const Value& val = g.values[v];
      const Shape& s = val.desc.shape;
      m_candidate[v] = val.kind == ValueKind::Activation && !pinned.count(ValueId(v)) &&
                       s.size() == 4 && s[1] > 0 && paddedChannels(s[1]) <= kMaxPadding * s[1] &&
                       (val.desc.dtype == DType::F32 || val.desc.dtype == DType::BF16);
    }
  }

  LayoutReport run() {
    size_t nn = m_g.nodes.size();
    m_rule.assign(nn, std::nullopt);
    for (size_t i = 0; i < nn; ++i) m_rule[i] = flexibleRule(m_g.nodes[i]);

    // Regions: uniform nodes tie all their ports together; a region is blocked when
    // it touches a convolution's port.
    // A value no uniform node ties to others is worth blocking only between two
    // convolutions: otherwise a convolution reads or writes it plain directly, with
    // no reorder.
    size_t nv = m_g.values.size();
    std::vector<bool> touches(nv, false), freeIn(nv, false), freeOut(nv, false), tied(nv, false);
    for (size_t i = 0; i < nn; ++i) {
      const PortRule* r = m_rule[i] ? &*m_rule[i] : nullptr;
      if (!r) continue;
      const Node& n = m_g.nodes[i];
      std::vector<ValueId> ports = dataValues(*r, n);
      for (ValueId v : ports) {
        if (r->free && m_candidate[v]) touches[v] = true;
        if (!r->free) m_sets.join(v, ports[0]), tied[v] = true;
      }
      if (r->free) {
        for (int p : inPorts(*r, n)) freeIn[n.inputs[p]] = true;
        for (int p : outPorts(*r, n)) freeOut[n.outputs[p]] = true;
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
    // A free op's rule assumed every port it named blocked; where a region left one
    // plain, it takes the most of the blocked ones a kernel still accepts, the rest
    // converted around it.
    for (size_t i = 0; i < nn; ++i)
      if (m_rule[i] && m_rule[i]->free)
        m_rule[i] = largestAccepted(m_g.nodes[i], *m_rule[i], m_blocked);
    if (report.blocked > 0) rewrite(report);
    return report;
  }

  // Stores convolution weights packed where the forward kernel prefers that; see
  // the header. Fails only where the store holds a packed weight this plan's
  // kernels cannot read.
  Status packWeights(const StoredLayout& stored, LayoutReport& report) {
    std::vector<std::vector<NodeId>> users = consumers(m_g);
    for (size_t v = 0; v < m_g.values.size(); ++v) {
      Value& param = m_g.values[v];
      if (param.kind != ValueKind::Param || param.desc.shape.size() != 4) continue;
      const TensorDesc* held = stored ? stored(param.name) : nullptr;
      if (held && held->layout != Layout::Packed) continue;
      std::vector<ValueId> family;  // the weight, its gradient and optimizer state
      std::vector<NodeId> readers;
      NodeId fwd = weightFamily(ValueId(v), users, family, readers);
      if (fwd < 0) {
        if (!held || readers.empty()) continue;
        // Stored packed, and read by kernels of any layout only (an evaluation plan's
        // FoldBatchNorm): they read it as it is.
        setLayout({ValueId(v)}, held->format);
        if (std::all_of(readers.begin(), readers.end(),
                        [&](NodeId n) { return accepted(m_g.nodes[n]); })) {
          ++report.packed;
          continue;
        }
        return makeError("parameter '" + param.name + "' is stored as " + held->format +
                         ", but this plan reads it elsewhere than in its convolution");
      }
      std::string format = held ? held->format : chooseFormat(fwd, family, readers);
      if (format.empty()) continue;
      setLayout(family, format);
      bool ok = std::all_of(readers.begin(), readers.end(),
                            [&](NodeId n) { return accepted(m_g.nodes[n]); });
      if (ok) {
        ++report.packed;
        continue;
      }
      if (held)
        return makeError("parameter '" + param.name + "' is stored as " + format +
                         ", which a kernel of this plan cannot read");
      setLayout(family, {});
    }
    return {};
  }

 private:
  // The values on a node's data ports (inputs, then outputs).
  std::vector<ValueId> dataValues(const PortRule& r, const Node& n) const {
    std::vector<ValueId> vs;
    for (int p : inPorts(r, n)) vs.push_back(n.inputs[p]);
    for (int p : outPorts(r, n)) vs.push_back(n.outputs[p]);
    return vs;
  }

  // The node's rule when a layout-aware kernel runs it blocked, naming the ports it
  // takes blocked; none when it must see plain tensors only. A uniform op takes all
  // its ports blocked or none. A free op (a convolution) takes the most candidate
  // ports blocked that a kernel accepts, those needing no padding first: oneDNN has
  // fast code for a padded output of a convolution whose input is plain, for
  // instance, but not always for padded inputs.
  std::optional<PortRule> flexibleRule(const Node& n) const {
    auto it = rules().find(n.op->name);
    if (it == rules().end()) return std::nullopt;
    const PortRule& r = it->second;
    std::vector<ValueId> ports = dataValues(r, n);
    bool any = false, all = true;
    for (ValueId v : ports) {
      any = any || m_candidate[v];
      all = all && m_candidate[v];
      if (r.sameShape && m_g.values[v].desc.shape != m_g.values[ports[0]].desc.shape)
        return std::nullopt;
    }
    if (ports.empty() || !(r.free ? any : all)) return std::nullopt;
    if (!r.free) return accepts(n, r) ? std::optional<PortRule>(r) : std::nullopt;
    return largestAccepted(n, r, m_candidate);
  }

  // The free op's rule `r` narrowed to the most of its ports whose values `eligible`
  // marks that a kernel takes blocked (the others plain), those needing no padding
  // first; none when it takes none.
  std::optional<PortRule> largestAccepted(const Node& n, const PortRule& r,
                                          const std::vector<bool>& eligible) const {
    std::vector<std::pair<bool, int>> slots;  // (output, port)
    for (int p : inPorts(r, n))
      if (eligible[n.inputs[p]]) slots.push_back({false, p});
    for (int p : outPorts(r, n))
      if (eligible[n.outputs[p]]) slots.push_back({true, p});
    auto padded = [&](std::pair<bool, int> slot) {
      ValueId v = slot.first ? n.outputs[slot.second] : n.inputs[slot.second];
      return m_g.values[v].desc.shape[1] % 16 != 0;
    };
    auto rank = [&](unsigned m) {
      int count = 0, pads = 0;
      for (size_t k = 0; k < slots.size(); ++k)
        if (m >> k & 1) ++count, pads += padded(slots[k]);
      return std::pair(-count, pads);
    };
    std::vector<unsigned> subsets;
    for (unsigned m = (1u << slots.size()) - 1; m > 0; --m) subsets.push_back(m);
    std::stable_sort(subsets.begin(), subsets.end(),
                     [&](unsigned a, unsigned b) { return rank(a) < rank(b); });
    for (unsigned m : subsets) {
      PortRule chosen = r;
      chosen.in.clear();
      chosen.out.clear();
      for (size_t k = 0; k < slots.size(); ++k)
        if (m >> k & 1) (slots[k].first ? chosen.out : chosen.in).push_back(slots[k].second);
      if (accepts(n, chosen)) return chosen;
    }
    return std::nullopt;
  }

  // Whether a layout-aware kernel takes `n` with the ports `r` names blocked and the
  // others plain.
  bool accepts(const Node& n, const PortRule& r) const {
    KernelSig sig = m_context;
    sig.attrs = &n.attrs;
    std::vector<int> ins = inPorts(r, n), outs = outPorts(r, n);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      TensorDesc d = m_g.values[n.inputs[k]].desc;
      d.layout = contains(ins, int(k)) ? Layout::Blocked16 : Layout::Plain;
      sig.in.push_back(d);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      TensorDesc d = m_g.values[n.outputs[k]].desc;
      d.layout = contains(outs, int(k)) ? Layout::Blocked16 : Layout::Plain;
      sig.out.push_back(d);
    }
    const auto* list = m_kernels.list(n.op->name, m_device);
    if (!list) return false;
    for (const KernelImpl& k : *list)
      if (k.anyLayout && k.decline(sig).empty()) return true;
    return false;
  }

  // The forward convolution that reads weight `w`, when only it, its two
  // gradients and the optimizer update do, and the gradient goes nowhere else;
  // -1 otherwise. `family` gets the values that share the weight's layout and
  // `readers` every node that reads one of them.
  NodeId weightFamily(ValueId w, const std::vector<std::vector<NodeId>>& users,
                      std::vector<ValueId>& family, std::vector<NodeId>& readers) const {
    NodeId fwd = -1, update = -1;
    ValueId grad = kNoValue;
    bool elsewhere = false;
    readers = users[w];
    for (NodeId u : users[w]) {
      const Node& n = m_g.nodes[u];
      const OpDef& op = *n.op;
      const bool reads = op.packableWeight >= 0 && n.inputs[size_t(op.packableWeight)] == w;
      bool conv = reads && op.role == OpRole::Layer;
      bool weightGrad = reads && op.weightGradient;
      if (conv && fwd < 0) {
        fwd = u;
      } else if (reads && op.role != OpRole::Layer) {
        if (weightGrad && grad != kNoValue) elsewhere = true;
        if (weightGrad) grad = n.outputs[0];
      } else if (op.role == OpRole::Optimizer && n.inputs[0] == w && update < 0) {
        update = u;
      } else {
        elsewhere = true;
      }
    }
    if (fwd < 0 || elsewhere) return -1;
    family = {w};
    if (grad != kNoValue) {
      if (m_pinned.count(grad)) return -1;
      for (NodeId u : users[grad]) {
        readers.push_back(u);  // the update, and readers of any layout (a norm, a histogram)
        if (m_g.nodes[u].op->anyLayout) continue;
        if (u != update || m_g.nodes[u].inputs[1] != grad) return -1;
      }
      family.push_back(grad);
    }
    if (update >= 0) {
      const Node& n = m_g.nodes[update];
      if (n.inputs[1] != grad) return -1;
      for (size_t k = 2; k < n.inputs.size(); ++k) family.push_back(n.inputs[k]);
    }
    return fwd;
  }

  // Packed with `format`, or plain where it is empty.
  void setLayout(const std::vector<ValueId>& family, const std::string& format) {
    for (ValueId f : family) {
      m_g.values[f].desc.layout = format.empty() ? Layout::Plain : Layout::Packed;
      m_g.values[f].desc.format = format;
    }
  }

  // The packed format the most convolution passes over the weight read without
  // converting it (ties go to the earlier pass, the forward first); empty where
  // every pass prefers PyTorch's layout.
  std::string chooseFormat(NodeId fwd, const std::vector<ValueId>& family,
                           const std::vector<NodeId>& readers) {
    std::vector<std::pair<NodeId, int>> passes{{fwd, m_g.nodes[fwd].op->packableWeight}};
    for (NodeId r : readers) {  // the gradient passes, which read the weight too
      const int port = m_g.nodes[r].op->packableWeight;
      if (r != fwd && port >= 0 && contains(family, m_g.nodes[r].inputs[size_t(port)]))
        passes.push_back({r, port});
    }
    std::vector<std::string> candidates;
    for (auto [n, port] : passes) {
      std::string f = preferredFormat(m_g.nodes[n], port);
      if (!f.empty() && !contains(candidates, f)) candidates.push_back(f);
    }
    std::string best;
    int bestScore = 0;
    for (const std::string& f : candidates) {
      setLayout(family, f);
      int score = 0;
      for (auto [n, port] : passes) score += preferredFormat(m_g.nodes[n], port) == f;
      if (score > bestScore) best = f, bestScore = score;
    }
    setLayout(family, {});
    return best;
  }

  KernelSig sigOf(const Node& n) const {
    KernelSig sig = m_context;
    sig.attrs = &n.attrs;
    for (ValueId v : n.inputs) sig.in.push_back(m_g.values[v].desc);
    for (ValueId v : n.outputs) sig.out.push_back(m_g.values[v].desc);
    return sig;
  }

  // Whether a layout-aware kernel takes the node as its tensors now lie.
  bool accepted(const Node& n) const {
    const auto* list = m_kernels.list(n.op->name, m_device);
    KernelSig sig = sigOf(n);
    for (size_t k = 0; list && k < list->size(); ++k)
      if ((*list)[k].anyLayout && (*list)[k].decline(sig).empty()) return true;
    return false;
  }

  // The packed format the kernel that would run `n` prefers for input `port`.
  std::string preferredFormat(const Node& n, int port) const {
    const auto* list = m_kernels.list(n.op->name, m_device);
    KernelSig sig = sigOf(n);
    for (size_t k = 0; list && k < list->size(); ++k) {
      const KernelImpl& impl = (*list)[k];
      bool blocked = false;
      for (const auto* ds : {&sig.in, &sig.out})
        for (const TensorDesc& d : *ds) blocked = blocked || d.layout != Layout::Plain;
      if (blocked && !impl.anyLayout) continue;
      if (!impl.decline(sig).empty()) continue;
      return impl.packs ? impl.packs(sig, port) : std::string();
    }
    return {};
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
    r.op = &internal_ops::reorder();
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
      const PortRule* r = m_rule[i] ? &*m_rule[i] : nullptr;
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
        if (!m_blocked[v] || (r && contains(outPorts(*r, n), int(k)))) continue;
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
  const std::set<ValueId>& m_pinned;
  const KernelRegistry& m_kernels;
  DeviceKind m_device;
  KernelSig m_context;  // device, autocast and communicator; no tensors
  Sets m_sets;
  std::vector<bool> m_candidate, m_blocked;
  std::vector<std::optional<PortRule>> m_rule;  // per node: the ports it takes blocked
  std::map<ValueId, ValueId> m_twin;
};

}  // namespace

Result<LayoutReport> assignLayouts(Graph& g, const std::set<ValueId>& pinned,
                                   const KernelRegistry& kernels, const KernelSig& context,
                                   const StoredLayout& stored) {
  LayoutPass pass(g, pinned, kernels, context);
  LayoutReport report = pass.run();
  if (Status s = pass.packWeights(stored, report); !s) return s.error();
  return report;
}

}  // namespace netloom
