#include <algorithm>

#include "engine/compiler/pass.h"

namespace netloom {

std::string counted(size_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string joined(const std::vector<std::string>& items, const std::string& none) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : "; ") + i;
  return s.empty() ? none : s;
}

std::string passKey(const std::string& name) {
  std::string k = name;
  std::replace(k.begin(), k.end(), ' ', '-');
  return k;
}

// Analyses -------------------------------------------------------------------------

Status AnalysisCache::shapes() {
  if (m_valid & kShapes) return {};
  Graph& g = m_c.g;
  // Inference writes each node's outputs and parameters: every value gets back what
  // the passes recorded (a packed weight keeps its layout), so each node is inferred
  // from its inputs as they stand.
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    std::vector<ValueId> written(n.outputs.begin(), n.outputs.end());
    const int ndata = n.numDataInputs();
    for (int i = 0; i < n.numParams; ++i) written.push_back(n.inputs[size_t(ndata + i)]);
    std::vector<TensorDesc> recorded;
    for (ValueId v : written) recorded.push_back(g.values[size_t(v)].desc);
    Status s = inferNode(g, NodeId(id));
    std::string stale;
    // A float stored in bf16 ("bf16 storage") is a float as inference sees it.
    auto kind = [](DType t) { return t == DType::BF16 ? DType::F32 : t; };
    for (size_t k = 0; k < n.outputs.size() && s && stale.empty(); ++k) {
      const TensorDesc& now = g.values[size_t(n.outputs[k])].desc;
      if (now.shape != recorded[k].shape || kind(now.dtype) != kind(recorded[k].dtype))
        stale = "internal: node '" + n.name + "' (" + n.op->name + ") records output " +
                std::to_string(k) + " as " + shapeToString(recorded[k].shape) +
                ", its inference gives " + shapeToString(now.shape);
    }
    for (size_t k = 0; k < written.size(); ++k) g.values[size_t(written[k])].desc = recorded[k];
    if (!s) return makeError("internal: " + s.message());
    if (!stale.empty()) return makeError(stale);
  }
  m_valid |= kShapes;
  return {};
}

const std::vector<std::vector<NodeId>>& AnalysisCache::readers() {
  if (!(m_valid & kProducers)) {
    m_readers = consumers(m_c.g);
    m_valid |= kProducers;
  }
  return m_readers;
}

const Lifetimes& AnalysisCache::lifetimes() {
  if (!(m_valid & kLifetimes)) {
    m_lifetimes = bufferLifetimes(m_c.g, m_c.pinned);
    m_valid |= kLifetimes;
  }
  return m_lifetimes;
}

Lifetimes& AnalysisCache::refineLifetimes() {
  lifetimes();
  return m_lifetimes;
}

void AnalysisCache::keepOnly(uint8_t preserved) {
  m_valid &= preserved;
}

PassContext::PassContext(const CompileOptions& o, ParamStore& s, Program& p)
    : opts(o), store(s), prog(p), g(p.graph), analyses(*this) {}

// The manager ------------------------------------------------------------------------

void PassManager::add(Pipeline p, std::unique_ptr<Pass> pass) {
  m_passes.push_back({p, std::move(pass)});
}

PassManager PassManager::standard() {
  PassManager m;
  for (auto* make :
       {kvCachePass, outputsPass, pipelinePass, sbpPass, foldingPass, fusionPass, autocastPass,
        autodiffPass, pipelineGradientsPass, gradientBucketsPass, optimizerPass, bf16StoragePass,
        pipelineSchedulePass, deadCodePass, chainsPass, layoutsPass, hoistBoxingsPass})
    m.add(Pipeline::Rewrite, make());
  for (auto* make : {valuesPass, inPlacePass, buffersPass, kernelsPass, memoryPass, allocatePass,
                     multiTensorPass, overlapPass})
    m.add(Pipeline::Lower, make());
  return m;
}

std::vector<std::string> PassManager::optionalNames() const {
  std::vector<std::string> names;
  for (const Entry& e : m_passes)
    if (e.pass->optional()) names.push_back(passKey(e.pass->name()));
  return names;
}

Status PassManager::checkDisabled(const std::set<std::string>& disabled) const {
  for (const std::string& name : disabled) {
    auto it = std::find_if(m_passes.begin(), m_passes.end(), [&](const Entry& e) {
      return passKey(e.pass->name()) == passKey(name);
    });
    std::string optional;
    for (const std::string& n : optionalNames()) optional += (optional.empty() ? "" : ", ") + n;
    if (it == m_passes.end())
      return makeError("--disable-pass " + name +
                       ": there is no such pass (optional passes: " + optional + ")");
    if (!it->pass->optional())
      return makeError("--disable-pass " + name + ": the pass is needed to compile (optional " +
                       "passes: " + optional + ")");
  }
  return {};
}

namespace {

std::string analysesText(uint8_t set) {
  std::string s;
  const std::pair<uint8_t, const char*> names[] = {
      {kShapes, "shapes"}, {kProducers, "producers"}, {kLifetimes, "lifetimes"}};
  for (const auto& [bit, name] : names)
    if (set & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  return s.empty() ? "none" : s;
}

// Gives each analysis a pass needs before it runs (a stale shape is a compiler bug,
// named with the pass before).
Status provide(PassContext& c, const Pass& p, const std::string& previous) {
  if (p.needs() & kShapes)
    if (Status s = c.analyses.shapes(); !s)
      return makeError(s.message() + " (after the " + previous + " pass)");
  if (p.needs() & kProducers) c.analyses.readers();
  if (p.needs() & kLifetimes) c.analyses.lifetimes();
  return {};
}

}  // namespace

std::set<std::string> disabledPasses(const CompileOptions& o) {
  std::set<std::string> off;
  for (const std::string& name : o.disabledPasses) off.insert(passKey(name));
  if (!o.fuse) off.insert({"folding", "fusion", "chains"});
  if (!o.inPlace) off.insert("in-place");
  if (!o.blockedLayouts) off.insert("layouts");
  return off;
}

Status PassManager::run(PassContext& c) const {
  const std::set<std::string> disabled = disabledPasses(c.opts);
  if (Status s = checkDisabled(disabled); !s) return s;
  std::string previous = "graph's build";
  for (const Entry& e : m_passes) {
    Pass& p = *e.pass;  // the manager is const, its passes do the work
    std::string status = "ran";
    if (!p.applies(c))
      status = "not needed";
    else if (disabled.count(passKey(p.name())))
      status = "disabled";
    else if (c.opts.planOnly && !p.planOnly())
      status = "left for the real plan";
    c.prog.pipeline.push_back({e.pipeline == Pipeline::Rewrite ? "rewrite" : "lower", p.name(),
                               p.optional(), analysesText(p.needs()), analysesText(p.preserves()),
                               status});
    if (status == "disabled" && p.listed())  // as --explain has always said of --no-fuse
      c.prog.passes.push_back({p.name(), c.g.nodes.size(), c.g.nodes.size(), "off"});
    if (status != "ran") continue;
    if (Status s = provide(c, p, previous); !s) return s;
    const size_t before = c.g.nodes.size();
    Result<std::string> changed = p.run(c);
    if (!changed) return changed.error();
    c.analyses.keepOnly(p.preserves());
    if (p.listed())
      c.prog.passes.push_back({p.name(), before, c.g.nodes.size(), std::move(*changed)});
    previous = p.name();
  }
  return {};
}

}  // namespace netloom
