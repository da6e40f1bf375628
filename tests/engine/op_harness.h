// One harness for every op: a case gives the op, its attributes, input shapes and a
// plain double-precision reference of its forward pass. The harness compiles the op
// into a real program, compares the forward output with the reference, and checks
// every gradient the engine computes (inputs and parameters) against central finite
// differences of the reference.
#pragma once

#include <QtTest>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/compiler/compile.h"
#include "kernels/core/rng.h"

namespace harness {

using netloom::AttrVal;
using netloom::Shape;
using Vec = std::vector<double>;

// Uniform: in [-2, 2]; Wide: in [-5, 5], past an activation's bends at ±3.
enum class Fill { Uniform, Probability, Labels, Wide };

struct InputSpec {
  Shape shape;  // including the batch dimension
  Fill fill = Fill::Uniform;
  int classes = 0;  // Labels: values in [0, classes)
  // A float input the op does not differentiate (an attention mask): its gradient
  // is not asked for.
  bool constant = false;
};

struct RefArgs {
  std::vector<Vec> in;
  std::vector<bool> isLabels;  // per input: int32 values (Fill::Labels)
  std::vector<Shape> inShapes;
  std::vector<Vec> params;
  std::vector<Shape> paramShapes;
  Shape outShape;
  // One rank's part's attributes (OpDef::localAttrs), where a reference computes a
  // part of the op spread over ranks (tst_sbp); null: the op whole.
  const netloom::Attrs* local = nullptr;
};

struct OpCase {
  std::string op;
  std::map<std::string, AttrVal> attrs;
  std::vector<InputSpec> inputs;
  std::function<Vec(const RefArgs&)> reference;
  bool checkGradients = true;
};

inline int64_t count(const Shape& s) {
  return netloom::numel(s);
}

// The scalar the gradients are taken of: the op itself when it is a loss, otherwise
// mean((y - t)²) against a fixed random target t.
inline double objective(const OpCase& c, const RefArgs& a, const Vec& target, bool isLoss) {
  Vec y = c.reference(a);
  if (isLoss) return y[0];
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += (y[i] - target[i]) * (y[i] - target[i]);
  return s / double(y.size());
}

inline bool close(double got, double want, double rtol, double atol) {
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

// The case as a model: an Input per input ("in0", ... reading fields "f0", ...) and
// the op as node "op". `floatInputs` gets the inputs whose gradients are checked.
inline netloom::proto::ModelDef caseModel(const OpCase& c,
                                          std::vector<std::string>* floatInputs = nullptr) {
  using namespace netloom;
  proto::ModelDef m;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    auto* n = m.add_nodes();
    n->set_name("in" + std::to_string(k));
    n->set_op("Input");
    Shape sample(c.inputs[k].shape.begin() + 1, c.inputs[k].shape.end());
    (*n->mutable_attrs())["shape"] = attrToProto(sample);
    (*n->mutable_attrs())["field"] = attrToProto(std::string("f" + std::to_string(k)));
    if (c.inputs[k].fill == Fill::Labels)
      (*n->mutable_attrs())["dtype"] = attrToProto(std::string("int32"));
    else if (!c.inputs[k].constant && floatInputs)
      floatInputs->push_back(n->name());
  }
  auto* node = m.add_nodes();
  node->set_name("op");
  node->set_op(c.op);
  for (size_t k = 0; k < c.inputs.size(); ++k) node->add_inputs("in" + std::to_string(k));
  for (const auto& [k, v] : c.attrs) (*node->mutable_attrs())[k] = attrToProto(v);
  return m;
}

// One pass on `device` with either the preferred kernels or the reference ones;
// `forward` gets the op's output. Values cross to the device and back by copies.
inline void runOnce(const OpCase& c, bool referenceKernels, Vec& forward,
                    netloom::Device& device = netloom::cpuDevice()) {
  using namespace netloom;
  const OpDef* op = OpRegistry::instance().find(c.op);
  QVERIFY2(op, ("no op " + c.op).c_str());
  bool isLoss = op->role == OpRole::Loss;
  bool grads = c.checkGradients && op->grad;

  std::vector<std::string> floatInputs;
  proto::ModelDef m = caseModel(c, &floatInputs);
  int64_t batch = c.inputs.empty() ? 1 : c.inputs[0].shape[0];

  auto probe = buildGraph(m, batch);
  QVERIFY2(probe.ok(), probe.ok() ? "" : probe.error().message.c_str());
  Shape outShape = probe->values[probe->findNode("op")->outputs[0]].desc.shape;
  std::string lossName = "op";
  bool scalarOut = outShape.empty();  // metrics: checked forward only
  if (!isLoss && !scalarOut) {
    auto* t = m.add_nodes();
    t->set_name("target");
    t->set_op("Input");
    (*t->mutable_attrs())["shape"] = attrToProto(Shape(outShape.begin() + 1, outShape.end()));
    (*t->mutable_attrs())["field"] = attrToProto(std::string("t"));
    auto* l = m.add_nodes();
    l->set_name("probe");
    l->set_op("MSELoss");
    l->add_inputs("op");
    l->add_inputs("target");
    lossName = "probe";
  }
  // Metrics and shape-only outputs have no loss of their own; compile forward only.
  CompileOptions o;
  o.batch = batch;
  o.training = grads;
  o.updateParams = false;
  o.loss = lossName;
  o.metrics = {lossName};
  o.keep = {"op"};
  o.gradientsOf = grads ? floatInputs : std::vector<std::string>{};
  o.fuse = false;
  o.seed = 3;
  o.referenceKernels = referenceKernels;
  ParamStore store(device);
  auto prog = compile(m, o, store);
  QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
  Program& p = **prog;

  Rng rng(42);
  RefArgs args;
  args.outShape = outShape;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& s = c.inputs[k];
    Vec v(count(s.shape));
    for (double& x : v)
      x = s.fill == Fill::Labels        ? double(rng.below(uint64_t(s.classes)))
          : s.fill == Fill::Probability ? rng.uniform(0.05, 0.95)
          : s.fill == Fill::Wide        ? rng.uniform(-5.0, 5.0)
                                        : rng.uniform(-2.0, 2.0);
    const TensorRef* ref = p.input("f" + std::to_string(k));
    QVERIFY(ref);
    std::vector<float> floats(v.size());
    std::vector<int32_t> labels(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (s.fill == Fill::Labels)
        labels[i] = int32_t(v[i]);
      else
        v[i] = floats[i] = float(v[i]);  // the reference sees exactly what the kernel sees
    }
    if (s.fill == Fill::Labels)
      device.copyToDevice(ref->data, labels.data(), int64_t(labels.size() * sizeof(int32_t)));
    else
      device.copyToDevice(ref->data, floats.data(), int64_t(floats.size() * sizeof(float)));
    device.synchronize();
    args.in.push_back(v);
    args.isLabels.push_back(s.fill == Fill::Labels);
    args.inShapes.push_back(s.shape);
  }
  Vec target(count(outShape));
  if (!isLoss && !scalarOut) {
    const TensorRef* t = p.input("t");
    QVERIFY(t);
    std::vector<float> floats(target.size());
    for (size_t i = 0; i < target.size(); ++i) target[i] = floats[i] = float(rng.uniform(-1, 1));
    writeFloats(device, t->data, floats.data(), int64_t(floats.size()));
  }
  std::vector<std::string> paramNames;
  for (const auto& e : store.entries()) {
    if (e->kind != ValueKind::Param) continue;
    paramNames.push_back(e->name);
    std::vector<float> values = ParamStore::stored(*e);
    args.params.push_back(Vec(values.begin(), values.end()));
    args.paramShapes.push_back(e->desc.shape);
  }

  StepContext ctx;
  ctx.step = 1;
  ctx.seed = 5;
  p.run(ctx);

  // Forward.
  Vec want = c.reference(args);
  ValueId out = p.graph.findValue("op");
  QVERIFY(out != kNoValue);
  QCOMPARE(int64_t(want.size()), p.refs[out].numel());
  std::vector<float> y = p.read(out);
  forward.assign(y.begin(), y.end());
  for (size_t i = 0; i < want.size(); ++i) {
    double got = y[i];
    if (!close(got, want[i], 1e-4, 1e-5))
      QFAIL(qPrintable(QString("%1 forward[%2]: got %3, reference %4")
                           .arg(c.op.c_str())
                           .arg(i)
                           .arg(got, 0, 'g', 9)
                           .arg(want[i], 0, 'g', 9)));
  }
  if (!grads) return;

  // Gradients of every float input and parameter, against central differences.
  auto check = [&](const std::string& name, Vec& x) {
    auto it = p.gradients.find(name);
    QVERIFY2(it != p.gradients.end(), ("no gradient for " + name).c_str());
    const std::vector<float> g = p.read(it->second);
    int64_t n = int64_t(x.size());
    int64_t stride = std::max<int64_t>(1, n / 16);  // sample up to ~16 elements per tensor
    for (int64_t i = 0; i < n; i += stride) {
      double saved = x[i], h = 1e-5 * std::max(1.0, std::fabs(saved));
      x[i] = saved + h;
      double up = objective(c, args, target, isLoss);
      x[i] = saved - h;
      double down = objective(c, args, target, isLoss);
      x[i] = saved;
      double numeric = (up - down) / (2 * h);
      if (!close(g[i], numeric, 5e-3, 2e-6))
        QFAIL(qPrintable(QString("%1 d/d%2[%3]: engine %4, finite difference %5")
                             .arg(c.op.c_str())
                             .arg(name.c_str())
                             .arg(i)
                             .arg(g[i], 0, 'g', 9)
                             .arg(numeric, 0, 'g', 9)));
    }
  };
  size_t floatIndex = 0;
  for (size_t k = 0; k < c.inputs.size(); ++k)
    if (c.inputs[k].fill != Fill::Labels && !c.inputs[k].constant)
      check(floatInputs[floatIndex++], args.in[k]);
  for (size_t k = 0; k < paramNames.size(); ++k) check(paramNames[k], args.params[k]);
}

// Both the preferred kernels and the reference kernels against the double reference,
// and against each other on the same inputs.
inline void run(const OpCase& c) {
  Vec fast, reference;
  runOnce(c, false, fast);
  if (QTest::currentTestFailed()) return;
  runOnce(c, true, reference);
  if (QTest::currentTestFailed()) return;
  QCOMPARE(fast.size(), reference.size());
  for (size_t i = 0; i < fast.size(); ++i)
    if (!close(fast[i], reference[i], 1e-4, 1e-5))
      QFAIL(qPrintable(QString("%1: preferred kernel %2 vs reference kernel %3 at %4")
                           .arg(c.op.c_str())
                           .arg(fast[i])
                           .arg(reference[i])
                           .arg(i)));
}

}  // namespace harness
