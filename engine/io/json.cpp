// The JSON reader and writer. Parsing is nlohmann/json's SAX parser (RFC 8259; UTF-8
// checked, surrogates paired, numbers in range), building our own small value; on top
// of it, duplicate keys are refused and nesting is bounded, because its main input, a
// safetensors header, may come from anywhere.
#include "engine/io/json.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace netloom {

namespace {

// Deep enough for any header or summary we write; shallow enough that a hostile
// "[[[[..." cannot exhaust the stack of the recursive writer and destructor.
constexpr int kMaxDepth = 256;
constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53

// The text as the parser reads it, noting how far it has read: SAX events carry no
// position, and a duplicate key or too deep a nesting is reported by its byte.
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* p, const char** read) : m_p(p), m_read(read) {}
  reference operator*() const { return *m_p; }
  TrackingIterator& operator++() {
    *m_read = ++m_p;
    return *this;
  }
  bool operator==(const TrackingIterator& o) const { return m_p == o.m_p; }
  bool operator!=(const TrackingIterator& o) const { return m_p != o.m_p; }

 private:
  const char* m_p;
  const char** m_read;
};

// Text fit to show anywhere (a protobuf string must be UTF-8): bytes past ASCII as \\xNN.
std::string printable(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x80) {
      out += char(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// The library's message without its "[json.exception...]" tag and line and column:
// the byte offset follows instead.
std::string describe(const std::string& what) {
  std::string s = what;
  if (s.rfind("[json.exception.", 0) == 0 && s.find("] ") != std::string::npos)
    s.erase(0, s.find("] ") + 2);
  if (s.rfind("parse error", 0) == 0 && s.find(": ") != std::string::npos)
    s.erase(0, s.find(": ") + 2);
  return printable(s);
}

}  // namespace

// Builds a Json from the parser's events, with our limits on top of its checks.
class JsonBuilder {
 public:
  using number_integer_t = nlohmann::json::number_integer_t;
  using number_unsigned_t = nlohmann::json::number_unsigned_t;
  using number_float_t = nlohmann::json::number_float_t;
  using string_t = nlohmann::json::string_t;
  using binary_t = nlohmann::json::binary_t;

  JsonBuilder(const std::string& text, const char* const* read) : m_text(text), m_read(read) {}

  Result<Json> finish(bool parsed) {
    if (!parsed || !m_error.empty())
      return makeError("JSON: " + (m_error.empty() ? "not valid" : m_error) + " at byte " +
                       std::to_string(m_errorPos));
    return std::move(m_root);
  }

  bool null() { return add(Json()); }
  bool boolean(bool v) { return add(Json::boolean(v)); }
  bool number_integer(number_integer_t v) { return add(Json::number(double(v))); }
  bool number_unsigned(number_unsigned_t v) {
    Json j = Json::number(double(v));
    j.m_exact = true;
    j.m_unsigned = v;
    return add(std::move(j));
  }
  bool number_float(number_float_t v, const string_t&) { return add(Json::number(v)); }
  bool string(string_t& v) { return add(Json::string(std::move(v))); }
  bool binary(binary_t&) { return fail("binary data", consumed()); }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    // Read up to the key's closing quote; its opening one is the last unescaped quote
    // before that (no unescaped quote can sit inside a string the parser accepted).
    size_t close = consumed() - 1, open = close;
    while (open > 0) {
      --open;
      size_t slashes = 0;
      while (open > slashes && m_text[open - 1 - slashes] == '\\') ++slashes;
      if (m_text[open] == '"' && slashes % 2 == 0) break;
    }
    if (!m_keys.back().insert(k).second)
      return fail("duplicate key \"" + k + "\"", open);  // valid UTF-8: the parser checked
    m_key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // `position` counts the bytes read, the offending one last.
    return fail(describe(e.what()), position > 0 ? position - 1 : 0);
  }

 private:
  size_t consumed() const { return size_t(*m_read - m_text.data()); }

  bool fail(std::string what, size_t at) {
    if (m_error.empty()) m_error = std::move(what), m_errorPos = at;
    return false;
  }

  // Places `v` in the open container (or as the document) and returns where it went.
  Json* place(Json v) {
    if (m_open.empty()) {
      m_root = std::move(v);
      return &m_root;
    }
    Json& parent = *m_open.back();
    if (parent.m_type == Json::Type::Array) {
      parent.m_items.push_back(std::move(v));
      return &parent.m_items.back();
    }
    // Appended directly: set() would search for the key, quadratic in member count.
    parent.m_members.emplace_back(std::move(m_key), std::move(v));
    return &parent.m_members.back().second;
  }

  bool add(Json v) {
    place(std::move(v));
    return true;
  }

  bool open(Json container) {
    if (int(m_open.size()) >= kMaxDepth)
      return fail("nesting deeper than " + std::to_string(kMaxDepth), consumed() - 1);
    const bool object = container.m_type == Json::Type::Object;
    // Only the innermost container grows while it is open, so the pointers held for
    // the outer ones stay valid.
    m_open.push_back(place(std::move(container)));
    if (object) m_keys.emplace_back();
    return true;
  }

  bool close() {
    if (m_open.back()->m_type == Json::Type::Object) m_keys.pop_back();
    m_open.pop_back();
    return true;
  }

  const std::string& m_text;
  const char* const* m_read;
  Json m_root;
  std::vector<Json*> m_open;
  std::vector<std::unordered_set<std::string>> m_keys;  // per open object
  std::string m_key;
  std::string m_error;
  size_t m_errorPos = 0;
};

namespace {

void dumpString(std::string& out, const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void dumpNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // JSON has no spelling for NaN or infinity
    return;
  }
  char buf[32];
  if (v == std::trunc(v) && std::fabs(v) < kMaxExactInt && !(v == 0 && std::signbit(v))) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
    out.append(buf, end);
    return;
  }
  // %.17g always round-trips; the shortest form that round-trips reads better (0.1, not
  // 0.10000000000000001) and to_chars ignores the C locale, unlike printf.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

void dumpValue(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::Type::Null: out += "null"; break;
    case Json::Type::Bool: out += v.asBool() ? "true" : "false"; break;
    case Json::Type::Number: {
      // A whole number parsed past 2^53 is written back exactly, not as its double.
      uint64_t exact;
      char buf[24];
      if (v.asUnsigned(exact) && double(exact) >= kMaxExactInt)
        out.append(buf, std::to_chars(buf, buf + sizeof buf, exact).ptr);
      else
        dumpNumber(out, v.asNumber());
      break;
    }
    case Json::Type::String: dumpString(out, v.asString()); break;
    case Json::Type::Array: {
      out += '[';
      bool first = true;
      for (const Json& item : v.items()) {
        if (!first) out += ',';
        first = false;
        dumpValue(out, item);
      }
      out += ']';
      break;
    }
    case Json::Type::Object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.members()) {
        if (!first) out += ',';
        first = false;
        dumpString(out, key);
        out += ':';
        dumpValue(out, item);
      }
      out += '}';
      break;
    }
  }
}

}  // namespace

Json Json::number(double v) {
  Json j;
  j.m_type = Type::Number;
  j.m_number = v;
  return j;
}

Json Json::string(std::string v) {
  Json j;
  j.m_type = Type::String;
  j.m_string = std::move(v);
  return j;
}

Json Json::boolean(bool v) {
  Json j;
  j.m_type = Type::Bool;
  j.m_bool = v;
  return j;
}

Json Json::array() {
  Json j;
  j.m_type = Type::Array;
  return j;
}

Json Json::object() {
  Json j;
  j.m_type = Type::Object;
  return j;
}

const Json* Json::find(const std::string& key) const {
  for (const auto& [k, v] : m_members) {
    if (k == key) return &v;
  }
  return nullptr;
}

Json& Json::push(Json v) {
  assert(m_type == Type::Array);
  m_items.push_back(std::move(v));
  return m_items.back();
}

Json& Json::set(const std::string& key, Json v) {
  assert(m_type == Type::Object);
  for (auto& [k, existing] : m_members) {
    if (k == key) {
      existing = std::move(v);
      return existing;
    }
  }
  m_members.emplace_back(key, std::move(v));
  return m_members.back().second;
}

std::string Json::dump() const {
  std::string out;
  dumpValue(out, *this);
  return out;
}

bool Json::asUnsigned(uint64_t& out) const {
  if (m_type != Type::Number) return false;
  if (m_exact) {
    out = m_unsigned;
    return true;
  }
  if (!(m_number >= 0 && m_number < kMaxExactInt) || m_number != std::trunc(m_number)) return false;
  out = uint64_t(m_number);
  return true;
}

Result<Json> Json::parse(const std::string& text) {
  // A byte order mark is no part of JSON text (RFC 8259 8.1); the library would skip it.
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) return makeError("JSON: byte order mark at byte 0");
  const char* read = text.data();
  JsonBuilder builder(text, &read);
  const bool parsed = nlohmann::json::sax_parse(TrackingIterator(text.data(), &read),
                                                TrackingIterator(text.data() + text.size(), &read),
                                                &builder, nlohmann::json::input_format_t::json,
                                                /*strict=*/true, /*ignore_comments=*/false);
  return builder.finish(parsed);
}

}  // namespace netloom
