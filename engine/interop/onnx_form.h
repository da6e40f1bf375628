// An op's ONNX form written as data (OpDef::onnxForm): an expression over the op's
// input `x`, its attributes and numbers, each call an ONNX op, with ONNX attributes
// in braces, e.g.
//
//   Mul(x, Sigmoid(x))                           SiLU
//   LeakyRelu{alpha=negative_slope}(x)           an attribute as an ONNX attribute
//   Softplus(x); Div(Softplus(Mul(x, beta)), beta)
//
// Alternatives are separated by ';'. The export writes the first alternative in which
// every attribute it does not name is at its default; the import recognises each
// alternative as a pattern of nodes (Add and Mul either way round), reads the named
// attributes from the constants and ONNX attributes it finds, and gives the rest
// their defaults.
#pragma once

#ifdef NETLOOM_WITH_ONNX

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/graph/op.h"
#include "engine/interop/onnx_import.h"

namespace netloom::onnxio {

struct Form {
  enum Kind { Input, Param, Number, Call } kind = Input;
  std::string name;                                 // Param: the attribute; Call: the ONNX op
  double value = 0;                                 // Number
  std::vector<std::pair<std::string, Form>> attrs;  // Call: ONNX attributes, Param or Number
  std::vector<Form> args;                           // Call
  int calls() const;                                // nodes the form writes
};

// The alternatives of `op`'s onnxForm; an error names the op and the position.
Result<std::vector<Form>> parseForms(const OpDef& op);

// Writes one form. `node(op, inputs, attrs, root)` adds an ONNX node and returns its
// output (the node's own output when `root`); `constant(hint, value)` a scalar
// initializer; `param(name)` an attribute's value.
struct FormWriter {
  std::function<std::string(const std::string& op, const std::vector<std::string>& inputs,
                            const std::vector<std::pair<std::string, float>>& attrs, bool root)>
      node;
  std::function<std::string(const std::string& hint, float value)> constant;
  std::function<double(const std::string& name)> param;
};
void writeForm(const Form& f, const std::string& input, const FormWriter& w);

// The alternative of `forms` that node attributes `attrs` can be written in; null with
// `why` naming the attribute none of them holds.
const Form* formFor(const OpDef& op, const std::vector<Form>& forms, const Attrs& attrs,
                    std::string& why);

// A form recognised with node `root` as its last node.
struct FormMatch {
  std::vector<int> nodes;                // the ONNX nodes it takes
  std::string input;                     // the value x is
  std::map<std::string, double> params;  // attributes read from the nodes
};
std::optional<FormMatch> matchForm(const Form& f, const ImportState& s, int root,
                                   const std::map<std::string, int>& producer);

}  // namespace netloom::onnxio

#endif  // NETLOOM_WITH_ONNX
