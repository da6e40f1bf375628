// Pointwise: a chain of element-wise ops in one loop, made by the compiler
// (engine/compiler/chains.cpp), never drawn. Its attributes name each step's op, the
// step's own attributes and operands, and the steps whose values it writes
// (kernels/core/pointwise.h); every input and output has the first input's shape.
#include "kernels/core/pointwise.h"

#include "engine/ops/op_helpers.h"

namespace netloom {

void registerPointwise(OpRegistry& r) {
  OpDef d;
  d.name = "Pointwise";
  d.category = "Internal";
  d.role = OpRole::Internal;
  d.doc = "A chain of element-wise ops run as one loop (made by the compiler)";
  d.inputs = {{"x", "the chain's inputs, all of one shape", true}};
  d.outputs = {{"y", "the values of the steps attribute 'outputs' lists, in order"}};
  // Each output element is computed from the inputs' elements at its position alone,
  // all of them read before any output is written: any output may share a dead
  // input's memory, and any layout the inputs share will do.
  d.inplaceable = true;
  d.elementwise = true;
  d.infer = [](InferCtx& c) {
    std::string error;
    auto chain = pointChain(c.attrs, int(c.in.size()), &error);
    if (!chain) return c.fail("the chain does not parse: " + error);
    if (chain->outputs.size() != c.out.size())
      return c.fail("the chain lists " + std::to_string(chain->outputs.size()) +
                    " outputs, the node has " + std::to_string(c.out.size()));
    for (size_t k = 0; k < c.in.size(); ++k) {
      if (!ops::requireFloat(c, int(k))) return false;
      if (c.in[k].shape != c.in[0].shape)
        return c.fail("shape " + shapeToString(c.in[k].shape) + " is not the first input's " +
                          shapeToString(c.in[0].shape),
                      int(k));
    }
    for (TensorDesc& y : c.out) y = TensorDesc{c.in[0].shape, DType::F32, {}};
    return true;
  };
  d.flops = [](const InferCtx& c) {
    auto chain = pointChain(c.attrs, int(c.in.size()), nullptr);
    return chain ? numel(c.out[0].shape) * int64_t(chain->steps.size()) : 0;
  };
  r.add(std::move(d));
}

}  // namespace netloom
