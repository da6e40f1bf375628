// SBP, OneFlow's description of a tensor spread over the ranks of a placement: Split
// along an axis (each rank holds a slice), Broadcast (each holds all of it) or
// Partial-sum (each holds a summand of it). An op declares the signatures it can run
// under, each naming the SBP of every input, parameter and output; where a producer's
// SBP differs from what a consumer's signature needs, a collective moves the tensor
// ("boxing"). The batch axis is axis 0, as everywhere in the IR.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/status.h"
#include "kernels/core/attrs.h"
#include "kernels/core/kernel.h"

namespace netloom {

struct Sbp {
  enum class Kind : unsigned char { Split, Broadcast, Partial };
  Kind kind = Kind::Broadcast;
  int axis = 0;  // Split only

  static Sbp split(int axis) { return {Kind::Split, axis}; }
  static Sbp broadcast() { return {Kind::Broadcast, 0}; }
  static Sbp partial() { return {Kind::Partial, 0}; }
  bool isSplit() const { return kind == Kind::Split; }
  bool operator==(const Sbp& o) const {
    return kind == o.kind && (kind != Kind::Split || axis == o.axis);
  }
  bool operator!=(const Sbp& o) const { return !(*this == o); }
  std::string str() const;  // "S(1)", "B", "P"
};
// A gradient's SBP under a forward SBP (autodiff's rule, each collective's adjoint):
// Broadcast's is Partial, Partial's Broadcast, a Split's the same Split.
Sbp dual(const Sbp& sbp);

// How a value of a compiled step is spread: its SBP over `parts` ranks, of which this
// is part `index`, and the whole tensor's shape (the value's own desc is the part).
// parts 1: the value is whole.
struct ValueShard {
  Sbp sbp;
  Shape full;
  int parts = 1, index = 0;
  bool split() const { return parts > 1 && sbp.isSplit(); }
};

// ZeRO: the optimizer state of a bucket's parameters, laid end to end and cut into
// `parts` equal shards (the last padded), of which a value holds shard `index`.
// Each parameter's state is named after it: "<member>.<suffix>" ("fc1.weight.exp_avg").
struct FlatShard {
  std::vector<std::pair<std::string, Shape>> members;
  std::string suffix;
  int parts = 1, index = 0;
};

// "S(1)", "B" or "P"; an error names what was given.
Result<Sbp> parseSbp(const std::string& text);

// One way an op runs spread over the ranks: the SBP of each data input, each
// parameter (in the op's order), and each output.
struct SbpSignature {
  std::vector<Sbp> in, params, out;
  std::string str() const;  // "S(0), B -> S(0)"
};

// What an op's signature function sees: its attributes and the full (global) shapes.
struct SbpCtx {
  const Attrs& attrs;
  std::vector<Shape> in, params, out;
};

// The shape one rank holds of a tensor of `full` shape: a Split axis divided by the
// ranks. An axis that does not divide, or is past the shape, is an error naming both.
Result<Shape> localShape(const Shape& full, const Sbp& sbp, int ranks);
// "S(1) 64×(512/2)", the SBP and the shape a rank holds, the split axis as a fraction.
std::string describeLocal(const Shape& full, const Sbp& sbp, int ranks);

// The collective that turns a tensor laid out as `from` into `to` across `ranks`,
// the bytes each rank sends for it and the messages it sends them in, one after
// another (ring algorithms: all-gather and reduce-scatter (R−1)/R of the whole in
// R−1 steps, all-reduce twice that in 2(R−1); all-to-all (R−1)/R of a rank's part,
// to R−1 peers). Broadcast to Split or Partial, and Split to Partial, are local.
struct Boxing {
  enum class Kind : unsigned char { None, Local, AllGather, AllReduce, ReduceScatter, AllToAll };
  Kind kind = Kind::None;
  int64_t bytesPerRank = 0;
  int messages = 0;
  std::string str() const;  // "all-gather", ...
};
Boxing boxing(const Sbp& from, const Sbp& to, const TensorDesc& full, int ranks);

// Signatures every element-wise op has: all inputs and the output split alike along
// any axis, or all broadcast; `linear` ops (a sum) also take all inputs partial.
std::vector<SbpSignature> elementwiseSignatures(const SbpCtx& c, bool linear);
// Signatures of an op that reduces along `axes` of input 0 (softmax, norms): split
// along any other axis, or broadcast; its parameters broadcast.
std::vector<SbpSignature> splitOutsideAxes(const SbpCtx& c, const std::vector<int>& axes);

// Signatures of a weighted sum over input 0's `channel` axis with weight [out, in, …]
// and an optional bias [out] (Linear, a one-group Conv2d): split by the data along
// `dataAxes`; column parallel (the weight's rows and the bias split, the output split
// on `channel`); row parallel (the input split on `channel` and the weight on its
// inputs: the output partial, the bias a partial summand, kept by one rank).
std::vector<SbpSignature> weightedSumSignatures(const SbpCtx& c, const std::vector<int>& dataAxes,
                                                int channel, bool byChannels);

// Signatures of an op that reshapes input 0 into output 0 with its elements in order
// (Reshape, Flatten): broadcast, partial, and a split of an input axis that maps onto
// an output axis, the axes before each holding as many elements alike.
std::vector<SbpSignature> reshapeSignatures(const SbpCtx& c);
// Signatures of an op whose output axis i is input axis perm[i] (Transpose).
std::vector<SbpSignature> permuteSignatures(const SbpCtx& c, const std::vector<int64_t>& perm);

}  // namespace netloom
