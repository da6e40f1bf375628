// Element-wise ops as steps of one loop. An op's functor (functors.h) is chosen from
// its name and attributes here, once, for every backend: the CPU and CUDA kernels of
// an op alone, and the Pointwise kernels that run a chain of them (the compiler's
// element-wise chains, engine/compiler/chains.cpp) element by element, each
// intermediate value held in registers or a cache-sized tile instead of memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "elementwise_ops.gen.h"
#include "kernels/core/attrs.h"
#include "kernels/core/functors.h"
#include "kernels/core/kernel.h"

namespace netloom {

enum class PointOp : uint8_t {
  Copy,  // Identity
  Relu,
  ReluGrad,
  LeakyRelu,
  LeakyReluGrad,
  Gelu,
  GeluGrad,
  GeluTanh,
  GeluTanhGrad,
  Sigmoid,
  SigmoidGrad,
  Tanh,
  TanhGrad,
  Add,
  AddRelu,
  RoundFp16,
  RoundBf16,
  Dropout,   // reads the step's seed and each element's logical index: the backend's own
  Declared,  // an op of engine/ops/elementwise/ (ew::All), by PointStep::index
};

// A chain's limits: a GPU thread holds each step's value, and the kernel's arguments
// are passed by value.
constexpr int kMaxPointSteps = 8;
constexpr int kMaxPointInputs = 8;
constexpr int kMaxPointOutputs = 4;

// One step of a chain. Operand k is the chain's input arg[k] where arg[k] >= 0, else
// the result of step -arg[k] - 1 (an earlier one).
struct PointStep {
  PointOp op = PointOp::Copy;
  int8_t arity = 1;
  int8_t arg[2] = {0, 1};
  float param = 0.f;      // LeakyReLU's slope; Dropout's p; a declared op's first attribute
  float param2 = 0.f;     // a declared op's second attribute
  uint64_t salt = 0;      // Dropout's stream
  uint8_t index = 0;      // Declared: the op's place in ew::All
  bool backward = false;  // Declared: its Backward functor, else its Forward
};

// The step of op `op` with attributes `a` (operands: inputs 0 and 1), or none where
// the op is not element-wise math.
std::optional<PointStep> pointStep(const std::string& op, const Attrs& a);

// Every op pointStep knows: the ops whose kernels, alone, are their functor.
const std::vector<std::string>& pointOpNames();

// A Pointwise node's chain, as its attributes hold it: "steps" names each step's op,
// comma-separated; step k's attributes are "k.<name>" and its operands "k.args";
// "outputs" lists the steps whose results the node writes, in order. An error names
// what does not parse.
struct PointChain {
  std::vector<PointStep> steps;
  std::vector<int> outputs;
  int inputs = 0;  // the chain's inputs
  bool dropout = false;
};
std::optional<PointChain> pointChain(const Attrs& a, int inputs, std::string* error);

// Why a Pointwise kernel cannot run `s`: its chain does not parse, or lists other
// outputs than the signature has, or its tensors differ in shape, type or layout.
// Empty when it can.
std::string declinePointwise(const KernelSig& s);

// Calls `visit` with the functor of step `s` (a Copy for Dropout, which a backend
// runs itself). Host and device code alike.
template <class V>
NL_HD auto visitPoint(const PointStep& s, V&& visit) {
  switch (s.op) {
    case PointOp::Relu: return visit(fn::Relu{});
    case PointOp::ReluGrad: return visit(fn::ReluGrad{});
    case PointOp::LeakyRelu: return visit(fn::LeakyRelu{s.param});
    case PointOp::LeakyReluGrad: return visit(fn::LeakyReluGrad{s.param});
    case PointOp::Gelu: return visit(fn::Gelu{});
    case PointOp::GeluGrad: return visit(fn::GeluGrad{});
    case PointOp::GeluTanh: return visit(fn::GeluTanh{});
    case PointOp::GeluTanhGrad: return visit(fn::GeluTanhGrad{});
    case PointOp::Sigmoid: return visit(fn::Sigmoid{});
    case PointOp::SigmoidGrad: return visit(fn::SigmoidGrad{});
    case PointOp::Tanh: return visit(fn::Tanh{});
    case PointOp::TanhGrad: return visit(fn::TanhGrad{});
    case PointOp::Add: return visit(fn::Add{});
    case PointOp::AddRelu: return visit(fn::AddRelu{});
    case PointOp::RoundFp16: return visit(fn::RoundHalf{true});
    case PointOp::RoundBf16: return visit(fn::RoundHalf{false});
    case PointOp::Declared: {
      const float p[2] = {s.param, s.param2};
      return ew::visitOp(ew::All{}, s.index, s.backward, p, visit, fn::Copy{});
    }
    default: return visit(fn::Copy{});
  }
}

// Whether functor F takes one operand (else two).
template <class F>
inline constexpr bool kUnary = std::is_invocable_v<F, float>;

}  // namespace netloom
