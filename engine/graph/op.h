// The op registry: every op is declared once, with its ports, attributes (type,
// default, range, a doc line), parameters, shape inference and gradient rule. The
// editor's palette and inspector are generated from these declarations.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/sbp.h"
#include "engine/util/status.h"
#include "kernels/core/attrs.h"
#include "kernels/core/kernel.h"

namespace netloom {

class Graph;
class GradBuilder;
class Rng;
class TorchCtx;
struct TorchLowering;
class OnnxExportCtx;
class OnnxImportCtx;
class OnnxPatternCtx;
struct OnnxPatternMatch;
struct OnnxPointwise;

enum class AttrKind { Int, Float, Bool, String, Ints };

struct AttrDef {
  std::string name;
  AttrKind kind = AttrKind::Int;
  AttrVal def;
  double min = -1e300, max = 1e300;  // inclusive range for Int, Float and each of Ints
  std::vector<std::string> choices;  // String: allowed values; empty means free text
  std::string doc;
  bool required = false;  // no default: the user must set it
  // Set by a compiler pass (fusion), never by a project: the editor does not show it
  // and a project that sets it is refused.
  bool internal = false;
};

struct PortDef {
  std::string name;
  std::string doc;
  bool variadic = false;  // only the last input port; takes one or more tensors
  bool hidden = false;    // an output kept for the backward pass, not shown to users
  // An input port that, left unconnected, reads the dataset's class labels (the Input
  // whose field is "label", made when the model has none): a loss needs no hand-made
  // label input.
  bool dataLabels = false;
  // An input port that may be left unconnected (only trailing ports; an attention
  // mask): the op's inputs then end before it.
  bool optional = false;
};

// Shape inference: the op reads inputs and attributes, writes output (and parameter)
// descriptions, or fails with a message naming the port and the shapes.
struct InferCtx {
  const Attrs& attrs;
  std::vector<TensorDesc> in;      // data inputs, in port order
  std::vector<TensorDesc> params;  // one per declared parameter, then buffer, to be filled
  std::vector<TensorDesc> out;     // one per output port, to be filled
  std::string error;               // set by fail()
  int errorPort = -1;              // input port at fault, or -1

  bool fail(std::string message, int port = -1) {
    error = std::move(message);
    errorPort = port;
    return false;
  }
};

// Where the layout pass may keep an op's activations in oneDNN's blocked nChw16c (an
// op with none, and not element-wise, keeps them plain). `in` and `out` are the data
// ports that may be blocked; `ignored` inputs are read for their shape only. A `free`
// op (a convolution) takes each port in its own layout; the others take one layout on
// every listed port.
struct LayoutPorts {
  std::vector<int> in, out, ignored;
  bool free = false;
};

// What an op contributes to the training step's reporting and planning.
enum class OpRole { Layer, Loss, Metric, Internal, Optimizer };

struct OpDef {
  std::string name;
  std::string category;  // palette group: Input, Layers, Activations, Shape, Losses, Metrics
  std::string doc;
  OpRole role = OpRole::Layer;
  std::vector<PortDef> inputs;
  std::vector<PortDef> outputs;
  std::vector<AttrDef> attrs;
  // Parameter names ("weight", "bias") for given attributes; none when empty.
  std::function<std::vector<std::string>(const Attrs&)> params;
  // Persistent tensors that are not trained ("running_mean"); they follow the
  // parameters in a node's inputs and are saved with the weights.
  std::function<std::vector<std::string>(const Attrs&)> buffers;
  std::function<bool(InferCtx&)> infer;
  // Emits backward nodes; null means the op is not differentiable (metrics, data).
  std::function<void(GradBuilder&)> grad;
  // Fills freshly allocated parameters and buffers, in declaration order (the weights
  // laid out as PyTorch lays them out).
  std::function<void(const Attrs&, const std::vector<TensorRef>& params, Rng& rng)> init;
  // Inputs the op writes in place (optimizer updates); they stay live and are never
  // planned into the arena.
  std::vector<int> mutates;
  // Filled from outside the step (the data loader); it gets no kernel.
  bool external = false;
  // Whether every input may share its output's memory (element-wise, same size).
  bool inplaceable = false;
  // Output 0 is input 0's elements unchanged and in order (Flatten, Reshape, Identity):
  // it may share even the memory of a loader's input, which nothing then overwrites.
  bool view = false;
  // Each output element depends only on the input elements at the same position, all
  // inputs of the output's shape: the op runs in whatever memory layout its inputs
  // come in, so the layout pass carries blocked layouts through it.
  bool elementwise = false;
  // Reads its inputs' elements in no particular order (a sum, a histogram): any memory
  // layout of them will do, and none is converted for it.
  bool anyLayout = false;
  // The activation a matrix op can apply to its own output in the same kernel (the
  // value its "activation" attribute takes, e.g. "relu"); empty when none.
  std::string epilogue;
  // Set where kernels of the op read blocked activations (see LayoutPorts).
  std::optional<LayoutPorts> layoutPorts;
  // The input port of a convolution weight that the op's kernels may read packed in
  // their preferred format, or -1; with `weightGradient`, output 0 is that weight's
  // gradient. The layout pass packs a weight whose every reader allows it.
  int packableWeight = -1;
  bool weightGradient = false;
  // Input 0 holds one score per class along its last axis and input 1 the class labels:
  // the model's class count, which the data's labels are checked against (a
  // classification loss).
  bool definesClasses = false;
  // A metric whose value is the fraction of samples classified right: the first in
  // the model is the run's test accuracy.
  bool accuracy = false;
  // Output channel c (dimension 1 of output 0) is input 1's rows c (its dimension 0,
  // the weight) applied to the data, plus input 2 (the bias, when there is one) at c:
  // a per-channel affine map after the op folds into its weight and bias (Conv2d;
  // Linear over N × features), where this says so of output 0's shape; null: never.
  // The evaluation plan folds BatchNorm so.
  std::function<bool(const Shape& output)> foldsChannelAffine;
  // In evaluation a per-channel affine map of its first input (BatchNorm on running
  // statistics): the op, named here, that computes the weight and bias of a layer
  // (foldsChannelAffine) with this op folded in, from the layer's weight, statistics
  // inputs and the two's affine parameters. Empty: not foldable.
  std::string foldsInto;
  // How the op may run spread over ranks (engine/graph/sbp.h): the SBP signatures it
  // accepts for these shapes, each correct when every rank runs the op on its local
  // parts. Null: only all broadcast (each rank runs it whole), or for element-wise
  // ops their pass-through signatures.
  std::function<std::vector<SbpSignature>(const SbpCtx&)> sbp;
  // Where attributes say sizes that a split changes (Linear's out_features, Reshape's
  // shape, Embedding's rows): sets them to what one rank's part has, given its
  // parameters' and outputs' part shapes and which part (of the tensor group's) it
  // is. Null: the attributes hold for any part.
  std::function<void(Attrs&, const std::vector<Shape>& params, const std::vector<Shape>& out,
                     int part)>
      localAttrs;
  // A matrix op (a product or convolution): under autocast (train.precision bf16 or
  // fp16) its float inputs and outputs are rounded to 16 bits (insertAutocast).
  bool autocast = false;
  // Computes in its input's precision (PyTorch's autocast leaves such ops, activations,
  // pooling, BatchNorm, the shape ops, to their input's type): under autocast, where
  // every float data input holds 16-bit values, output 0 is rounded to them too.
  bool halfFollows = false;
  // Interop written as data, where the op declares it so (the element-wise ops of
  // engine/ops/elementwise/ do): `onnxForm` is the op as ONNX nodes, an expression
  // over the input x and the attributes (engine/interop/onnx_form.h), which both the
  // export writes and the import recognises; `torchForm` a PyTorch function called
  // as f(x, attribute=value, ...).
  std::string onnxForm;
  std::string torchForm;
  // The op as ONNX where it is more than an expression of x (weights, attributes
  // computed from shapes, a folded BatchNorm): engine/graph/onnx_lowering.h. Unset
  // with onnxForm empty: the export refuses the op, naming it.
  std::function<Status(OnnxExportCtx&)> onnxExport;
  // The ONNX ops (by op type) whose nodes this op's file maps to NetLoom nodes. One
  // op file owns each ONNX op; its mapping may write another op (MatMul by a
  // constant is a Linear).
  std::map<std::string, std::function<bool(OnnxImportCtx&)>> onnxImport;
  // Set where exporters write the op out as element-wise arithmetic.
  std::shared_ptr<const OnnxPointwise> onnxPointwise;
  // The op recognised from the ONNX nodes its export writes, where those are several
  // ops of other meanings (onnx_lowering.h, OnnxPatternCtx): true with the match filled.
  std::function<bool(OnnxPatternCtx&, OnnxPatternMatch&)> onnxPattern;
  // The op as PyTorch where it is more than a function of x (a module, an
  // expression, arguments computed from shapes): engine/graph/torch_lowering.h.
  // Unset with torchForm empty: the PyTorch export refuses the op, naming it.
  std::function<Result<TorchLowering>(const TorchCtx&)> torch;
  // Forward cost for model summaries: floating-point operations for the whole batch
  // (a multiply-add counts two).
  std::function<int64_t(const InferCtx&)> flops;

  const AttrDef* attr(const std::string& n) const;
};

// The input ports a node of `op` must connect: all but the trailing optional ones.
size_t requiredInputs(const OpDef& op);

// The SBP signatures a node of `op` accepts for these shapes: its own declaration, or
// for an element-wise op the pass-through ones, else only all broadcast.
std::vector<SbpSignature> sbpSignatures(const OpDef& op, const SbpCtx& c);

class OpRegistry {
 public:
  static const OpRegistry& instance();  // built once, from the explicit list in registry.cpp

  void add(OpDef def);
  const OpDef* find(const std::string& name) const;
  std::vector<const OpDef*> all() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>> m_ops;
};

// Attribute helpers shared by op files.
AttrDef intAttr(std::string name, int64_t def, double min, double max, std::string doc);
AttrDef floatAttr(std::string name, double def, double min, double max, std::string doc);
AttrDef boolAttr(std::string name, bool def, std::string doc);
AttrDef stringAttr(std::string name, std::string def, std::vector<std::string> choices,
                   std::string doc);
AttrDef intsAttr(std::string name, std::vector<int64_t> def, double min, double max,
                 std::string doc, bool required = false);

// Validates user attributes against the op's declarations and fills defaults.
// Errors name the attribute and the allowed range or choices.
// `fromProject`: the attributes a project gave, which may not set internal ones.
Result<Attrs> resolveAttrs(const OpDef& op, const Attrs& given, bool fromProject = false);

}  // namespace netloom
