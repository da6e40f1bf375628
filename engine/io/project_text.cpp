// Projects as text the way a person writes them (projectToText): the schema's
// declaration order, only what differs from the defaults, one line per node and per
// short section, and the comments of the file the project was read from kept before
// the section or node they stood before.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <vector>

#include "engine/io/project_file.h"

namespace netloom {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// A short section is written on one line when it fits in this many characters.
constexpr size_t kInlineWidth = 96;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\%03o", c);
          out += buf;
        } else {
          out += char(c);  // UTF-8 stays readable
        }
    }
  }
  return out + "\"";
}

// The shortest decimal that reads back as the same value.
std::string number(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string number(float v) {
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, double(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

std::string scalar(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return number(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return number(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM: {
      // A value this build does not name (a newer file's) stays a number, which reads back.
      const int n = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
      const auto* v = f->enum_type()->FindValueByNumber(n);
      return v ? v->name() : std::to_string(n);
    }
    case FieldDescriptor::CPPTYPE_STRING:
      return quoted(rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f));
    default: return {};
  }
}

// The fields a message sets, in the order its schema declares them.
std::vector<const FieldDescriptor*> setFields(const Message& m) {
  std::vector<const FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  std::sort(fields.begin(), fields.end(), [](const FieldDescriptor* a, const FieldDescriptor* b) {
    return a->index() < b->index();
  });
  return fields;
}

// Map entries in the order `was` (the text the message was read from) has them,
// then the others by key: a file reads the same however its maps were filled, and an
// edit moves no entry it did not touch.
std::vector<const Message*> entries(const Message& m, const FieldDescriptor* f,
                                    const std::string& was = {}) {
  const Reflection* r = m.GetReflection();
  std::vector<const Message*> out;
  for (int i = 0; i < r->FieldSize(m, f); ++i) out.push_back(&r->GetRepeatedMessage(m, f, i));
  if (f->is_map()) {
    const FieldDescriptor* key = f->message_type()->map_key();
    auto place = [&](const Message* e) {
      return std::make_pair(was.find("key: " + scalar(*e, key, 0)), scalar(*e, key, 0));
    };
    std::stable_sort(out.begin(), out.end(),
                     [&](const Message* a, const Message* b) { return place(a) < place(b); });
  }
  return out;
}

// A message's fields on one line: "name: "x" op: "Relu" attrs { ... }".
std::string inlineBody(const Message& m, const std::string& was = {}) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  for (const FieldDescriptor* f : setFields(m)) {
    const Reflection* r = m.GetReflection();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (const Message* e : entries(m, f, was)) add(f->name() + " { " + inlineBody(*e) + " }");
      } else {
        std::string body = inlineBody(r->GetMessage(m, f));
        add(f->name() + (body.empty() ? " {}" : " { " + body + " }"));
      }
    } else if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      // A list of numbers is a list even of one ("values: [5]"); other lists of one
      // are a plain field.
      const bool numbers = f->cpp_type() != FieldDescriptor::CPPTYPE_STRING &&
                           f->cpp_type() != FieldDescriptor::CPPTYPE_ENUM;
      if (n == 1 && !numbers) {
        add(f->name() + ": " + scalar(m, f, 0));
      } else {
        std::string list;
        for (int i = 0; i < n; ++i) list += (i ? ", " : "") + scalar(m, f, i);
        add(f->name() + ": [" + list + "]");
      }
    } else {
      add(f->name() + ": " + scalar(m, f, 0));
    }
  }
  return out;
}

// Comments of the file a project was read from, by what they stood before: the
// file's head, a top-level section ("top:data"), a node ("node:conv1").
struct Comments {
  std::vector<std::string> head;
  std::map<std::string, std::vector<std::string>> before;
  // The original text of each node ("node:conv1") and of each top-level
  // section ("top:data"), written again as it was where what it says is unchanged.
  std::map<std::string, std::string> text;
};

// A section's body: what lies between its first '{' and its last '}'.
std::string bodyOf(const std::string& section) {
  const size_t open = section.find('{'), close = section.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  return section.substr(open + 1, close - open - 1);
}

// Whether `text` (a section's body) says exactly what `m` holds.
bool says(const std::string& text, const Message& m) {
  std::unique_ptr<Message> parsed(m.New());
  google::protobuf::TextFormat::Parser parser;
  parser.AllowPartialMessage(false);
  return parser.ParseFromString(text, parsed.get()) &&
         google::protobuf::util::MessageDifferencer::Equals(*parsed, m);
}

// Where the '{' ... '}' block that opens on line `from` of `lines` ends (quotes and
// comments skipped), or -1.
long blockEnd(const std::vector<std::string>& lines, size_t from) {
  int depth = 0;
  for (size_t i = from; i < lines.size(); ++i) {
    bool quoted = false;
    for (size_t k = 0; k < lines[i].size(); ++k) {
      const char c = lines[i][k];
      if (quoted) {
        if (c == '\\')
          ++k;
        else if (c == '"')
          quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '#') {
        break;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        return long(i);
      }
    }
  }
  return -1;
}

Comments commentsOf(const std::string& original) {
  Comments c;
  static const std::regex node(R"(^\s*nodes\s*\{\s*name:\s*"((?:[^"\\]|\\.)*)\")");
  static const std::regex top(R"(^([A-Za-z_][A-Za-z0-9_]*)\s*[:{])");
  static const std::regex nodeOpen(R"(^\s*nodes\s*\{)");
  std::vector<std::string> lines;
  {
    std::istringstream in(original);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  std::vector<std::string> pending;
  bool sawField = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) {  // a blank line ends the file's head
      if (!sawField && !pending.empty())
        c.head.insert(c.head.end(), pending.begin(), pending.end());
      if (!sawField) c.head.push_back("");
      pending.clear();
      continue;
    }
    if (line[first] == '#') {
      pending.push_back(line);
      continue;
    }
    std::smatch m;
    // A node, on one line or several (its name on the line after "nodes {").
    std::string nodeText;
    if (std::regex_search(line, nodeOpen))
      if (long end = blockEnd(lines, i); end >= 0) {
        nodeText = line;
        for (size_t k = i + 1; k <= size_t(end); ++k) nodeText += "\n" + lines[k];
      }
    if (!nodeText.empty() && std::regex_search(nodeText, m, node)) {
      c.before["node:" + m[1].str()] = pending;
      c.text["node:" + m[1].str()] = nodeText;
    } else if (std::regex_search(line, m, top)) {
      c.before["top:" + m[1].str()] = pending;
      if (line.find('{') != std::string::npos)
        if (long end = blockEnd(lines, i); end >= 0) {
          std::string section;
          for (size_t k = i; k <= size_t(end); ++k) section += lines[k] + "\n";
          c.text["top:" + m[1].str()] = section;
        }
    } else if (!sawField)
      c.head.insert(c.head.end(), pending.begin(), pending.end());
    sawField = true;
    pending.clear();
  }
  while (!c.head.empty() && c.head.back().empty()) c.head.pop_back();
  return c;
}

class Writer {
 public:
  explicit Writer(Comments comments) : m_comments(std::move(comments)) {}

  void message(const Message& m, int depth) {
    for (const FieldDescriptor* f : setFields(m)) field(m, f, depth);
  }
  std::string text() const { return m_out; }
  void line(const std::string& s, int depth) { m_out += std::string(2 * depth, ' ') + s + "\n"; }

 private:
  void comments(const std::string& key) {
    auto it = m_comments.before.find(key);
    if (it == m_comments.before.end()) return;
    for (const std::string& c : it->second) m_out += c + "\n";
  }

  void field(const Message& m, const FieldDescriptor* f, int depth) {
    if (depth == 0) comments("top:" + f->name());
    const Reflection* r = m.GetReflection();
    // A top-level section the edit did not touch is written as it was.
    if (depth == 0 && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated())
      if (auto it = m_comments.text.find("top:" + f->name()); it != m_comments.text.end())
        if (says(bodyOf(it->second), r->GetMessage(m, f))) {
          m_out += it->second;
          return;
        }
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      // Scalars of a multi-line section: each on its own line, numbers as lists.
      if (f->is_repeated()) {
        const int n = r->FieldSize(m, f);
        const bool numbers = f->cpp_type() != FieldDescriptor::CPPTYPE_STRING &&
                             f->cpp_type() != FieldDescriptor::CPPTYPE_ENUM;
        if (!numbers) {
          for (int i = 0; i < n; ++i) line(f->name() + ": " + scalar(m, f, i), depth);
          return;
        }
        std::string list;
        for (int i = 0; i < n; ++i) list += (i ? ", " : "") + scalar(m, f, i);
        line(f->name() + ": [" + list + "]", depth);
      } else {
        line(f->name() + ": " + scalar(m, f, 0), depth);
      }
      return;
    }
    std::vector<const Message*> items;
    if (f->is_repeated())
      items = entries(m, f);
    else
      items.push_back(&r->GetMessage(m, f));
    for (const Message* item : items) {
      // A node, a position, a map entry or any short section: one line.
      const std::string type = item->GetDescriptor()->name();
      std::string was;
      if (type == "NodeDef") {
        comments("node:" + scalarName(*item));
        // A node the edit did not touch keeps its line; one it did keeps its
        // attributes' order.
        if (auto it = m_comments.text.find("node:" + scalarName(*item));
            it != m_comments.text.end()) {
          if (says(bodyOf(it->second), *item)) {
            m_out += it->second + "\n";
            continue;
          }
          was = it->second;
        }
      }
      const std::string body = inlineBody(*item, was);
      const bool alwaysInline = type == "NodeDef" || type == "NodePosition" || f->is_map();
      const std::string one = f->name() + (body.empty() ? " {}" : " { " + body + " }");
      if (alwaysInline || (hasNoLists(*item) && one.size() + 2 * depth <= kInlineWidth)) {
        line(one, depth);
        continue;
      }
      line(f->name() + " {", depth);
      message(*item, depth + 1);
      line("}", depth);
    }
  }

  static std::string scalarName(const Message& node) {
    const FieldDescriptor* name = node.GetDescriptor()->FindFieldByName("name");
    return name ? node.GetReflection()->GetString(node, name) : std::string();
  }

  // Sections holding lists of sections (a model's nodes) are written out line by line.
  static bool hasNoLists(const Message& m) {
    for (const FieldDescriptor* f : setFields(m))
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
          (f->is_repeated() || !hasNoLists(m.GetReflection()->GetMessage(m, f))))
        return false;
    return true;
  }

  Comments m_comments;
  std::string m_out;
};

}  // namespace

std::string projectToText(const proto::Project& project, const std::string& original) {
  Comments comments = commentsOf(original);
  std::string head;
  for (const std::string& c : comments.head) head += c + "\n";
  Writer w(std::move(comments));
  w.message(project, 0);
  return head + w.text();
}

}  // namespace netloom
