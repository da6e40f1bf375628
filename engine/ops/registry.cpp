#include <cmath>

#include "engine/graph/op.h"
#include "engine/ops/all_ops.h"

namespace netloom {

const AttrDef* OpDef::attr(const std::string& n) const {
  for (const AttrDef& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

std::vector<SbpSignature> sbpSignatures(const OpDef& op, const SbpCtx& c) {
  if (op.sbp) return op.sbp(c);
  if (op.elementwise) return elementwiseSignatures(c, false);
  return {SbpSignature{std::vector<Sbp>(c.in.size()), std::vector<Sbp>(c.params.size()),
                       std::vector<Sbp>(c.out.size())}};  // all broadcast: each rank runs it whole
}

size_t requiredInputs(const OpDef& op) {
  size_t n = op.inputs.size();
  while (n > 0 && op.inputs[n - 1].optional) --n;
  return n;
}

const OpRegistry& OpRegistry::instance() {
  // Built once, from the explicit list; never mutated afterwards.
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerAllOps(r);
    return r;
  }();
  return registry;
}

void OpRegistry::add(OpDef def) {
  std::string name = def.name;
  m_ops[name] = std::make_unique<OpDef>(std::move(def));
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = m_ops.find(name);
  return it == m_ops.end() ? nullptr : it->second.get();
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& [_, op] : m_ops) out.push_back(op.get());
  return out;
}

AttrDef intAttr(std::string name, int64_t def, double min, double max, std::string doc) {
  return AttrDef{std::move(name), AttrKind::Int, def, min, max, {}, std::move(doc)};
}
AttrDef floatAttr(std::string name, double def, double min, double max, std::string doc) {
  return AttrDef{std::move(name), AttrKind::Float, def, min, max, {}, std::move(doc)};
}
AttrDef boolAttr(std::string name, bool def, std::string doc) {
  return AttrDef{std::move(name), AttrKind::Bool, def, 0, 1, {}, std::move(doc)};
}
AttrDef stringAttr(std::string name, std::string def, std::vector<std::string> choices,
                   std::string doc) {
  return AttrDef{std::move(name),    AttrKind::String, std::move(def), 0, 0,
                 std::move(choices), std::move(doc)};
}
AttrDef intsAttr(std::string name, std::vector<int64_t> def, double min, double max,
                 std::string doc, bool required) {
  return AttrDef{std::move(name), AttrKind::Ints, std::move(def), min, max, {},
                 std::move(doc),  required};
}

namespace {

std::string fmt(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  return s;
}

std::string rangeText(const AttrDef& a) {
  bool lo = a.min > -1e299, hi = a.max < 1e299;
  if (lo && hi) return "between " + fmt(a.min) + " and " + fmt(a.max);
  if (lo) return "at least " + fmt(a.min);
  if (hi) return "at most " + fmt(a.max);
  return "";
}

const char* kindName(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "an integer";
    case AttrKind::Float: return "a number";
    case AttrKind::Bool: return "true or false";
    case AttrKind::String: return "a string";
    case AttrKind::Ints: return "a list of integers";
  }
  return "?";
}

}  // namespace

Result<Attrs> resolveAttrs(const OpDef& op, const Attrs& given, bool fromProject) {
  Attrs out;
  for (const auto& [name, value] : given.values()) {
    if (name.rfind("__", 0) == 0) {  // engine-internal attributes pass through
      out.set(name, value);
      continue;
    }
    const AttrDef* def = op.attr(name);
    if (!def) {
      std::string known;
      for (const AttrDef& a : op.attrs) known += (known.empty() ? "" : ", ") + a.name;
      return makeError("unknown attribute '" + name + "'" +
                       (known.empty() ? " (the op takes none)" : " (known: " + known + ")"));
    }
    if (def->internal && fromProject)
      return makeError("attribute '" + name + "' is set by the compiler, not by a project");
    AttrVal v = value;
    bool typeOk = false;
    auto outOfRange = [&](double x) { return x < def->min || x > def->max; };
    switch (def->kind) {
      case AttrKind::Int:
        if (auto* d = std::get_if<double>(&v); d && *d == std::floor(*d)) {
          // Converting a double past int64's range is undefined: range-check it first.
          if (outOfRange(*d) || std::fabs(*d) >= 0x1p63)
            return makeError("attribute '" + name + "' is " + fmt(*d) + ", must be " +
                             rangeText(*def));
          v = int64_t(*d);
        }
        typeOk = std::holds_alternative<int64_t>(v);
        break;
      case AttrKind::Float:
        if (auto* i = std::get_if<int64_t>(&v)) v = double(*i);
        typeOk = std::holds_alternative<double>(v);
        break;
      case AttrKind::Bool: typeOk = std::holds_alternative<bool>(v); break;
      case AttrKind::String: typeOk = std::holds_alternative<std::string>(v); break;
      case AttrKind::Ints:
        if (auto* i = std::get_if<int64_t>(&v)) v = std::vector<int64_t>{*i};
        typeOk = std::holds_alternative<std::vector<int64_t>>(v);
        break;
    }
    if (!typeOk) return makeError("attribute '" + name + "' must be " + kindName(def->kind));
    if (def->kind == AttrKind::Int && outOfRange(double(std::get<int64_t>(v))))
      return makeError("attribute '" + name + "' is " + fmt(double(std::get<int64_t>(v))) +
                       ", must be " + rangeText(*def));
    if (def->kind == AttrKind::Float) {
      double x = std::get<double>(v);
      if (!std::isfinite(x) || outOfRange(x))
        return makeError("attribute '" + name + "' is " + fmt(x) + ", must be " + rangeText(*def));
    }
    if (def->kind == AttrKind::Ints)
      for (int64_t x : std::get<std::vector<int64_t>>(v))
        if (outOfRange(double(x)))
          return makeError("attribute '" + name + "' holds " + fmt(double(x)) + ", each must be " +
                           rangeText(*def));
    if (def->kind == AttrKind::String && !def->choices.empty()) {
      const std::string& s = std::get<std::string>(v);
      bool found = false;
      std::string list;
      for (const auto& c : def->choices) {
        found = found || c == s;
        list += (list.empty() ? "" : ", ") + c;
      }
      if (!found)
        return makeError("attribute '" + name + "' is '" + s + "', must be one of " + list);
    }
    out.set(name, std::move(v));
  }
  for (const AttrDef& def : op.attrs) {
    if (out.has(def.name)) continue;
    if (def.required) return makeError("attribute '" + def.name + "' is required: " + def.doc);
    out.set(def.name, def.def);
  }
  return out;
}

}  // namespace netloom
