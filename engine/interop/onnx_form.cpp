// ONNX forms written as data (onnx_form.h): parsing, writing and recognising them.
#ifdef NETLOOM_WITH_ONNX

#include "engine/interop/onnx_form.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

namespace netloom::onnxio {

int Form::calls() const {
  int n = kind == Call ? 1 : 0;
  for (const Form& a : args) n += a.calls();
  return n;
}

namespace {

class Parser {
 public:
  Parser(const OpDef& op, std::string text) : m_op(op), m_text(std::move(text)) {}

  Result<Form> alternative() {
    Form f = expr();
    skip();
    if (m_error.empty() && m_at < m_text.size())
      fail(std::string("unexpected '") + m_text[m_at] + "'");
    if (!m_error.empty())
      return makeError("op " + m_op.name + ": ONNX form '" + m_text + "', at " +
                       std::to_string(m_at) + ": " + m_error);
    return f;
  }

 private:
  void fail(std::string why) {
    if (m_error.empty()) m_error = std::move(why);
  }
  void skip() {
    while (m_at < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_at]))) ++m_at;
  }
  bool eat(char c) {
    skip();
    if (m_at < m_text.size() && m_text[m_at] == c) {
      ++m_at;
      return true;
    }
    return false;
  }
  std::string word() {
    skip();
    size_t start = m_at;
    while (m_at < m_text.size() &&
           (std::isalnum(static_cast<unsigned char>(m_text[m_at])) || m_text[m_at] == '_'))
      ++m_at;
    return m_text.substr(start, m_at - start);
  }
  // A leaf: x, an attribute of the op, or a number.
  Form leaf() {
    skip();
    Form f;
    const char* start = m_text.c_str() + m_at;
    char* end = nullptr;
    if (m_at < m_text.size() &&
        (std::isdigit(static_cast<unsigned char>(*start)) || *start == '-' || *start == '.')) {
      f.kind = Form::Number;
      f.value = std::strtod(start, &end);
      if (end == start) fail("a number does not parse");
      m_at += size_t(end - start);
      return f;
    }
    f.name = word();
    if (f.name == "x") return f;
    f.kind = Form::Param;
    const AttrDef* a = m_op.attr(f.name);
    if (f.name.empty())
      fail("expected x, an attribute or a number");
    else if (!a || a->kind != AttrKind::Float)
      fail("'" + f.name + "' is neither x nor a float attribute of the op");
    return f;
  }
  Form expr() {
    skip();
    const size_t start = m_at;
    std::string name = word();
    skip();
    if (name.empty() || (m_at < m_text.size() && m_text[m_at] != '(' && m_text[m_at] != '{') ||
        m_at == m_text.size()) {
      m_at = start;
      return leaf();
    }
    Form f;
    f.kind = Form::Call;
    f.name = name;
    if (eat('{')) {
      do {
        std::string key = word();
        if (key.empty() || !eat('=')) fail("expected name=value in an op's attributes");
        f.attrs.emplace_back(key, leaf());
      } while (m_error.empty() && eat(','));
      if (!eat('}')) fail("expected '}'");
    }
    if (!eat('(')) fail("expected '(' after " + name);
    do f.args.push_back(expr());
    while (m_error.empty() && eat(','));
    if (!eat(')')) fail("expected ')'");
    return f;
  }

  const OpDef& m_op;
  std::string m_text;
  size_t m_at = 0;
  std::string m_error;
};

void paramsOf(const Form& f, std::set<std::string>& out) {
  if (f.kind == Form::Param) out.insert(f.name);
  for (const auto& [_, a] : f.attrs) paramsOf(a, out);
  for (const Form& a : f.args) paramsOf(a, out);
}

// Matching state: what has been bound so far.
struct Binding {
  std::vector<int> nodes;
  std::string input;
  std::map<std::string, double> params;
};

bool near(double a, double b) {
  return std::abs(a - b) <= 1e-6 * (1 + std::abs(b));
}

bool bindParam(Binding& b, const std::string& name, double v) {
  auto [it, fresh] = b.params.emplace(name, v);
  return fresh || near(it->second, v);
}

bool leafValue(const Form& f, Binding& b, double v) {
  return f.kind == Form::Param ? bindParam(b, f.name, v) : near(v, f.value);
}

class Matcher {
 public:
  Matcher(const ImportState& s, const std::map<std::string, int>& producer)
      : s(s), producer(producer) {}

  bool value(const Form& f, const std::string& v, Binding& b) const {
    if (f.kind == Form::Input) {
      if (s.isConst(v) || v.empty()) return false;
      if (b.input.empty()) b.input = v;
      return b.input == v;
    }
    if (f.kind != Form::Call) {
      const ConstTensor* c = s.constOf(v);
      return c && c->size() == 1 && leafValue(f, b, c->at(0));
    }
    auto it = producer.find(v);
    return it != producer.end() && call(f, it->second, b);
  }

  bool call(const Form& f, int i, Binding& b) const {
    const onnx::NodeProto& n = s.node(i);
    if (s.done[size_t(i)] || n.op_type() != f.name ||
        !(n.domain().empty() || n.domain() == "ai.onnx") || n.output_size() != 1 ||
        n.input_size() != int(f.args.size()))
      return false;
    if (n.attribute_size() != int(f.attrs.size())) return false;
    for (const auto& [key, leaf] : f.attrs) {
      const onnx::AttributeProto* a = nullptr;
      for (const onnx::AttributeProto& x : n.attribute())
        if (x.name() == key) a = &x;
      if (!a) return false;
      double v = a->type() == onnx::AttributeProto::FLOAT ? a->f()
                 : a->type() == onnx::AttributeProto::INT ? double(a->i())
                                                          : NAN;
      if (std::isnan(v) || !leafValue(leaf, b, v)) return false;
    }
    Binding tried = b;
    if (args(f, n, false, tried)) {
      b = std::move(tried);
    } else {
      // Add and Mul either way round, as exporters write them.
      const bool commutes = (f.name == "Add" || f.name == "Mul") && f.args.size() == 2;
      tried = b;
      if (!commutes || !args(f, n, true, tried)) return false;
      b = std::move(tried);
    }
    b.nodes.push_back(i);
    return true;
  }

 private:
  bool args(const Form& f, const onnx::NodeProto& n, bool swapped, Binding& b) const {
    for (size_t k = 0; k < f.args.size(); ++k)
      if (!value(f.args[swapped ? 1 - k : k], n.input(int(k)), b)) return false;
    return true;
  }

  const ImportState& s;
  const std::map<std::string, int>& producer;
};

}  // namespace

Result<std::vector<Form>> parseForms(const OpDef& op) {
  std::vector<Form> forms;
  size_t at = 0;
  const std::string& text = op.onnxForm;
  while (at <= text.size()) {
    size_t end = text.find(';', at);
    if (end == std::string::npos) end = text.size();
    auto f = Parser(op, text.substr(at, end - at)).alternative();
    if (!f) return f.error();
    if (f->kind != Form::Call)
      return makeError("op " + op.name + ": an ONNX form must be an ONNX op's call");
    forms.push_back(std::move(*f));
    at = end + 1;
  }
  return forms;
}

void writeForm(const Form& f, const std::string& input, const FormWriter& w) {
  std::function<std::string(const Form&, bool)> write = [&](const Form& e, bool root) {
    if (e.kind == Form::Input) return input;
    if (e.kind == Form::Param) return w.constant(e.name, float(w.param(e.name)));
    if (e.kind == Form::Number) return w.constant("c", float(e.value));
    std::vector<std::string> ins;
    for (const Form& a : e.args) ins.push_back(write(a, false));
    std::vector<std::pair<std::string, float>> attrs;
    for (const auto& [key, leaf] : e.attrs)
      attrs.emplace_back(key, float(leaf.kind == Form::Param ? w.param(leaf.name) : leaf.value));
    return w.node(e.name, ins, attrs, root);
  };
  write(f, true);
}

const Form* formFor(const OpDef& op, const std::vector<Form>& forms, const Attrs& attrs,
                    std::string& why) {
  for (const Form& f : forms) {
    std::set<std::string> named;
    paramsOf(f, named);
    bool fits = true;
    for (const AttrDef& a : op.attrs) {
      const double* def = std::get_if<double>(&a.def);
      if (a.kind != AttrKind::Float || named.count(a.name) || !def) continue;
      if (attrs.f(a.name, *def) != *def) {
        fits = false;
        why = "attribute " + a.name + "=" + std::to_string(attrs.f(a.name)) +
              " (ONNX's form holds only " + a.name + "=" + std::to_string(*def) + ")";
      }
    }
    if (fits) return &f;
  }
  return nullptr;
}

std::optional<FormMatch> matchForm(const Form& f, const ImportState& s, int root,
                                   const std::map<std::string, int>& producer) {
  Binding b;
  if (!Matcher(s, producer).call(f, root, b) || b.input.empty()) return std::nullopt;
  // Every value the pattern makes but its last is read inside it alone.
  std::set<int> inside(b.nodes.begin(), b.nodes.end());
  for (int i : b.nodes) {
    if (i == root) continue;
    const std::string& v = s.node(i).output(0);
    if (s.graphOutputs.count(v)) return std::nullopt;
    auto it = s.readers.find(v);
    if (it != s.readers.end())
      for (int r : it->second)
        if (!inside.count(r)) return std::nullopt;
  }
  return FormMatch{b.nodes, b.input, b.params};
}

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
