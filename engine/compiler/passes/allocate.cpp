// "allocate": the plan made real. The budget is reserved, the parameters bound, the
// arena allocated, and each kernel prepared with its tensors and workspace.
#include "engine/compiler/binding.h"
#include "engine/compiler/pass.h"
#include "kernels/core/checked.h"

namespace netloom {
namespace {

// The step's seed and number, and the guard value, on a device the host cannot address.
Status deviceStepValues(Program& prog, Device& device) {
  prog.stepValues = DeviceBuffer(device, sizeof(DeviceStepValues));
  prog.guard = DeviceBuffer(device, sizeof(float));
  if (prog.guard.ok()) {
    const float up = 1.f;
    writeFloats(device, prog.guard.data(), &up, 1);
  }
  if (!prog.stepValues.ok() || !prog.guard.ok())
    return makeRefusal("the step's values need " + std::to_string(sizeof(DeviceStepValues)) +
                       " bytes on " + device.id().toString() + ", which it could not allocate");
  return {};
}

// Kernel k prepared, its workspace in the arena where it asked for it. A library may
// refuse a configuration only when asked to build it (oneDNN throws): the error names
// the node instead of ending the process.
Status prepare(PassContext& c, size_t k) {
  Program& prog = c.prog;
  Lowering& l = c.lower;
  ChosenKernel& ck = l.chosen[k];
  const Node& n = c.g.nodes[ck.step.node];
  try {
    ck.step.fn = ck.impl->prepare(ck.sig);
  } catch (const std::exception& e) {
    return makeError("node '" + (n.backward ? n.origin : n.name) + "' (" + n.op->name +
                     "): kernel " + ck.step.kernel + " failed to prepare: " + e.what());
  }
  // A small kernel runs on the calling thread alone (the CPU's choice).
  int64_t bytes = 0;
  for (const auto* descs : {&ck.sig.in, &ck.sig.out})
    for (const TensorDesc& d : *descs) bytes = saturatingAdd(bytes, bytesOf(d));
  Device& device = c.store.device();
  if (device.runsAlone(double(ck.step.flops), bytes)) {
    ck.step.fn = device.alone(std::move(ck.step.fn));
    ck.step.alone = true;
  }
  if (auto detail = ck.impl->detail)
    ck.step.detail = [detail, sig = ck.sig] { return detail(sig); };
  if (l.workspaceRequest[k] >= 0) {
    ck.step.workspace = prog.arena.data() + l.mem.offsets[size_t(l.workspaceRequest[k])];
    ck.step.workspaceBytes = l.requests[size_t(l.workspaceRequest[k])].bytes;
  }
  for (ValueId v : n.inputs) ck.step.in.push_back(prog.refs[v]);
  for (ValueId v : n.outputs) ck.step.out.push_back(prog.refs[v]);
  prog.steps.push_back(std::move(ck.step));
  return {};
}

class Allocate : public Pass {
 public:
  const char* name() const override { return "allocate"; }
  bool planOnly() const override { return false; }
  bool listed() const override { return false; }
  uint8_t preserves() const override { return kAllAnalyses; }
  Result<std::string> run(PassContext& c) override {
    Program& prog = c.prog;
    ParamStore& store = c.store;
    Lowering& l = c.lower;
    if (Status s =
            planBudget(prog, store, l.mem, l.requests, l.requested, c.opts, *l.budget, l.planned);
        !s)
      return s.error();
    if (Status s = bindParams(prog, store, c.opts.seed); !s) return s.error();
    if (!prog.arena.resize(store.device(), l.mem.arenaBytes))
      return makeRefusal("the activations (arena) need " + formatBytes(l.mem.arenaBytes) +
                         ", which this process could not allocate");
    if (!store.device().hostAddressable())
      if (Status s = deviceStepValues(prog, store.device()); !s) return s.error();
    for (size_t k = 0; k < l.requested.size(); ++k)
      prog.refs[l.requested[k]].data = prog.arena.data() + l.mem.offsets[k];
    for (size_t v = 0; v < c.g.values.size(); ++v)
      if (l.inPlace.storage[v] != ValueId(v))
        prog.refs[v].data = prog.refs[l.inPlace.storage[v]].data;
    for (size_t k = 0; k < l.chosen.size(); ++k)
      if (Status s = prepare(c, k); !s) return s.error();
    prog.updatesBegin = updatesBegin(prog);
    return std::string();
  }
};

}  // namespace

std::unique_ptr<Pass> allocatePass() {
  return std::make_unique<Allocate>();
}

}  // namespace netloom
