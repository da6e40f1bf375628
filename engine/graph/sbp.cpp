#include "engine/graph/sbp.h"

#include <algorithm>

namespace netloom {

std::string Sbp::str() const {
  switch (kind) {
    case Kind::Split: return "S(" + std::to_string(axis) + ")";
    case Kind::Broadcast: return "B";
    case Kind::Partial: return "P";
  }
  return "?";
}

Sbp dual(const Sbp& sbp) {
  if (sbp.kind == Sbp::Kind::Broadcast) return Sbp::partial();
  if (sbp.kind == Sbp::Kind::Partial) return Sbp::broadcast();
  return sbp;
}

Result<Sbp> parseSbp(const std::string& text) {
  if (text == "B") return Sbp::broadcast();
  if (text == "P") return Sbp::partial();
  if (text.size() > 3 && text.rfind("S(", 0) == 0 && text.back() == ')') {
    const std::string digits = text.substr(2, text.size() - 3);
    if (!digits.empty() && digits.size() < 4 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return Sbp::split(std::stoi(digits));
  }
  return makeError("'" + text + "' is no SBP: write S(axis), B or P");
}

std::string SbpSignature::str() const {
  auto list = [](const std::vector<Sbp>& v) {
    std::string s;
    for (const Sbp& x : v) s += (s.empty() ? "" : ", ") + x.str();
    return s;
  };
  return list(in) + (params.empty() ? "" : " | " + list(params)) + " -> " + list(out);
}

Result<Shape> localShape(const Shape& full, const Sbp& sbp, int ranks) {
  if (!sbp.isSplit()) return full;
  if (sbp.axis < 0 || sbp.axis >= int(full.size()))
    return makeError(sbp.str() + " splits an axis that a tensor of shape " + shapeToString(full) +
                     " does not have");
  if (ranks <= 0 || full[size_t(sbp.axis)] % ranks != 0)
    return makeError(sbp.str() + ": axis " + std::to_string(sbp.axis) + " of " +
                     shapeToString(full) + " (" + std::to_string(full[size_t(sbp.axis)]) +
                     ") does not divide by " + std::to_string(ranks) + " ranks");
  Shape local = full;
  local[size_t(sbp.axis)] /= ranks;
  return local;
}

std::string describeLocal(const Shape& full, const Sbp& sbp, int ranks) {
  std::string dims;
  for (size_t i = 0; i < full.size(); ++i) {
    if (i) dims += "×";
    if (sbp.isSplit() && int(i) == sbp.axis)
      dims += "(" + std::to_string(full[i]) + "/" + std::to_string(ranks) + ")";
    else
      dims += std::to_string(full[i]);
  }
  return sbp.str() + " " + (full.empty() ? "scalar" : dims);
}

std::string Boxing::str() const {
  switch (kind) {
    case Kind::None: return "none";
    case Kind::Local: return "local";
    case Kind::AllGather: return "all-gather";
    case Kind::AllReduce: return "all-reduce";
    case Kind::ReduceScatter: return "reduce-scatter";
    case Kind::AllToAll: return "all-to-all";
  }
  return "?";
}

Boxing boxing(const Sbp& from, const Sbp& to, const TensorDesc& full, int ranks) {
  using K = Sbp::Kind;
  if (from == to || ranks <= 1) return {};
  const int64_t bytes = numel(full.shape) * int64_t(dtypeSize(full.dtype));
  const int64_t share = bytes * (ranks - 1) / ranks;  // what a ring moves per rank
  const int steps = ranks - 1;
  if (from.kind == K::Split && to.kind == K::Broadcast)
    return {Boxing::Kind::AllGather, share, steps};
  if (from.kind == K::Partial && to.kind == K::Broadcast)
    return {Boxing::Kind::AllReduce, 2 * share, 2 * steps};
  if (from.kind == K::Partial && to.kind == K::Split)
    return {Boxing::Kind::ReduceScatter, share, steps};
  if (from.kind == K::Split && to.kind == K::Split)
    return {Boxing::Kind::AllToAll, share / ranks, steps};
  return {Boxing::Kind::Local, 0, 0};  // B→S (a slice), B→P and S→P (zeros elsewhere)
}

namespace {

bool sameShapes(const SbpCtx& c) {
  for (const Shape& s : c.in)
    if (s != c.out.at(0)) return false;
  return !c.out.empty();
}

SbpSignature uniform(const SbpCtx& c, Sbp in, Sbp params, Sbp out) {
  return {std::vector<Sbp>(c.in.size(), in), std::vector<Sbp>(c.params.size(), params),
          std::vector<Sbp>(c.out.size(), out)};
}

}  // namespace

std::vector<SbpSignature> elementwiseSignatures(const SbpCtx& c, bool linear) {
  std::vector<SbpSignature> out{uniform(c, Sbp::broadcast(), Sbp::broadcast(), Sbp::broadcast())};
  if (!sameShapes(c)) return out;
  for (int axis = 0; axis < int(c.out[0].size()); ++axis)
    out.push_back(uniform(c, Sbp::split(axis), Sbp::broadcast(), Sbp::split(axis)));
  if (linear && c.params.empty())
    out.push_back(uniform(c, Sbp::partial(), Sbp::partial(), Sbp::partial()));
  return out;
}

std::vector<SbpSignature> splitOutsideAxes(const SbpCtx& c, const std::vector<int>& axes) {
  std::vector<SbpSignature> out{uniform(c, Sbp::broadcast(), Sbp::broadcast(), Sbp::broadcast())};
  if (c.in.empty()) return out;
  const int rank = int(c.in[0].size());
  for (int axis = 0; axis < rank; ++axis) {
    bool reduced = false;
    for (int a : axes) reduced = reduced || (a < 0 ? a + rank : a) == axis;
    if (!reduced) out.push_back(uniform(c, Sbp::split(axis), Sbp::broadcast(), Sbp::split(axis)));
  }
  return out;
}

std::vector<SbpSignature> weightedSumSignatures(const SbpCtx& c, const std::vector<int>& dataAxes,
                                                int channel, bool byChannels) {
  const Sbp B = Sbp::broadcast(), P = Sbp::partial();
  const bool bias = c.params.size() > 1;
  auto params = [&](Sbp w, Sbp b) { return bias ? std::vector<Sbp>{w, b} : std::vector<Sbp>{w}; };
  std::vector<SbpSignature> out{{{B}, params(B, B), {B}}};
  for (int axis : dataAxes) out.push_back({{Sbp::split(axis)}, params(B, B), {Sbp::split(axis)}});
  if (!byChannels) return out;
  out.push_back({{B}, params(Sbp::split(0), Sbp::split(0)), {Sbp::split(channel)}});
  out.push_back({{Sbp::split(channel)}, params(Sbp::split(1), P), {P}});
  return out;
}

std::vector<SbpSignature> reshapeSignatures(const SbpCtx& c) {
  std::vector<SbpSignature> out{uniform(c, Sbp::broadcast(), Sbp::broadcast(), Sbp::broadcast()),
                                uniform(c, Sbp::partial(), Sbp::broadcast(), Sbp::partial())};
  if (c.in.empty() || c.out.empty()) return out;
  const Shape &x = c.in[0], &y = c.out[0];
  int64_t before = 1;
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t yBefore = 1;
    for (size_t j = 0; j < y.size(); ++j) {
      if (yBefore == before && y[j] > 1 && x[i] > 1) {
        out.push_back({{Sbp::split(int(i))}, {}, {Sbp::split(int(j))}});
        break;
      }
      yBefore *= y[j];
      if (yBefore > before) break;
    }
    before *= x[i];
  }
  return out;
}

std::vector<SbpSignature> permuteSignatures(const SbpCtx& c, const std::vector<int64_t>& perm) {
  std::vector<SbpSignature> out{uniform(c, Sbp::broadcast(), Sbp::broadcast(), Sbp::broadcast()),
                                uniform(c, Sbp::partial(), Sbp::broadcast(), Sbp::partial())};
  for (size_t j = 0; j < perm.size(); ++j)
    out.push_back({{Sbp::split(int(perm[j]))}, {}, {Sbp::split(int(j))}});
  return out;
}

}  // namespace netloom
