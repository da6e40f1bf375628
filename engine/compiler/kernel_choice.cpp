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
    size_t firstTried = list && reference ? list->size() - 1 : 0;
    for (size_t k = firstTried; list && k < list->size() && !c.impl; ++k) {
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
