// Host-side plans of the sequence ops' index maps, made once per signature and
// passed by value to CPU loops and CUDA kernels alike (kernels/core/sequence_math.h).
#pragma once

#include <vector>

#include "kernels/core/sequence_math.h"
#include "kernels/core/tensor.h"

namespace netloom {

// Output element i of x permuted by `perm` reads x at permutation(x, perm).source(i).
fn::Permutation permutation(const Shape& x, const std::vector<int64_t>& perm);

// Sums a tensor of shape `big` to `small` (aligned at the right): output o adds the
// `terms` elements kept.source(o) + reduced.source(r), in order of r.
struct SumPlan {
  fn::BroadcastIndex kept, reduced;
  int64_t outputs = 1, terms = 1;
};
SumPlan sumPlan(const Shape& big, const Shape& small);

// Where a batched product's operand of shape `op` (matrices in its last two axes)
// holds the matrix of output batch entry e: batchStrides(op, out).source(e)
// matrices in, 0 on each batch axis it broadcasts.
fn::BroadcastIndex batchStrides(const Shape& op, const Shape& outBatch);

}  // namespace netloom
