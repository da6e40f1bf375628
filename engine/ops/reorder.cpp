// Reorder: the same N×C×H×W tensor in another memory layout. Only the compiler's
// layout pass emits it, where a blocked part of a plan meets a plain one.
#include "engine/ops/op_helpers.h"

namespace netloom {

void registerReorder(OpRegistry& r) {
  OpDef d;
  d.name = "Reorder";
  d.category = "Internal";
  d.role = OpRole::Internal;
  d.doc = "Converts an N×C×H×W tensor between the plain and a blocked memory layout";
  d.inputs = {{"x", "N × C × H × W"}};
  d.outputs = {{"y", "the same tensor in the other layout"}};
  d.infer = ops::sameAsInput;
  r.add(std::move(d));
}

}  // namespace netloom
