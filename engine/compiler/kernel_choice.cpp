#include "engine/compiler/kernel_choice.h"

#include "engine/graph/analyze.h"
#include "kernels/core/device.h"

namespace netloom {

Result<std::vector<ChosenKernel>> chooseKernels(const Graph& g, const KernelRegistry& kernels,
                                                const KernelSig& context, bool reference) {
  const DeviceId device = context.device->id();
  std::vector<ChosenKernel> chosen;
  for (int i = 0; i < int(g.nodes.size()); ++i) {
    const Node& n = g.nodes[i];
    if (n.op->external) continue;
    ChosenKernel c;
    c.sig = context;
    c.sig.attrs = &n.attrs;
    bool blocked = false;
    for (ValueId v : n.inputs) c.sig.in.push_back(g.values[v].desc);
    for (ValueId v : n.outputs) c.sig.out.push_back(g.values[v].desc);
    for (const auto* ds : {&c.sig.in, &c.sig.out})
      for (const TensorDesc& d : *ds) blocked = blocked || d.layout != Layout::Plain;
    const auto* list = kernels.list(n.op->name, device.kind);
    c.step.node = i;
    NodeCost cost;
    measureNode(g, n, cost);
    c.step.flops = cost.flops;
    std::vector<size_t> tried;  // with `reference`, the reference and its widened twin
    for (size_t k = 0; list && k < list->size(); ++k) tried.push_back(k);
    if (reference && !tried.empty()) {
      size_t ref = tried.size() - 1;
      while (ref > 0 && (*list)[ref].widened) --ref;
      tried = {ref};
      if ((*list).back().widened) tried.push_back(list->size() - 1);
    }
    for (size_t k : tried) {
      if (c.impl) break;
      std::string why =
          blocked && !(*list)[k].anyLayout ? "takes plain layouts only" : (*list)[k].decline(c.sig);
      if (!why.empty()) {
        c.step.declined += (c.step.declined.empty() ? "" : "; ") + (*list)[k].name + ": " + why;
        continue;
      }
      c.impl = &(*list)[k];
      c.step.kernel = c.impl->name;
    }
    if (!c.impl)
      return makeError("node '" + (n.backward ? n.origin : n.name) + "' (" + n.op->name +
                       "): no kernel on " + device.toString() +
                       (c.step.declined.empty() ? "" : " (" + c.step.declined + ")"));
    if (c.impl->workspace) c.workspaceBytes = std::max<int64_t>(0, c.impl->workspace(c.sig));
    chosen.push_back(std::move(c));
  }
  return chosen;
}

}  // namespace netloom
