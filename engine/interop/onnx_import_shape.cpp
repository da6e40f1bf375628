// ONNX ops that reshape, join, resize or pass tensors through, as NetLoom nodes
// (onnx_import_map.h). NetLoom's shapes are per sample: an op may not move the batch
// dimension, and a reshape target must keep it first.
#ifdef NETLOOM_WITH_ONNX

#include <cmath>

#include "engine/interop/onnx_import_map.h"

namespace netloom::onnxio {

namespace {

int64_t positiveAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

std::string listText(const std::vector<int64_t>& v) {
  std::string t = "[";
  for (size_t k = 0; k < v.size(); ++k)
    t += (k ? ", " : "") + (v[k] == kBatchSym ? std::string("batch") : std::to_string(v[k]));
  return t + "]";
}

}  // namespace

bool Mapper::reshape(const onnx::NodeProto& n) {
  if (!onlyAttrs(n, {"allowzero"})) return false;
  const ConstTensor* target = s.constOf(n.input(1));
  if (!target || target->isFloat) {
    s.problem(n,
              "its target shape is computed while the model runs from more than the shapes "
              "of its inputs");
    return false;
  }
  const std::vector<int64_t>& t = target->i;
  const Shape* x = s.shapeOf(n.input(0));
  const bool allowZero = NodeAttrs(n).i("allowzero", 0) != 0;
  if (t.empty()) {
    s.problem(n, "a target shape without the batch dimension");
    return false;
  }
  // The per-sample shape, with each 0 (copy the input's dimension) resolved.
  std::vector<int64_t> rest;
  int64_t known = 1;
  int minusOnes = 0;
  bool ok = true;
  for (size_t k = 1; k < t.size(); ++k) {
    int64_t v = t[k];
    if (v == 0 && !allowZero) v = x && k < x->size() ? (*x)[k] : -2;
    if (v == -1) ++minusOnes;
    ok = ok && v != kBatchSym && v >= -1 && v != 0;
    if (v > 0) known *= v;
    rest.push_back(v);
  }
  int64_t perSample = -1;
  if (x && !x->empty()) {
    perSample = 1;
    for (size_t k = 1; k < x->size(); ++k) perSample = (*x)[k] < 0 ? -1 : perSample * (*x)[k];
  }
  const bool batchFirst = t[0] == kBatchSym || (t[0] == 0 && !allowZero) ||
                          (x && !x->empty() && (*x)[0] > 0 && t[0] == (*x)[0]) ||
                          (t[0] == -1 && minusOnes == 0 && perSample > 0 && known == perSample);
  if (!ok || !batchFirst || minusOnes > 1) {
    s.problem(n, "target shape " + listText(t) +
                     " does not keep the batch dimension first with a per-sample shape");
    return false;
  }
  if (rest.size() == 1) {
    // [batch, n] or [batch, -1]: Flatten says the same and reads better.
    proto::NodeDef& d = add(n, "Flatten", {ref(n, n.input(0))});
    produce(n, d);
    return true;
  }
  proto::NodeDef& d = add(n, "Reshape", {ref(n, n.input(0))});
  setInts(d, "shape", rest);
  produce(n, d);
  return true;
}

bool Mapper::softmax(const onnx::NodeProto& n) {
  if (!onlyAttrs(n, {"axis"})) return false;
  const Shape* x = s.shapeOf(n.input(0));
  if (!x) {
    s.problem(n, "the shape of its input is unknown");
    return false;
  }
  // Before opset 13 Softmax flattens the input to 2-D at `axis`: one axis only
  // when it is the last.
  const int64_t axis = positiveAxis(NodeAttrs(n).i("axis", s.opset >= 13 ? -1 : 1), x->size());
  if (axis < 1 || axis >= int64_t(x->size()) || (s.opset < 13 && axis != int64_t(x->size()) - 1)) {
    s.problem(n, "attribute axis=" + std::to_string(NodeAttrs(n).i("axis", 1)) + " over rank " +
                     std::to_string(x->size()) + " at opset " + std::to_string(s.opset) +
                     " has no NetLoom form");
    return false;
  }
  proto::NodeDef& d = add(n, "Softmax", {ref(n, n.input(0))});
  setI(d, "axis", axis);
  produce(n, d);
  return true;
}

bool Mapper::resize(const onnx::NodeProto& n) {
  NodeAttrs a(n);
  bool ok = onlyAttrs(n, {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                          "exclude_outside", "extrapolation_value", "scales"});
  const std::string mode = a.s("mode", "nearest");
  const std::string coords = a.s("coordinate_transformation_mode",
                                 n.op_type() == "Upsample" ? "asymmetric" : "half_pixel");
  const std::string nearest =
      a.s("nearest_mode", n.op_type() == "Upsample" ? "floor" : "round_prefer_floor");
  // With whole factors s, output pixel i must read input pixel ⌊i / s⌋: asymmetric
  // coordinates floor to it, half-pixel ones round to it.
  const bool exact = (coords == "asymmetric" && nearest == "floor") ||
                     ((coords == "half_pixel" || coords == "pytorch_half_pixel") &&
                      (nearest == "round_prefer_floor" || nearest == "round_prefer_ceil"));
  if (mode != "nearest" || !exact) {
    s.problem(n, "mode '" + mode + "' with coordinate_transformation_mode '" + coords +
                     "' and nearest_mode '" + nearest +
                     "' has no NetLoom form (NetLoom enlarges by whole factors, nearest)");
    ok = false;
  }
  std::vector<double> factors;
  const Shape* x = s.shapeOf(n.input(0));
  const int scalesAt = n.op_type() == "Upsample" ? 1 : 2;
  if (a.has("scales")) {
    for (float f : a.get("scales")->floats()) factors.push_back(f);
  } else if (const ConstTensor* sc = n.input_size() > scalesAt && !n.input(scalesAt).empty()
                                         ? s.constOf(n.input(scalesAt))
                                         : nullptr;
             sc && sc->size() > 0) {
    for (int64_t k = 0; k < sc->size(); ++k) factors.push_back(sc->at(k));
  } else if (const ConstTensor* sz = n.input_size() > 3 ? s.constOf(n.input(3)) : nullptr;
             sz && x && sz->size() == int64_t(x->size())) {
    for (int64_t k = 0; k < sz->size(); ++k)
      factors.push_back((*x)[size_t(k)] > 0 ? sz->at(k) / double((*x)[size_t(k)]) : 1.0);
  }
  auto whole = [](double f) { return f >= 1 && std::abs(f - std::round(f)) < 1e-6; };
  if (factors.size() != 4 || factors[0] != 1 || factors[1] != 1 || !whole(factors[2]) ||
      !whole(factors[3])) {
    s.problem(n,
              "its scales or sizes are not whole enlargements of height and width known "
              "before the model runs");
    ok = false;
  }
  if (!ok) return false;
  proto::NodeDef& d = add(n, "Upsample", {ref(n, n.input(0))});
  setInts(d, "scale_factor", {int64_t(std::round(factors[2])), int64_t(std::round(factors[3]))});
  produce(n, d);
  return true;
}

bool Mapper::dropout(const onnx::NodeProto& n) {
  NodeAttrs a(n);
  bool ok = onlyAttrs(n, {"seed", "ratio", "is_test"}) && !extraOutputsUsed(n);
  double p = a.f("ratio", 0.5f);
  if (n.input_size() > 1 && !n.input(1).empty()) {
    const ConstTensor* r = s.constOf(n.input(1));
    if (!r || r->size() != 1) {
      s.problem(n, "its ratio is computed while the model runs");
      ok = false;
    } else {
      p = r->at(0);
    }
  }
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const ConstTensor* t = s.constOf(n.input(2));
    if (!t || t->size() != 1 || t->at(0) != 0) {
      s.problem(n, "training_mode is on or computed while the model runs");
      ok = false;
    }
  }
  if (!ok) return false;
  // Kept as Dropout so that the imported model trains as it was meant to; outside
  // training it is the identity, as in the ONNX model.
  proto::NodeDef& d = add(n, "Dropout", {ref(n, n.input(0))});
  setF(d, "p", p);
  produce(n, d);
  return true;
}

bool Mapper::concat(const onnx::NodeProto& n) {
  if (!onlyAttrs(n, {"axis"})) return false;
  const Shape* y = s.shapeOf(n.output(0));
  const int64_t axis = NodeAttrs(n).i("axis", 0);
  const int64_t pos = y ? positiveAxis(axis, y->size()) : axis;
  if (pos == 0 || (!y && axis < 0)) {
    s.problem(n, "attribute axis=" + std::to_string(axis) +
                     (pos == 0 ? " joins along the batch dimension" : " over an unknown rank"));
    return false;
  }
  std::vector<std::string> ins;
  for (const std::string& in : n.input()) ins.push_back(ref(n, in));
  proto::NodeDef& d = add(n, "Concat", ins);
  setI(d, "axis", pos);
  produce(n, d);
  return true;
}

bool Mapper::pad(const onnx::NodeProto& n) {
  NodeAttrs a(n);
  if (!onlyAttrs(n, {"mode", "pads", "value"})) return false;
  std::vector<int64_t> p = a.ints("pads");
  double value = a.f("value", 0.f);
  const ConstTensor* pc = n.input_size() > 1 ? s.constOf(n.input(1)) : nullptr;
  const ConstTensor* vc =
      n.input_size() > 2 && !n.input(2).empty() ? s.constOf(n.input(2)) : nullptr;
  if (pc && !pc->isFloat) p = pc->i;
  if (vc && vc->size() == 1) value = vc->at(0);
  const bool known = (n.input_size() < 2 || pc) && (n.input_size() < 3 || n.input(2).empty() || vc);
  if (a.s("mode", "constant") != "constant" || value != 0 || !known || n.input_size() > 3) {
    s.problem(n,
              "only padding with zeros by amounts known before the model runs has a NetLoom "
              "form");
    return false;
  }
  bool zero = true;
  for (int64_t v : p) zero = zero && v == 0;
  if (zero) {  // PyTorch writes an empty Pad before AveragePool
    s.refOf[n.output(0)] = ref(n, n.input(0));
    return true;
  }
  // Zeros around H×W before a convolution or an average pooling that counts them:
  // that op's own padding.
  const std::string& y = n.output(0);
  auto readers = s.readers.find(y);
  const bool spatial = p.size() == 8 && p[0] == 0 && p[1] == 0 && p[4] == 0 && p[5] == 0 &&
                       p[2] == p[6] && p[3] == p[7] && p[2] >= 0 && p[3] >= 0;
  if (spatial && s.users(y) == 1 && readers != s.readers.end()) {
    const onnx::NodeProto& r = s.node(readers->second[0]);
    if (r.input(0) == y && (r.op_type() == "Conv" || r.op_type() == "AveragePool")) {
      m_pads[y] = PadBefore{n.input(0), p[2], p[3]};
      return true;
    }
  }
  s.problem(n,
            "padding other than zeros around height and width before a convolution or "
            "average pooling has no NetLoom form");
  return false;
}

std::string Mapper::paddedInput(const onnx::NodeProto& n, std::vector<int64_t>& extra) {
  extra = {0, 0};
  auto it = m_pads.find(n.input(0));
  if (it == m_pads.end()) return ref(n, n.input(0));
  extra = {it->second.ph, it->second.pw};
  return ref(n, it->second.input);
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
