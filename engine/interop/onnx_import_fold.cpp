// Constant subgraphs of an ONNX model, computed at import (onnx_import.h). Exporters
// write reshape targets as small programs over shapes (Shape, Gather, Unsqueeze,
// Concat) and constants as nodes; NetLoom wants the numbers. The batch dimension
// stays a symbol (kBatchSym) that only copying operations carry along.
#ifdef NETLOOM_WITH_ONNX

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/interop/onnx_import.h"

namespace netloom::onnxio {

namespace {

using Folded = std::optional<ConstTensor>;

std::vector<int64_t> stridesOf(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

int64_t normAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

bool hasSymbol(const ConstTensor& t) {
  return !t.isFloat && std::find(t.i.begin(), t.i.end(), kBatchSym) != t.i.end();
}

// A tensor of the same kind as `like`, with the given shape, elements taken from
// `src` at `from[k]`.
ConstTensor gatherElems(const ConstTensor& src, const Shape& shape,
                        const std::vector<int64_t>& from) {
  ConstTensor t;
  t.isFloat = src.isFloat;
  t.shape = shape;
  for (int64_t k : from) {
    if (src.isFloat)
      t.f.push_back(src.f[size_t(k)]);
    else
      t.i.push_back(src.i[size_t(k)]);
  }
  return t;
}

Folded constantNode(const onnx::NodeProto& n) {
  NodeAttrs a(n);
  ConstTensor t;
  if (const auto* v = a.get("value")) {
    auto r = readTensor(v->t());
    if (!r) return std::nullopt;
    return *r;
  }
  if (const auto* v = a.get("value_float")) {
    t.f = {v->f()};
  } else if (const auto* v = a.get("value_floats")) {
    t.f.assign(v->floats().begin(), v->floats().end());
    t.shape = {int64_t(t.f.size())};
  } else if (const auto* v = a.get("value_int")) {
    t.isFloat = false;
    t.i = {v->i()};
  } else if (const auto* v = a.get("value_ints")) {
    t.isFloat = false;
    t.i.assign(v->ints().begin(), v->ints().end());
    t.shape = {int64_t(t.i.size())};
  } else {
    return std::nullopt;
  }
  return t;
}

Folded shapeNode(const ImportState& s, const onnx::NodeProto& n) {
  ConstTensor t;
  t.isFloat = false;
  if (const ConstTensor* c = s.constOf(n.input(0))) {
    t.i = c->shape;
  } else {
    const Shape* sh = s.shapeOf(n.input(0));
    if (!sh || sh->empty()) return std::nullopt;
    for (size_t d = 0; d < sh->size(); ++d) {
      if (d == 0) {
        t.i.push_back(kBatchSym);
      } else if ((*sh)[d] < 0) {
        return std::nullopt;
      } else {
        t.i.push_back((*sh)[d]);
      }
    }
  }
  NodeAttrs a(n);
  const int64_t r = int64_t(t.i.size());
  int64_t start = std::clamp(normAxis(a.i("start", 0), size_t(r)), int64_t(0), r);
  int64_t end = std::clamp(normAxis(a.i("end", r), size_t(r)), int64_t(0), r);
  t.i = std::vector<int64_t>(t.i.begin() + start, t.i.begin() + std::max(start, end));
  t.shape = {int64_t(t.i.size())};
  return t;
}

Folded gather(const ConstTensor& data, const ConstTensor& idx, int64_t axisAttr) {
  if (idx.isFloat || data.shape.empty()) return std::nullopt;
  const int64_t axis = normAxis(axisAttr, data.shape.size());
  const int64_t dim = data.shape[size_t(axis)];
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < data.shape.size(); ++d) inner *= data.shape[d];
  std::vector<int64_t> from;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j : idx.i) {
      if (j == kBatchSym || j < -dim || j >= dim) return std::nullopt;
      if (j < 0) j += dim;
      for (int64_t k = 0; k < inner; ++k) from.push_back((o * dim + j) * inner + k);
    }
  return gatherElems(data, out, from);
}

Folded concat(const std::vector<const ConstTensor*>& ins, int64_t axisAttr) {
  const ConstTensor& first = *ins[0];
  if (first.shape.empty()) return std::nullopt;
  const int64_t axis = normAxis(axisAttr, first.shape.size());
  Shape out = first.shape;
  out[size_t(axis)] = 0;
  for (const ConstTensor* t : ins) {
    if (t->isFloat != first.isFloat || t->shape.size() != first.shape.size()) return std::nullopt;
    out[size_t(axis)] += t->shape[size_t(axis)];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.shape[size_t(d)];
  ConstTensor t;
  t.isFloat = first.isFloat;
  t.shape = out;
  for (int64_t o = 0; o < outer; ++o)
    for (const ConstTensor* in : ins) {
      int64_t chunk = in->size() / std::max<int64_t>(outer, 1);
      if (in->isFloat)
        t.f.insert(t.f.end(), in->f.begin() + o * chunk, in->f.begin() + (o + 1) * chunk);
      else
        t.i.insert(t.i.end(), in->i.begin() + o * chunk, in->i.begin() + (o + 1) * chunk);
    }
  return t;
}

// Unsqueeze and Squeeze only change the shape.
Folded unsqueeze(ConstTensor t, std::vector<int64_t> axes) {
  const size_t rank = t.shape.size() + axes.size();
  for (int64_t& a : axes) a = normAxis(a, rank);
  std::sort(axes.begin(), axes.end());
  Shape out;
  size_t k = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (std::binary_search(axes.begin(), axes.end(), int64_t(d)))
      out.push_back(1);
    else if (k < t.shape.size())
      out.push_back(t.shape[k++]);
    else
      return std::nullopt;
  }
  t.shape = out;
  return t;
}

Folded squeeze(ConstTensor t, std::vector<int64_t> axes) {
  for (int64_t& a : axes) a = normAxis(a, t.shape.size());
  Shape out;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    bool listed = std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    if ((axes.empty() && t.shape[d] == 1) || listed) {
      if (t.shape[d] != 1) return std::nullopt;
      continue;
    }
    out.push_back(t.shape[d]);
  }
  t.shape = out;
  return t;
}

Folded cast(ConstTensor t, int64_t to) {
  using TP = onnx::TensorProto;
  const bool toFloat = to == TP::FLOAT || to == TP::DOUBLE || to == TP::FLOAT16;
  if (toFloat && !t.isFloat) {
    if (hasSymbol(t)) return std::nullopt;
    t.f.assign(t.i.begin(), t.i.end());
    t.i.clear();
    t.isFloat = true;
  } else if (!toFloat && t.isFloat) {
    for (float v : t.f) t.i.push_back(to == TP::BOOL ? int64_t(v != 0.f) : int64_t(std::trunc(v)));
    t.f.clear();
    t.isFloat = false;
  }
  return t;
}

Folded reshape(ConstTensor t, const ConstTensor& target, bool allowZero) {
  if (target.isFloat || hasSymbol(target)) return std::nullopt;
  Shape out;
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < target.i.size(); ++d) {
    int64_t v = target.i[d];
    if (v == 0 && !allowZero) {
      if (d >= t.shape.size()) return std::nullopt;
      v = t.shape[d];
    }
    if (v == -1) {
      infer = int64_t(d);
    } else {
      known *= v;
    }
    out.push_back(v);
  }
  if (infer >= 0) {
    if (known == 0) return std::nullopt;
    out[size_t(infer)] = t.size() / known;
  }
  if (numel(out) != t.size()) return std::nullopt;
  t.shape = out;
  return t;
}

Folded transpose(const ConstTensor& t, std::vector<int64_t> perm) {
  const size_t r = t.shape.size();
  if (perm.empty())
    for (size_t d = r; d-- > 0;) perm.push_back(int64_t(d));
  if (perm.size() != r) return std::nullopt;
  Shape out(r);
  for (size_t d = 0; d < r; ++d) out[d] = t.shape[size_t(perm[d])];
  const auto inStrides = stridesOf(t.shape), outStrides = stridesOf(out);
  std::vector<int64_t> from(size_t(t.size()));
  for (int64_t k = 0; k < t.size(); ++k) {
    int64_t rest = k, src = 0;
    for (size_t d = 0; d < r; ++d) {
      int64_t idx = rest / outStrides[d];
      rest %= outStrides[d];
      src += idx * inStrides[size_t(perm[d])];
    }
    from[size_t(k)] = src;
  }
  return gatherElems(t, out, from);
}

// Element-wise arithmetic with NumPy broadcasting; integers divide truncating, as
// ONNX's integer Div does. The batch symbol never takes part.
Folded arithmetic(const std::string& op, const ConstTensor& a, const ConstTensor& b) {
  if (hasSymbol(a) || hasSymbol(b) || a.isFloat != b.isFloat) return std::nullopt;
  const size_t r = std::max(a.shape.size(), b.shape.size());
  Shape sa(r - a.shape.size(), 1), sb(r - b.shape.size(), 1), out(r);
  sa.insert(sa.end(), a.shape.begin(), a.shape.end());
  sb.insert(sb.end(), b.shape.begin(), b.shape.end());
  for (size_t d = 0; d < r; ++d) {
    if (sa[d] != sb[d] && sa[d] != 1 && sb[d] != 1) return std::nullopt;
    out[d] = std::max(sa[d], sb[d]);
  }
  const auto stA = stridesOf(sa), stB = stridesOf(sb), stO = stridesOf(out);
  ConstTensor t;
  t.isFloat = a.isFloat;
  t.shape = out;
  for (int64_t k = 0, n = numel(out); k < n; ++k) {
    int64_t rest = k, ia = 0, ib = 0;
    for (size_t d = 0; d < r; ++d) {
      int64_t idx = rest / stO[d];
      rest %= stO[d];
      if (sa[d] != 1) ia += idx * stA[d];
      if (sb[d] != 1) ib += idx * stB[d];
    }
    if (a.isFloat) {
      float x = a.f[size_t(ia)], y = b.f[size_t(ib)];
      t.f.push_back(op == "Add"   ? x + y
                    : op == "Sub" ? x - y
                    : op == "Mul" ? x * y
                    : op == "Div" ? x / y
                                  : std::pow(x, y));
    } else {
      int64_t x = a.i[size_t(ia)], y = b.i[size_t(ib)];
      if (op == "Div" && y == 0) return std::nullopt;
      if (op == "Pow") return std::nullopt;
      t.i.push_back(op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y);
    }
  }
  return t;
}

Folded slice1d(const ConstTensor& t, const std::vector<const ConstTensor*>& in) {
  if (t.shape.size() != 1 || in.size() < 2 || !in[0] || !in[1]) return std::nullopt;
  for (const ConstTensor* c : in)
    if (c && (c->isFloat || c->size() != 1 || hasSymbol(*c))) return std::nullopt;
  if (in.size() > 2 && in[2] && in[2]->i[0] != 0 && in[2]->i[0] != -1) return std::nullopt;
  const int64_t n = t.shape[0];
  const int64_t step = in.size() > 3 && in[3] ? in[3]->i[0] : 1;
  if (step == 0) return std::nullopt;
  auto clampIndex = [&](int64_t v, bool isEnd) {
    if (v < 0) v += n;
    return step > 0 ? std::clamp<int64_t>(v, 0, n)
                    : std::clamp<int64_t>(v, -1, n - (isEnd ? 0 : 1));
  };
  int64_t start = clampIndex(in[0]->i[0], false), end = clampIndex(in[1]->i[0], true);
  std::vector<int64_t> from;
  for (int64_t k = start; step > 0 ? k < end : k > end; k += step) from.push_back(k);
  return gatherElems(t, {int64_t(from.size())}, from);
}

Folded constantOfShape(const onnx::NodeProto& n, const ConstTensor& shape) {
  if (shape.isFloat || hasSymbol(shape)) return std::nullopt;
  ConstTensor t;
  t.shape = shape.i;
  ConstTensor value;
  value.f = {0.f};
  if (const auto* v = NodeAttrs(n).get("value")) {
    auto r = readTensor(v->t());
    if (!r || r->size() != 1) return std::nullopt;
    value = *r;
  }
  t.isFloat = value.isFloat;
  if (t.isFloat)
    t.f.assign(size_t(numel(t.shape)), value.f[0]);
  else
    t.i.assign(size_t(numel(t.shape)), value.i[0]);
  return t;
}

Folded foldNode(const ImportState& s, const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx") return std::nullopt;
  if (n.output_size() != 1) return std::nullopt;
  if (op == "Constant") return constantNode(n);
  if (op == "Shape") return shapeNode(s, n);
  std::vector<const ConstTensor*> in;
  for (const std::string& name : n.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    const ConstTensor* c = s.constOf(name);
    if (!c) return std::nullopt;
    in.push_back(c);
  }
  if (in.empty() || !in[0]) return std::nullopt;
  NodeAttrs a(n);
  if (op == "Identity") return *in[0];
  if (op == "Gather" && in.size() == 2) return gather(*in[0], *in[1], a.i("axis", 0));
  if (op == "Concat") {
    for (const ConstTensor* c : in)
      if (!c) return std::nullopt;
    return concat(in, a.i("axis", 0));
  }
  auto axesOf = [&]() -> std::optional<std::vector<int64_t>> {
    if (a.has("axes")) return a.ints("axes");
    if (in.size() > 1 && in[1]) {
      if (in[1]->isFloat) return std::nullopt;
      return in[1]->i;
    }
    return std::vector<int64_t>{};
  };
  if (op == "Unsqueeze") {
    auto axes = axesOf();
    if (!axes || axes->empty()) return std::nullopt;
    return unsqueeze(*in[0], *axes);
  }
  if (op == "Squeeze") {
    auto axes = axesOf();
    if (!axes) return std::nullopt;
    return squeeze(*in[0], *axes);
  }
  if (op == "Cast") return cast(*in[0], a.i("to", onnx::TensorProto::FLOAT));
  if (op == "Reshape" && in.size() == 2 && in[1])
    return reshape(*in[0], *in[1], a.i("allowzero", 0) != 0);
  if (op == "Transpose") return transpose(*in[0], a.ints("perm"));
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") && in.size() == 2 &&
      in[1])
    return arithmetic(op, *in[0], *in[1]);
  if (op == "Neg" || op == "Sqrt" || op == "Reciprocal") {
    if (!in[0]->isFloat) return std::nullopt;
    ConstTensor t = *in[0];
    for (float& v : t.f) v = op == "Neg" ? -v : op == "Sqrt" ? std::sqrt(v) : 1.f / v;
    return t;
  }
  if (op == "Slice") {
    std::vector<const ConstTensor*> rest(in.begin() + 1, in.end());
    return slice1d(*in[0], rest);
  }
  if (op == "ConstantOfShape") return constantOfShape(n, *in[0]);
  return std::nullopt;
}

}  // namespace

void foldConstants(ImportState& s) {
  for (int i = 0; i < s.graph.node_size(); ++i) {
    if (s.done[size_t(i)]) continue;
    const onnx::NodeProto& n = s.node(i);
    Folded t = foldNode(s, n);
    if (!t) continue;
    s.consts[n.output(0)] = std::move(*t);
    s.done[size_t(i)] = true;
  }
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
