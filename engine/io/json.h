// A small JSON value with a strict parser and a writer: enough for safetensors headers
// and summary files. The parsing is nlohmann/json's, held to RFC 8259 with UTF-8
// checked, duplicate keys refused and nesting bounded, since a header may come from
// anywhere.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace netloom {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Json() = default;
  static Json number(double v);
  static Json string(std::string v);
  static Json boolean(bool v);
  static Json array();
  static Json object();

  Type type() const { return m_type; }
  bool isObject() const { return m_type == Type::Object; }
  bool isArray() const { return m_type == Type::Array; }
  bool isString() const { return m_type == Type::String; }
  bool isNumber() const { return m_type == Type::Number; }

  double asNumber() const { return m_number; }
  // A whole number >= 0 held exactly: one parsed as an integer (up to 2^64 - 1, past
  // what a double holds), or a double below 2^53.
  bool asUnsigned(uint64_t& out) const;
  const std::string& asString() const { return m_string; }
  bool asBool() const { return m_bool; }
  const std::vector<Json>& items() const { return m_items; }
  // Object members in insertion order; keys are unique.
  const std::vector<std::pair<std::string, Json>>& members() const { return m_members; }
  const Json* find(const std::string& key) const;

  Json& push(Json v);                         // arrays
  Json& set(const std::string& key, Json v);  // objects; replaces an existing key

  std::string dump() const;  // compact; numbers printed with round-trip precision

  // Errors give the byte offset of the fault.
  static Result<Json> parse(const std::string& text);

 private:
  friend class JsonBuilder;  // appends members without set()'s per-key search

  Type m_type = Type::Null;
  double m_number = 0;
  bool m_exact = false;  // m_unsigned holds the number as parsed
  uint64_t m_unsigned = 0;
  bool m_bool = false;
  std::string m_string;
  std::vector<Json> m_items;
  std::vector<std::pair<std::string, Json>> m_members;
};

}  // namespace netloom
