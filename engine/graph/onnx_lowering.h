// How an op reads as ONNX, declared in its op file beside the rest of it: the nodes
// its export writes (OpDef::onnxExport) and the ONNX ops its import maps to NetLoom
// nodes (OpDef::onnxImport). The interfaces here hold no protobuf: the ONNX files
// (engine/interop/onnx_*.cpp) implement them over the model being written or read
// and have no case of their own for any op. An op whose ONNX form is an expression
// of its input declares it as data instead (OpDef::onnxForm, onnx_form.h).
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/util/status.h"

namespace netloom {

// ---- Export ---------------------------------------------------------------------

// An ONNX attribute of a written node.
struct OnnxAttr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>, std::string> value;
};

// A weight as the export writes it: PyTorch's layout, as floats.
struct OnnxWeight {
  Shape shape;
  std::vector<float> values;
};

// The node being exported and the ONNX graph being written. Values are named by
// their NetLoom names; helper values and nodes get fresh names no graph value takes.
class OnnxExportCtx {
 public:
  virtual ~OnnxExportCtx() = default;

  virtual const Node& node() const = 0;
  virtual const Shape& shape(ValueId v) const = 0;
  virtual DType dtype(ValueId v) const = 0;
  // The ONNX name of NetLoom value `v`.
  virtual std::string name(ValueId v) const = 0;
  // The ONNX name of the node's output 0 (a BatchNorm folded into the node gives
  // its own output's name).
  virtual std::string output() = 0;
  // "<node>/<what>", or with a suffix where that is taken.
  virtual std::string fresh(const std::string& what) = 0;
  virtual void add(const std::string& op, const std::string& name,
                   const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                   const std::vector<OnnxAttr>& attrs = {}) = 0;
  // An initializer named `name` (`exact`: as given, a parameter's own name; else
  // made fresh); returns its name.
  virtual std::string initializer(const std::string& name, const Shape& shape,
                                  std::vector<float> values, bool exact = false) = 0;
  virtual std::string ints(const std::string& name, const std::vector<int64_t>& values) = 0;
  virtual std::string scalar(const std::string& name, float v) = 0;
  // A parameter's or buffer's values; null when the export has none for `v`.
  virtual const OnnxWeight* weight(ValueId v) const = 0;
  // A convolution's or linear's weight (input 1) and bias (input 2, zeros when it
  // has none) for `channels` outputs, with a BatchNorm that follows it folded in.
  virtual Status layerParams(int64_t channels, OnnxWeight& w, OnnxWeight& b, bool& hasBias) = 0;

  const Attrs& attrs() const { return node().attrs; }
  const Shape& inShape(int k) const { return shape(node().inputs[size_t(k)]); }
  const Shape& outShape() const { return shape(node().outputs[0]); }
  std::string input(int k) const { return name(node().inputs[size_t(k)]); }
  // The node as one ONNX node of op `op` over its data inputs.
  void same(const std::string& op, const std::vector<OnnxAttr>& attrs = {});
  // A Reshape to the node's output shape, the batch dimension kept as it comes (0).
  void reshapeToOutput();
  // A parameter input written under its own name.
  Result<std::string> param(int k, const Shape& shape);
  // "node 'n' (op T): <what>", and "<what> has no ONNX form".
  Error error(const std::string& what) const;
  Error noForm(const std::string& what) const;
};

// ---- Import ---------------------------------------------------------------------

// An ONNX attribute's value, as the import reads it.
struct OnnxAttrValue {
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

// One ONNX node, read out of the model.
struct OnnxNode {
  std::string opType, domain, name;
  std::vector<std::string> inputs, outputs;
  std::map<std::string, OnnxAttrValue> attrs;

  bool has(const std::string& a) const { return attrs.count(a) != 0; }
  int64_t i(const std::string& a, int64_t def) const;
  float f(const std::string& a, float def) const;
  std::string s(const std::string& a, const std::string& def) const;
  std::vector<int64_t> ints(const std::string& a, std::vector<int64_t> def = {}) const;
  // Input k's value name; empty when absent or left out.
  std::string input(size_t k) const { return k < inputs.size() ? inputs[k] : std::string(); }
};

// An integer a shape computation reads from the batch dimension (Shape of an
// activation, dimension 0): known only when the model runs.
inline constexpr int64_t kOnnxBatchSym = INT64_MIN + 7;

// A value known before the model runs (an initializer, a constant, a folded shape).
struct OnnxConst {
  bool isFloat = true;
  Shape shape;
  std::vector<float> f;
  std::vector<int64_t> i;
  int64_t size() const { return isFloat ? int64_t(f.size()) : int64_t(i.size()); }
  double at(int64_t k) const { return isFloat ? double(f[size_t(k)]) : double(i[size_t(k)]); }
};

// The ONNX node being mapped and the NetLoom model being written. A mapping that
// meets something NetLoom would compute differently records a problem naming it
// and returns false; nothing is approximated.
class OnnxImportCtx {
 public:
  virtual ~OnnxImportCtx() = default;

  virtual const OnnxNode& node() const = 0;
  virtual int64_t opset() const = 0;
  virtual const OnnxConst* constOf(const std::string& v) const = 0;
  virtual const Shape* shapeOf(const std::string& v) const = 0;  // -1 where unknown
  // How many nodes still to map, and graph outputs, read `v`.
  virtual int users(const std::string& v) const = 0;
  // The node still to map that reads `v`, where it is the only reader; else null.
  virtual const OnnxNode* soleReader(const std::string& v) const = 0;
  // Takes `reader` (from soleReader) into this mapping: nodes added from here on are
  // named after it, and `produce` gives its output.
  virtual void take(const OnnxNode& reader) = 0;
  // The NetLoom reference ("node" or "node:port") of ONNX value `v`, or a recorded
  // problem and "?".
  virtual std::string ref(const std::string& v) = 0;
  // Adds a NetLoom node, named after the ONNX node; returns its name.
  virtual std::string add(const std::string& op, const std::vector<std::string>& inputs,
                          const Attrs& attrs = {}) = 0;
  // The NetLoom node that ONNX value `v` is the output of: its name, op and
  // attributes; false when none is.
  virtual bool producer(const std::string& v, std::string& node, std::string& op,
                        Attrs& attrs) const = 0;
  virtual void setAttr(const std::string& node, const std::string& key, AttrVal v) = 0;
  // Weight `key` ("weight", "running_mean") of NetLoom node `node`.
  virtual void param(const std::string& node, const std::string& key, OnnxConst t, Shape shape) = 0;
  // ONNX value `v` is NetLoom reference `ref`.
  virtual void alias(const std::string& v, const std::string& ref) = 0;
  virtual void problem(const std::string& what) = 0;
  // Zeros that a Pad puts around height and width, kept for the one reader of its
  // output `v` to take as its own padding; `padBefore(v)` finds them (null: none).
  struct Pad {
    std::string input;
    int64_t ph = 0, pw = 0;
  };
  virtual void setPad(const std::string& v, Pad p) = 0;
  virtual const Pad* padBefore(const std::string& v) const = 0;

  const OnnxNode& n() const { return node(); }
  bool isConst(const std::string& v) const { return constOf(v) != nullptr; }
  // The node's output 0 is NetLoom node `name`.
  void produce(const std::string& name) { alias(node().outputs[0], name); }
  // Input `k` as a NetLoom reference.
  std::string in(size_t k) { return ref(node().input(k)); }
  // Refuses attributes outside `known`; false (and recorded) when there are any.
  bool onlyAttrs(const std::set<std::string>& known);
  // A constant float input, or a recorded problem naming it.
  const OnnxConst* weightInput(size_t k, const char* what);
  // Whether output k > 0 is read (an optional output NetLoom does not give).
  bool extraOutputsUsed();
  // Symmetric pads [top, left, bottom, right] as NetLoom's [ph, pw].
  bool symmetricPads(std::vector<int64_t>& pads);
  // The input through a zero Pad before it: the value read and the padding added.
  std::string paddedInput(std::vector<int64_t>& extra);
  // The whole node as NetLoom op `op` over input 0 with `attrs`, where it carries
  // no ONNX attribute outside `known`.
  bool simple(const std::string& op, const std::set<std::string>& known, const Attrs& attrs = {});
};

// An ONNX op an op file maps: false when it cannot (the problem recorded).
using OnnxImport = std::function<bool(OnnxImportCtx&)>;

// An element-wise op that exporters write out as ONNX arithmetic (GELU before opset
// 20): the import recognises a region of arithmetic nodes over one input that
// computes, at sample points, `f` with one of `variants`' attributes.
struct OnnxPointwise {
  std::function<double(double x, const Attrs&)> f;
  std::vector<Attrs> variants;
};

// An op its export writes as several ONNX nodes (opset 17 has no RMSNorm, attention
// or rotary op): the import tries each node, from the last back, as the pattern's
// last node (`root`), walking to the nodes before it. The nodes a match takes must
// be read by nothing outside it.
class OnnxPatternCtx {
 public:
  virtual ~OnnxPatternCtx() = default;

  virtual const OnnxNode& root() const = 0;
  // The node not yet mapped whose output `v` is; null for a graph input, a constant
  // or a value already mapped.
  virtual const OnnxNode* producerOf(const std::string& v) const = 0;
  virtual const OnnxConst* constOf(const std::string& v) const = 0;
  virtual const Shape* shapeOf(const std::string& v) const = 0;
  // `n` (from producerOf) belongs to the match.
  virtual void take(const OnnxNode& n) = 0;

  // The producer of `v` where it is of ONNX op `op`, else null.
  const OnnxNode* producer(const std::string& v, const std::string& op) const {
    const OnnxNode* n = producerOf(v);
    return n && n->opType == op ? n : nullptr;
  }
  // A constant holding one number (any shape of one element), or NaN.
  double scalar(const std::string& v) const {
    const OnnxConst* c = constOf(v);
    return c && c->size() == 1 ? c->at(0) : NAN;
  }
};

// What a recognised pattern becomes: one NetLoom op over ONNX values `inputs`, with
// its attributes and weights (each with its NetLoom shape).
struct OnnxPatternMatch {
  std::string op;
  std::vector<std::string> inputs;
  Attrs attrs;
  struct Weight {
    std::string key;
    OnnxConst value;
  };
  std::vector<Weight> params;
};
using OnnxPattern = std::function<bool(OnnxPatternCtx&, OnnxPatternMatch&)>;

// "[1, 2, ?]" for messages: -1 as ?.
std::string onnxShapeText(const Shape& s);
// A matrix's values transposed: [r, c] -> [c, r].
std::vector<float> transposed2d(const OnnxConst& t);
// An axis counted from the end (-1) as counted from the front, for rank `rank`.
inline int64_t positiveAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

}  // namespace netloom
