// The JSON reader and writer. The parser is strict (RFC 8259, UTF-8 checked, duplicate
// keys rejected, bounded nesting) because its main input, a safetensors header, may come
// from anywhere.
#include "engine/io/json.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>

namespace netloom {

namespace {

// Deep enough for any header or summary we write; shallow enough that a hostile
// "[[[[..." cannot exhaust the stack.
constexpr int kMaxDepth = 256;

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Length of the well-formed UTF-8 sequence at s[0..n), or 0 if it is malformed
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8SequenceLength(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return len;
}

}  // namespace

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : m_s(text) {}

  Result<Json> parseDocument() {
    skipSpace();
    Json v;
    if (!parseValue(v, 0)) return fail();
    skipSpace();
    if (m_pos != m_s.size()) {
      setError("unexpected data after the value");
      return fail();
    }
    return v;
  }

 private:
  Error fail() const {
    return makeError("JSON: " + m_error + " at byte " + std::to_string(m_errorPos));
  }
  bool setError(std::string what) { return setErrorAt(std::move(what), m_pos); }
  bool setErrorAt(std::string what, size_t pos) {
    m_error = std::move(what);
    m_errorPos = pos;
    return false;
  }

  bool atEnd() const { return m_pos >= m_s.size(); }
  char peek() const { return m_s[m_pos]; }

  void skipSpace() {
    while (!atEnd()) {
      char c = peek();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++m_pos;
    }
  }

  bool expectLiteral(const char* word) {
    size_t n = std::strlen(word);
    if (m_s.compare(m_pos, n, word) != 0) return setError("invalid literal");
    m_pos += n;
    return true;
  }

  bool parseValue(Json& out, int depth) {
    if (atEnd()) return setError("unexpected end of input");
    switch (peek()) {
      case '{': return parseObject(out, depth + 1);
      case '[': return parseArray(out, depth + 1);
      case '"': {
        std::string s;
        if (!parseString(s)) return false;
        out = Json::string(std::move(s));
        return true;
      }
      case 't':
        if (!expectLiteral("true")) return false;
        out = Json::boolean(true);
        return true;
      case 'f':
        if (!expectLiteral("false")) return false;
        out = Json::boolean(false);
        return true;
      case 'n':
        if (!expectLiteral("null")) return false;
        out = Json();
        return true;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parseNumber(out);
        return setError(std::string("unexpected character '") + peek() + "'");
    }
  }

  bool parseObject(Json& out, int depth) {
    if (depth > kMaxDepth) return setError("nesting deeper than " + std::to_string(kMaxDepth));
    ++m_pos;  // '{'
    out = Json::object();
    std::vector<size_t> keyPos;
    skipSpace();
    if (!atEnd() && peek() == '}') {
      ++m_pos;
      return true;
    }
    while (true) {
      skipSpace();
      if (atEnd()) return setError("unexpected end of input in object");
      if (peek() != '"') return setError("expected a string key");
      keyPos.push_back(m_pos);
      std::string key;
      if (!parseString(key)) return false;
      skipSpace();
      if (atEnd() || peek() != ':') return setError("expected ':'");
      ++m_pos;
      skipSpace();
      Json value;
      if (!parseValue(value, depth)) return false;
      // Appended directly: set() would search for the key, quadratic in member count;
      // duplicates are found once the object is complete.
      out.m_members.emplace_back(std::move(key), std::move(value));
      skipSpace();
      if (atEnd()) return setError("unexpected end of input in object");
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      if (peek() == '}') {
        ++m_pos;
        break;
      }
      return setError("expected ',' or '}'");
    }
    return checkDuplicateKeys(out, keyPos);
  }

  bool checkDuplicateKeys(const Json& obj, const std::vector<size_t>& keyPos) {
    const auto& m = obj.members();
    std::vector<size_t> order(m.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return m[a].first < m[b].first; });
    for (size_t i = 1; i < order.size(); ++i) {
      if (m[order[i]].first == m[order[i - 1]].first) {
        return setErrorAt("duplicate key \"" + m[order[i]].first + "\"", keyPos[order[i]]);
      }
    }
    return true;
  }

  bool parseArray(Json& out, int depth) {
    if (depth > kMaxDepth) return setError("nesting deeper than " + std::to_string(kMaxDepth));
    ++m_pos;  // '['
    out = Json::array();
    skipSpace();
    if (!atEnd() && peek() == ']') {
      ++m_pos;
      return true;
    }
    while (true) {
      skipSpace();
      Json value;
      if (!parseValue(value, depth)) return false;
      out.push(std::move(value));
      skipSpace();
      if (atEnd()) return setError("unexpected end of input in array");
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      if (peek() == ']') {
        ++m_pos;
        return true;
      }
      return setError("expected ',' or ']'");
    }
  }

  bool parseHex4(uint32_t& out) {
    if (m_s.size() - m_pos < 4) return setError("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = m_s[m_pos + i];
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        return setErrorAt("invalid hex digit in \\u escape", m_pos + i);
      }
      out = out * 16 + d;
    }
    m_pos += 4;
    return true;
  }

  bool parseString(std::string& out) {
    ++m_pos;  // opening quote
    while (true) {
      if (atEnd()) return setError("unterminated string");
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++m_pos;
        return true;
      }
      if (c < 0x20) return setError("control character in string");
      if (c == '\\') {
        if (!parseEscape(out)) return false;
        continue;
      }
      size_t len = utf8SequenceLength(reinterpret_cast<const unsigned char*>(m_s.data()) + m_pos,
                                      m_s.size() - m_pos);
      if (len == 0) return setError("invalid UTF-8 in string");
      out.append(m_s, m_pos, len);
      m_pos += len;
    }
  }

  bool parseEscape(std::string& out) {
    size_t start = m_pos;
    ++m_pos;  // backslash
    if (atEnd()) return setError("unterminated string");
    char e = peek();
    ++m_pos;
    switch (e) {
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case 'u': break;
      default: return setErrorAt("invalid escape", start);
    }
    uint32_t cp = 0;
    if (!parseHex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return setErrorAt("unpaired low surrogate", start);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (m_s.compare(m_pos, 2, "\\u") != 0) return setErrorAt("unpaired high surrogate", start);
      m_pos += 2;
      uint32_t low = 0;
      if (!parseHex4(low)) return false;
      if (low < 0xDC00 || low > 0xDFFF) return setErrorAt("unpaired high surrogate", start);
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    appendUtf8(out, cp);
    return true;
  }

  bool parseNumber(Json& out) {
    // Validate the RFC 8259 grammar first: from_chars alone would accept "01", "1." etc.
    size_t start = m_pos;
    auto digits = [&] {
      size_t n = 0;
      while (!atEnd() && peek() >= '0' && peek() <= '9') ++m_pos, ++n;
      return n;
    };
    if (peek() == '-') ++m_pos;
    if (atEnd()) return setError("truncated number");
    if (peek() == '0') {
      ++m_pos;
      if (!atEnd() && peek() >= '0' && peek() <= '9') return setError("leading zero in number");
    } else if (digits() == 0) {
      return setError("expected a digit");
    }
    if (!atEnd() && peek() == '.') {
      ++m_pos;
      if (digits() == 0) return setError("expected a digit after '.'");
    }
    if (!atEnd() && (peek() == 'e' || peek() == 'E')) {
      ++m_pos;
      if (!atEnd() && (peek() == '+' || peek() == '-')) ++m_pos;
      if (digits() == 0) return setError("expected a digit in exponent");
    }
    double v = 0;
    auto [ptr, ec] = std::from_chars(m_s.data() + start, m_s.data() + m_pos, v);
    if (ec == std::errc::result_out_of_range) {
      // from_chars leaves `v` untouched then. Underflow rounds to zero harmlessly;
      // overflow would have to become infinity, which JSON cannot hold.
      if (decimalMagnitude(start, m_pos) > 0) return setErrorAt("number out of range", start);
      v = m_s[start] == '-' ? -0.0 : 0.0;
    } else if (ec != std::errc() || ptr != m_s.data() + m_pos) {
      return setErrorAt("invalid number", start);
    }
    out = Json::number(v);
    return true;
  }

  // Power of ten of the first significant digit of the validated number in
  // [begin, end): tells an overflowing number from an underflowing one.
  int64_t decimalMagnitude(size_t begin, size_t end) const {
    int64_t intDigits = 0, firstSignificant = 0, index = 0;
    bool seen = false, inFraction = false;
    size_t i = begin;
    if (m_s[i] == '-') ++i;
    for (; i < end && m_s[i] != 'e' && m_s[i] != 'E'; ++i) {
      if (m_s[i] == '.') {
        inFraction = true;
        continue;
      }
      if (!inFraction) ++intDigits;
      if (!seen && m_s[i] != '0') seen = true, firstSignificant = index;
      ++index;
    }
    if (!seen) return 0;  // all zeros: exactly zero, never out of range
    int64_t exponent = 0;
    if (i < end) {
      ++i;
      bool negative = m_s[i] == '-';
      if (m_s[i] == '+' || m_s[i] == '-') ++i;
      for (; i < end; ++i) exponent = std::min<int64_t>(exponent * 10 + (m_s[i] - '0'), 1 << 30);
      if (negative) exponent = -exponent;
    }
    return intDigits - 1 - firstSignificant + exponent;
  }

  const std::string& m_s;
  size_t m_pos = 0;
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
  constexpr double kExactIntLimit = 9007199254740992.0;  // 2^53
  if (v == std::trunc(v) && std::fabs(v) < kExactIntLimit && !(v == 0 && std::signbit(v))) {
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
    case Json::Type::Number: dumpNumber(out, v.asNumber()); break;
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

Result<Json> Json::parse(const std::string& text) {
  return JsonParser(text).parseDocument();
}

}  // namespace netloom
