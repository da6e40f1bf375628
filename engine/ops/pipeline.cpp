// Pipeline parallelism's ops: a stage sends what later stages read and receives
// what it reads of earlier ones (the gradients the other way), cuts the batch into
// micro-batches, and averages a loss or metric over them. A sent value's gradient
// is received from the stage that read it (PipeSend's gradient rule); a received
// value's is sent back by the pipeline pass after autodiff.
#include "engine/ops/grad_builder.h"
#include "engine/ops/internal_ops.h"
#include "engine/ops/op_helpers.h"

namespace netloom {
namespace {

AttrDef peerAttr(const char* doc) {
  return intAttr("peer", 0, 0, 1 << 20, doc);
}
AttrDef tagAttr() {
  return intAttr("tag", 0, 0, 1 << 30, "matches the send with its receive");
}

TensorDesc scalar() {
  return TensorDesc{{}, DType::F32, {}};
}

DType dtypeNamed(const std::string& name) {
  for (DType t : {DType::F32, DType::I32, DType::I64, DType::U8})
    if (name == dtypeName(t)) return t;
  return DType::F32;
}

void registerPipeSend(OpRegistry& r) {
  OpDef send = ops::internalOp(internal_ops::kPipeSend, "Sends a value to the stage that reads it");
  send.inputs = {{"x", "the value"}};
  send.outputs = {{"done", "zero: the stage's part in the loss its gradient comes back for"}};
  send.attrs = {peerAttr("the stage's rank in the pipeline group"), tagAttr()};
  send.infer = [](InferCtx& c) {
    c.out[0] = scalar();
    return true;
  };
  send.grad = [](GradBuilder& b) {  // the reader's gradient, received
    Attrs a;
    a.set("peer", b.attrs().i("peer"));
    a.set("tag", b.attrs().i("tag") + 1);
    a.set("shape", std::vector<int64_t>(b.desc(b.input(0)).shape));
    a.set("dtype", std::string(dtypeName(b.desc(b.input(0)).dtype)));
    b.addGrad(0, b.emit(internal_ops::kPipeRecv, {}, a));
  };
  r.add(std::move(send));
}

void registerPipeRecv(OpRegistry& r) {
  OpDef recv =
      ops::internalOp(internal_ops::kPipeRecv,
                      "Receives a value an earlier stage sends (or a gradient a later one does)");
  recv.outputs = {{"y", "the value"}};
  recv.attrs = {peerAttr("the sender's rank in the pipeline group"), tagAttr(),
                intsAttr("shape", {}, 0, 1e12, "the value's shape"),
                stringAttr("dtype", "F32", {}, "the value's type (safetensors' spelling)")};
  recv.infer = [](InferCtx& c) {
    c.out[0] = TensorDesc{c.attrs.ints("shape"), dtypeNamed(c.attrs.s("dtype")), {}};
    return true;
  };
  r.add(std::move(recv));
}

void registerMicroBatches(OpRegistry& r) {
  OpDef micro =
      ops::internalOp(internal_ops::kMicroBatch, "Micro-batch `index` of `parts` of a batch");
  micro.inputs = {{"x", "the batch"}};
  micro.outputs = {{"y", "its part"}};
  micro.attrs = {intAttr("index", 0, 0, 1 << 20, "which micro-batch"),
                 intAttr("parts", 1, 1, 1 << 20, "micro-batches in the batch")};
  micro.view = false;
  micro.infer = [](InferCtx& c) {
    Shape s = c.in[0].shape;
    const int64_t parts = c.attrs.i("parts");
    if (s.empty() || s[0] % parts != 0)
      return c.fail("a batch of " + std::to_string(s.empty() ? 0 : s[0]) +
                        " does not divide into " + std::to_string(parts) + " micro-batches",
                    0);
    s[0] /= parts;
    c.out[0] = TensorDesc{s, c.in[0].dtype, {}};
    return true;
  };
  r.add(std::move(micro));

  OpDef mean =
      ops::internalOp(internal_ops::kMicroMean, "The mean of scalars, one per micro-batch");
  mean.inputs = {{"x", "the scalars", true}};
  mean.outputs = {{"y", "their mean"}};
  mean.infer = [](InferCtx& c) {
    c.out[0] = scalar();
    return true;
  };
  mean.grad = [](GradBuilder& b) {
    Attrs a;
    a.set("parts", int64_t(b.numInputs()));
    const ValueId each = b.emit(internal_ops::kMicroMeanGrad, {b.outGrad(0)}, a);
    for (int i = 0; i < b.numInputs(); ++i)
      if (b.needsGrad(i)) b.addGrad(i, each);
  };
  r.add(std::move(mean));

  OpDef meanGrad =
      ops::internalOp(internal_ops::kMicroMeanGrad,
                      "A mean's gradient: the mean's, divided by the scalars averaged");
  meanGrad.inputs = {{"dy", "the mean's gradient"}};
  meanGrad.outputs = {{"dx", "each scalar's"}};
  meanGrad.attrs = {intAttr("parts", 1, 1, 1 << 20, "the scalars averaged")};
  meanGrad.infer = [](InferCtx& c) {
    c.out[0] = scalar();
    return true;
  };
  r.add(std::move(meanGrad));
}

void registerPipeTie(OpRegistry& r) {
  OpDef tie =
      ops::internalOp(internal_ops::kPipeTie,
                      "A tied weight's gradient summed over the stages holding it, in stage order");
  tie.inputs = {{"grad", "this stage's part of the gradient"}};
  tie.outputs = {{"sum", "the whole gradient"}};
  tie.attrs = {intsAttr("stages", {}, 0, 1 << 20, "the stages holding the weight, in order"),
               tagAttr()};
  tie.infer = [](InferCtx& c) {
    c.out[0] = c.in[0];
    return true;
  };
  r.add(std::move(tie));
}

}  // namespace

void registerPipeline(OpRegistry& r) {
  registerPipeSend(r);
  registerPipeRecv(r);
  registerMicroBatches(r);
  registerPipeTie(r);
}

}  // namespace netloom
