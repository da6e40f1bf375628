// "autocast": under bf16 or fp16 the matrix ops compute on 16-bit values
// (insertAutocast, engine/compiler/autocast.cpp).
#include "engine/compiler/pass.h"
#include "engine/compiler/passes.h"

namespace netloom {
namespace {

class Autocast : public Pass {
 public:
  const char* name() const override { return "autocast"; }
  bool applies(const PassContext& c) const override { return c.opts.precision != Precision::F32; }
  Result<std::string> run(PassContext& c) override {
    c.prog.autocast = insertAutocast(c.g, c.scaled() ? "fp16" : "bf16");
    return "16-bit rounding around " + counted(c.prog.autocast.size(), "matrix op");
  }
};

}  // namespace

std::unique_ptr<Pass> autocastPass() {
  return std::make_unique<Autocast>();
}

}  // namespace netloom
