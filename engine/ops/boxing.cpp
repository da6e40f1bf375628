// Tensor parallelism's boxing: a value laid out as one SBP over the ranks of a tensor
// group, made into another (engine/graph/sbp.h). Its gradient is the boxing between
// the duals the other way round, each collective's adjoint: an all-gather's is a
// reduce-scatter, an all-reduce's an all-reduce, an all-to-all's the reverse one, a
// slice's the zero-padded part, rank 0 keeping a value its own again.
#include "engine/ops/grad_builder.h"
#include "engine/ops/internal_ops.h"
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerBoxing(OpRegistry& r) {
  OpDef d = ops::internalOp(
      internal_ops::kBoxing,
      "Moves a tensor between two SBP layouts across the ranks of its tensor group");
  d.inputs = {{"x", "this rank's part, laid out as 'from'"}};
  d.outputs = {{"y", "this rank's part, laid out as 'to'"}};
  d.attrs = {stringAttr("from", "B", {}, "the input's SBP"),
             stringAttr("to", "B", {}, "the output's SBP"),
             intAttr("parts", 1, 1, 1 << 20, "the ranks of the tensor group")};
  d.infer = [](InferCtx& c) {
    auto from = parseSbp(c.attrs.s("from")), to = parseSbp(c.attrs.s("to"));
    if (!from || !to) return c.fail((from ? to : from).error().message);
    const int parts = int(c.attrs.i("parts"));
    Shape full = c.in[0].shape;
    if (from->isSplit()) {
      if (from->axis >= int(full.size())) return c.fail(from->str() + " past the input's axes", 0);
      full[size_t(from->axis)] *= parts;
    }
    auto local = localShape(full, *to, parts);
    if (!local) return c.fail(local.error().message, 0);
    c.out[0] = TensorDesc{*local, c.in[0].dtype, {}};
    return true;
  };
  d.grad = [](GradBuilder& b) {
    Attrs a = b.attrs();
    a.set("from", dual(*parseSbp(b.attrs().s("to"))).str());
    a.set("to", dual(*parseSbp(b.attrs().s("from"))).str());
    b.addGrad(0, b.emit(internal_ops::kBoxing, {b.outGrad(0)}, a));
  };
  d.flops = [](const InferCtx&) { return int64_t(0); };
  r.add(std::move(d));
}

}  // namespace netloom
