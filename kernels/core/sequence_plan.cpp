#include "kernels/core/sequence_plan.h"

namespace netloom {

namespace {

std::vector<int64_t> stridesOf(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

}  // namespace

fn::Permutation permutation(const Shape& x, const std::vector<int64_t>& perm) {
  fn::Permutation p;
  const std::vector<int64_t> st = stridesOf(x);
  p.rank = int(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    p.dims[i] = x[size_t(perm[i])];
    p.strides[i] = st[size_t(perm[i])];
  }
  return p;
}

SumPlan sumPlan(const Shape& big, const Shape& small) {
  const std::vector<int64_t> st = stridesOf(big);
  SumPlan p;
  const size_t lead = big.size() - small.size();
  for (size_t i = 0; i < big.size(); ++i) {
    const bool keep = i >= lead && small[i - lead] == big[i];
    fn::BroadcastIndex& into = keep ? p.kept : p.reduced;
    into.dims[into.rank] = big[i];
    into.strides[into.rank] = st[i];
    ++into.rank;
    (keep ? p.outputs : p.terms) *= big[i];
  }
  return p;
}

fn::BroadcastIndex batchStrides(const Shape& op, const Shape& outBatch) {
  fn::BroadcastIndex idx;
  const size_t lead = outBatch.size() - (op.size() - 2);
  int64_t stride = 1;
  idx.rank = int(outBatch.size());
  for (size_t i = outBatch.size(); i-- > 0;) {
    idx.dims[i] = outBatch[i];
    const bool has = i >= lead && op[i - lead] == outBatch[i] && outBatch[i] != 1;
    idx.strides[i] = has ? stride : 0;
    if (i >= lead) stride *= op[i - lead];
  }
  return idx;
}

}  // namespace netloom
