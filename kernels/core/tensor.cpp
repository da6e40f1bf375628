#include "kernels/core/tensor.h"

#include "kernels/core/attrs.h"
#include "kernels/core/checked.h"

namespace netloom {

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
    case DType::BF16: return 2;
  }
  return 0;
}

const char* dtypeName(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::BF16: return "BF16";
  }
  return "?";
}

std::string DeviceId::toString() const {
  return kind == DeviceKind::Cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::optional<int64_t> checkedNumel(const Shape& s) {
  std::optional<int64_t> n = 1;
  for (int64_t d : s) {
    if (d < 0) return std::nullopt;
    n = checkedMul(*n, d);
    if (!n) return std::nullopt;
  }
  return n;
}

std::optional<int64_t> checkedBytes(const Shape& s, DType t) {
  auto n = checkedNumel(s);
  return n ? checkedMul(*n, int64_t(dtypeSize(t))) : std::nullopt;
}

std::string shapeToString(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += "×";
    out += std::to_string(s[i]);
  }
  return out;
}

int64_t Attrs::i(const std::string& name, int64_t def) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return def;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  if (auto* d = std::get_if<double>(&it->second)) return static_cast<int64_t>(*d);
  return def;
}

double Attrs::f(const std::string& name, double def) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return def;
  if (auto* v = std::get_if<double>(&it->second)) return *v;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return def;
}

bool Attrs::b(const std::string& name, bool def) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return def;
  if (auto* v = std::get_if<bool>(&it->second)) return *v;
  return def;
}

std::string Attrs::s(const std::string& name, const std::string& def) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return def;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  return def;
}

std::vector<int64_t> Attrs::ints(const std::string& name) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return {};
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (auto* i = std::get_if<int64_t>(&it->second)) return {*i};
  return {};
}

}  // namespace netloom
