// Node attributes as kernels and ops read them: a small typed map, filled from the
// project's AttrValue messages with every default already applied.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace netloom {

using AttrVal =
    std::variant<int64_t, double, std::string, bool, std::vector<int64_t>, std::vector<double>>;

class Attrs {
 public:
  void set(const std::string& name, AttrVal v) { m_values[name] = std::move(v); }
  bool has(const std::string& name) const { return m_values.count(name) != 0; }

  // Readers assume the op registry has validated types; a missing name returns `def`.
  int64_t i(const std::string& name, int64_t def = 0) const;
  double f(const std::string& name, double def = 0.0) const;
  bool b(const std::string& name, bool def = false) const;
  std::string s(const std::string& name, const std::string& def = {}) const;
  std::vector<int64_t> ints(const std::string& name) const;

  const std::map<std::string, AttrVal>& values() const { return m_values; }

 private:
  std::map<std::string, AttrVal> m_values;
};

}  // namespace netloom
