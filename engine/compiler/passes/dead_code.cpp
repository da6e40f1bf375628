// "dead code": what no loss, metric or kept value reads goes (eliminateDeadNodes).
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"

namespace netloom {
namespace {

class DeadCode : public Pass {
 public:
  const char* name() const override { return "dead code"; }
  bool optional() const override { return true; }
  uint8_t preserves() const override { return kShapes; }
  Result<std::string> run(PassContext& c) override {
    eliminateDeadNodes(c.g, c.roots);
    return std::string("removed what no loss, metric or kept value reads");
  }
};

}  // namespace

std::unique_ptr<Pass> deadCodePass() {
  return std::make_unique<DeadCode>();
}

}  // namespace netloom
