// Each NetLoom op as the PyTorch a person would write for it, as its op file
// declares it (OpDef::torch, or OpDef::torchForm for a function of x): PyTorch's
// layouts, padding, ceil_mode and statistics. Ops that declare no PyTorch form are
// refused by name rather than approximated.
#include <cctype>
#include <set>
#include <variant>

#include "engine/interop/pytorch_gen.h"

namespace netloom::pytorch {

namespace {

const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return k;
}

}  // namespace

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_') || c >= 0x80) return false;
  return !keywords().count(s);
}

std::string sanitize(const std::string& name) {
  if (isIdentifier(name)) return name;
  std::string s;
  for (unsigned char c : name) s += (c < 0x80 && (std::isalnum(c) || c == '_')) ? char(c) : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  if (keywords().count(s)) s += "_";
  return s;
}

Result<Lowered> lowerNode(const Graph& g, const Node& n, const proto::NodeDef& d) {
  const TorchCtx c(g, n, d);
  const Attrs& a = n.attrs;
  Lowered l;
  if (n.op->torch) {
    auto declared = n.op->torch(c);
    if (!declared) return declared.error();
    l = std::move(*declared);
  } else if (!n.op->torchForm.empty()) {
    // Declared as data: the function, the attributes as its keywords.
    l.call = n.op->torchForm;
    for (const AttrDef& at : n.op->attrs) {
      const double* def = std::get_if<double>(&at.def);
      l.fwdArgs.push_back(
          c.arg(at.name, pyFloat(a.f(at.name)), at.name, def ? pyFloat(*def) : std::string()));
    }
  } else {
    return c.refuse("has no PyTorch form in the export");
  }
  if (a.has("init") && a.s("init") != "default") l.init = a.s("init");
  if (n.op->params)
    for (const std::string& p : n.op->params(a)) l.paramNames.push_back(p);
  if (n.op->buffers)
    for (const std::string& p : n.op->buffers(a)) l.paramNames.push_back(p);
  return l;
}

}  // namespace netloom::pytorch
