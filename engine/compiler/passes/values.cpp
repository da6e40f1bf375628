// "values": the graph is final; every value is placed on the plan's device and given
// its tensor reference, and the loss and metrics are named in the program.
#include "engine/compiler/pass.h"

namespace netloom {
namespace {

class Values : public Pass {
 public:
  const char* name() const override { return "values"; }
  uint8_t preserves() const override { return kAllAnalyses; }
  bool listed() const override { return false; }
  Result<std::string> run(PassContext& c) override {
    Graph& g = c.g;
    Program& prog = c.prog;
    const DeviceId device = c.store.device().id();
    prog.loss = c.loss;
    for (const std::string& m : c.metricNames)
      prog.metrics.push_back({m, g.findNode(m)->outputs[0]});
    for (Value& v : g.values) v.desc.device = device;
    prog.refs.assign(g.values.size(), TensorRef{});
    for (size_t v = 0; v < g.values.size(); ++v) {
      prog.refs[v].shape = g.values[v].desc.shape;
      prog.refs[v].dtype = g.values[v].desc.dtype;
      prog.refs[v].device = device;
    }
    return std::string();
  }
};

}  // namespace

std::unique_ptr<Pass> valuesPass() {
  return std::make_unique<Values>();
}

}  // namespace netloom
