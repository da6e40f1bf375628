#include "engine/graph/torch_lowering.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "kernels/core/geometry.h"

namespace netloom {

std::string pyInt(int64_t v) {
  return std::to_string(v);
}

std::string pyFloat(double v) {
  if (std::isinf(v)) return v > 0 ? "float(\"inf\")" : "-float(\"inf\")";
  if (std::isnan(v)) return "float(\"nan\")";
  // The shortest text that reads back as the same double, as Python's repr writes it.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string pyBool(bool v) {
  return v ? "True" : "False";
}

std::string pyStr(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string pyTuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + pyInt(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

TorchArg TorchCtx::arg(std::string key, std::string value, const std::string& attr,
                       std::string dflt) const {
  // The "$p" param a written attribute takes its value from, or empty.
  std::string slot;
  if (auto it = m_def.attrs().find(attr); !attr.empty() && it != m_def.attrs().end() &&
                                          it->second.value_case() == proto::AttrValue::kS &&
                                          it->second.s().rfind('$', 0) == 0)
    slot = it->second.s().substr(1);
  return TorchArg{std::move(key), std::move(value), std::move(slot), std::move(dflt), {}};
}

TorchArg TorchCtx::pos(std::string label, std::string value, const std::string& attr) const {
  TorchArg a = arg("", std::move(value), attr);
  a.label = std::move(label);
  return a;
}

std::string TorchCtx::pair(const std::string& name, int64_t def) const {
  int64_t h = def, w = def;
  pair2d(attrs(), name, def, h, w);
  return h == w ? pyInt(h) : pyTuple({h, w});
}

Error TorchCtx::refuse(const std::string& why) const {
  return makeError("node '" + m_node.name + "': op '" + m_node.op->name + "' " + why);
}

TorchLowering TorchCtx::call(std::string fn, std::vector<TorchArg> args) {
  TorchLowering l;
  l.call = std::move(fn);
  l.fwdArgs = std::move(args);
  return l;
}

TorchLowering TorchCtx::module(std::string ctor, std::vector<TorchArg> args, std::string expr) {
  TorchLowering l;
  l.ctor = std::move(ctor);
  l.ctorArgs = std::move(args);
  l.expr = std::move(expr);
  return l;
}

TorchLowering TorchCtx::expr(std::string e, std::vector<TorchArg> args) {
  TorchLowering l;
  l.expr = std::move(e);
  l.fwdArgs = std::move(args);
  return l;
}

}  // namespace netloom
