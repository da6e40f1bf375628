#include "kernels/core/pointwise.h"

namespace netloom {
namespace {

// The ops below whose kernel is their functor alone (Identity and Dropout have their
// own kernels; Pointwise runs chains of all of them).
constexpr const char* kBuiltIn[] = {"ReLU", "ReLUGrad", "LeakyReLU", "LeakyReLUGrad",
                                    "GELU", "GELUGrad", "Sigmoid",   "SigmoidGrad",
                                    "Tanh", "TanhGrad", "Add",       "RoundHalf"};

// The step of an op declared in engine/ops/elementwise/ ("Name", or "NameGrad" for
// its backward), its attributes read by the names the op declares.
std::optional<PointStep> declaredStep(const std::string& op, const Attrs& a) {
  std::optional<PointStep> found;
  ew::ForEach<ew::All>::run([&]<class Op>(size_t index) {
    const bool backward = op == std::string(Op::kName) + "Grad";
    if (found || (op != Op::kName && !backward)) return;
    static_assert(std::tuple_size_v<decltype(Op::kParams)> <= 2, "at most two attributes");
    PointStep s;
    s.op = PointOp::Declared;
    s.index = uint8_t(index);
    s.backward = backward;
    s.arity = backward ? 2 : 1;
    float* value[2] = {&s.param, &s.param2};
    for (size_t k = 0; k < Op::kParams.size(); ++k)
      *value[k] = float(a.f(Op::kParams[k].name, Op::kParams[k].def));
    found = s;
  });
  return found;
}

}  // namespace

std::optional<PointStep> pointStep(const std::string& op, const Attrs& a) {
  PointStep s;
  auto binary = [&s](PointOp o) {
    s.op = o;
    s.arity = 2;
    return s;
  };
  auto unary = [&s](PointOp o) {
    s.op = o;
    return s;
  };
  const bool tanh = a.s("approximate") == "tanh";
  if (op == "Identity") return unary(PointOp::Copy);
  if (op == "ReLU") return unary(PointOp::Relu);
  if (op == "ReLUGrad") return binary(PointOp::ReluGrad);
  if (op == "LeakyReLU" || op == "LeakyReLUGrad") {
    s.param = float(a.f("negative_slope"));
    return op == "LeakyReLU" ? unary(PointOp::LeakyRelu) : binary(PointOp::LeakyReluGrad);
  }
  if (op == "GELU") return unary(tanh ? PointOp::GeluTanh : PointOp::Gelu);
  if (op == "GELUGrad") return binary(tanh ? PointOp::GeluTanhGrad : PointOp::GeluGrad);
  if (op == "Sigmoid") return unary(PointOp::Sigmoid);
  if (op == "SigmoidGrad") return binary(PointOp::SigmoidGrad);
  if (op == "Tanh") return unary(PointOp::Tanh);
  if (op == "TanhGrad") return binary(PointOp::TanhGrad);
  if (op == "Add")
    return binary(a.s("activation", "none") == "relu" ? PointOp::AddRelu : PointOp::Add);
  if (op == "RoundHalf")
    return unary(a.s("format") == "fp16" ? PointOp::RoundFp16 : PointOp::RoundBf16);
  if (op == "Dropout") {
    s.param = float(a.f("p"));
    s.salt = uint64_t(a.i("__salt"));
    return unary(PointOp::Dropout);
  }
  return declaredStep(op, a);
}

const std::vector<std::string>& pointOpNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n(std::begin(kBuiltIn), std::end(kBuiltIn));
    ew::ForEach<ew::All>::run([&n]<class Op>(size_t) {
      n.push_back(Op::kName);
      n.push_back(std::string(Op::kName) + "Grad");
    });
    return n;
  }();
  return names;
}

std::optional<PointChain> pointChain(const Attrs& a, int inputs, std::string* error) {
  auto fail = [error](std::string why) -> std::optional<PointChain> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  PointChain chain;
  chain.inputs = inputs;
  if (inputs < 1 || inputs > kMaxPointInputs)
    return fail(std::to_string(inputs) + " inputs, not 1 to " + std::to_string(kMaxPointInputs));
  const std::string names = a.s("steps");
  size_t at = 0;
  while (at <= names.size() && !names.empty()) {
    size_t end = names.find(',', at);
    if (end == std::string::npos) end = names.size();
    const std::string op = names.substr(at, end - at);
    const std::string prefix = std::to_string(chain.steps.size()) + ".";
    Attrs own;  // the step's attributes, without the prefix
    for (const auto& [key, value] : a.values())
      if (key.compare(0, prefix.size(), prefix) == 0) own.set(key.substr(prefix.size()), value);
    if (chain.steps.size() == size_t(kMaxPointSteps))
      return fail("more than " + std::to_string(kMaxPointSteps) + " steps");
    auto step = pointStep(op, own);
    if (!step) return fail("step " + prefix + " '" + op + "' is not element-wise math");
    const std::vector<int64_t> args = own.ints("args");
    if (int(args.size()) != step->arity)
      return fail("step " + prefix + " '" + op + "' takes " + std::to_string(step->arity) +
                  " operands, not " + std::to_string(args.size()));
    for (int k = 0; k < step->arity; ++k) {
      const int64_t arg = args[size_t(k)];
      if (arg >= inputs || -arg - 1 >= int64_t(chain.steps.size()))
        return fail("step " + prefix + " '" + op + "' reads operand " + std::to_string(arg) +
                    ", which comes after it or is no input");
      step->arg[k] = int8_t(arg);
    }
    chain.dropout = chain.dropout || step->op == PointOp::Dropout;
    chain.steps.push_back(*step);
    at = end + 1;
  }
  if (chain.steps.empty()) return fail("no steps");
  for (int64_t k : a.ints("outputs")) {
    if (k < 0 || k >= int64_t(chain.steps.size()))
      return fail("output of step " + std::to_string(k) + ", which is no step");
    chain.outputs.push_back(int(k));
  }
  if (chain.outputs.empty() || chain.outputs.size() > size_t(kMaxPointOutputs))
    return fail(std::to_string(chain.outputs.size()) + " outputs, not 1 to " +
                std::to_string(kMaxPointOutputs));
  return chain;
}

std::string declinePointwise(const KernelSig& s) {
  std::string error;
  auto chain = pointChain(*s.attrs, int(s.in.size()), &error);
  if (!chain) return error;
  if (chain->outputs.size() != s.out.size())
    return "the chain writes " + std::to_string(chain->outputs.size()) + " outputs, the node has " +
           std::to_string(s.out.size());
  const TensorDesc& first = s.out[0];
  for (const auto* list : {&s.in, &s.out})
    for (const TensorDesc& d : *list)
      if (d.shape != first.shape || d.dtype != DType::F32 || !d.sameLayout(first))
        return "its tensors differ in shape, type or layout";
  return {};
}

}  // namespace netloom
