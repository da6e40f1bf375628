// The helpers op files use to write and read their ONNX forms (onnx_lowering.h).
#include "engine/graph/onnx_lowering.h"

namespace netloom {

std::string onnxShapeText(const Shape& s) {
  std::string t = "[";
  for (size_t k = 0; k < s.size(); ++k)
    t += (k ? ", " : "") + (s[k] < 0 ? std::string("?") : std::to_string(s[k]));
  return t + "]";
}

std::vector<float> transposed2d(const OnnxConst& t) {
  const int64_t r = t.shape[0], c = t.shape[1];
  std::vector<float> out(t.f.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[size_t(j * r + i)] = t.f[size_t(i * c + j)];
  return out;
}

// ---- Export ---------------------------------------------------------------------

void OnnxExportCtx::same(const std::string& op, const std::vector<OnnxAttr>& attrs) {
  std::vector<std::string> ins;
  for (int k = 0; k < node().numDataInputs(); ++k) ins.push_back(input(k));
  add(op, node().name, ins, {output()}, attrs);
}

void OnnxExportCtx::reshapeToOutput() {
  std::vector<int64_t> target{0};
  target.insert(target.end(), outShape().begin() + 1, outShape().end());
  add("Reshape", node().name, {input(0), ints(node().name + "/shape", target)}, {output()});
}

Result<std::string> OnnxExportCtx::param(int k, const Shape& shape) {
  const ValueId v = node().inputs[size_t(k)];
  const OnnxWeight* w = weight(v);
  if (!w) return error("no weight '" + name(v) + "'");
  return initializer(name(v), shape, w->values, true);
}

Error OnnxExportCtx::error(const std::string& what) const {
  return makeError("node '" + node().name + "' (op " + node().op->name + "): " + what);
}

Error OnnxExportCtx::noForm(const std::string& what) const {
  return error(what + " has no ONNX form");
}

// ---- Import ---------------------------------------------------------------------

int64_t OnnxNode::i(const std::string& a, int64_t def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.i;
}

float OnnxNode::f(const std::string& a, float def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.f;
}

std::string OnnxNode::s(const std::string& a, const std::string& def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.s;
}

std::vector<int64_t> OnnxNode::ints(const std::string& a, std::vector<int64_t> def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.ints;
}

bool OnnxImportCtx::onlyAttrs(const std::set<std::string>& known) {
  bool ok = true;
  for (const auto& [name, v] : node().attrs)
    if (!known.count(name)) {
      problem("attribute '" + name + "' has no NetLoom form");
      ok = false;
    }
  return ok;
}

const OnnxConst* OnnxImportCtx::weightInput(size_t k, const char* what) {
  const std::string v = node().input(k);
  if (v.empty()) {
    problem(std::string("it has no ") + what);
    return nullptr;
  }
  const OnnxConst* c = constOf(v);
  if (!c || !c->isFloat) {
    problem(std::string("its ") + what + " '" + v +
            (c ? "' is not a float tensor" : "' is computed while the model runs") +
            "; NetLoom takes it only as a float initializer");
    return nullptr;
  }
  return c;
}

bool OnnxImportCtx::extraOutputsUsed() {
  const OnnxNode& n = node();
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty() && users(n.outputs[k]) > 0) {
      problem("its output " + std::to_string(k) + " ('" + n.outputs[k] +
              "') is read, which NetLoom does not give");
      return true;
    }
  return false;
}

bool OnnxImportCtx::symmetricPads(std::vector<int64_t>& pads) {
  std::vector<int64_t> p = node().ints("pads", {0, 0, 0, 0});
  if (p.size() != 4 || p[0] != p[2] || p[1] != p[3]) {
    problem("attribute pads=" + onnxShapeText(p) + " (NetLoom pads both sides alike)");
    return false;
  }
  pads = {p[0], p[1]};
  return true;
}

std::string OnnxImportCtx::paddedInput(std::vector<int64_t>& extra) {
  extra = {0, 0};
  const Pad* p = padBefore(node().input(0));
  if (!p) return in(0);
  extra = {p->ph, p->pw};
  return ref(p->input);
}

bool OnnxImportCtx::simple(const std::string& op, const std::set<std::string>& known,
                           const Attrs& attrs) {
  if (!onlyAttrs(known)) return false;
  produce(add(op, {in(0)}, attrs));
  return true;
}

}  // namespace netloom
