// bf16 on the CPU's bf16 units: autocast keeping the convolutions blocked, the matrix
// products reading their operands from 16-bit storage, the convolutions computing on
// bf16 operands; and, on a CPU without bf16 units, the float kernels and why.
#include <QtTest>
#include <cmath>
#include <map>

#include "cpu_isa.h"
#include "engine/compiler/compile.h"
#include "kernels/core/functors.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

// One launch of `k` for `sig` on inputs given as floats (bf16 values where the
// signature stores bf16); its outputs read back as floats.
std::vector<std::vector<float>> launch(const KernelImpl& k, const KernelSig& sig,
                                       const std::vector<std::vector<float>>& values) {
  std::vector<std::vector<char>> store;
  auto hold = [&](const TensorDesc& d, const std::vector<float>* v) {
    store.emplace_back(size_t(bytesOf(d)), char(0));
    if (v)
      for (size_t i = 0; i < v->size(); ++i) {
        if (d.dtype == DType::BF16)
          reinterpret_cast<uint16_t*>(store.back().data())[i] = fn::ToBf16{}((*v)[i]);
        else
          reinterpret_cast<float*>(store.back().data())[i] = (*v)[i];
      }
    return TensorRef{store.back().data(), d.shape, d.dtype, {}};
  };
  store.reserve(sig.in.size() + sig.out.size());
  std::vector<TensorRef> in, out;
  for (size_t i = 0; i < sig.in.size(); ++i) in.push_back(hold(sig.in[i], &values[i]));
  for (const TensorDesc& d : sig.out) out.push_back(hold(d, nullptr));
  std::vector<char> workspace(size_t(k.workspace ? k.workspace(sig) : 0) + 64);
  StepContext ctx;
  KernelIO io{in.data(), out.data(), in.size(), out.size(), &ctx};
  io.workspace = workspace.data();
  io.workspaceBytes = int64_t(workspace.size());
  k.prepare(sig)(io);
  std::vector<std::vector<float>> got;
  for (size_t o = 0; o < out.size(); ++o) {
    const int64_t n = storedElements(sig.out[o]);
    got.emplace_back(size_t(n));
    for (int64_t i = 0; i < n; ++i)
      got.back()[size_t(i)] = sig.out[o].dtype == DType::BF16
                                  ? fn::FromBf16{}(static_cast<const uint16_t*>(out[o].data)[i])
                                  : static_cast<const float*>(out[o].data)[i];
  }
  return got;
}

// Whether this CPU has oneDNN's bf16 matrix products: asked of the registry, as the
// compiler asks.
bool cpuHasBf16Products() {
  KernelSig probe;
  static const Attrs none;
  probe.attrs = &none;
  probe.in = {TensorDesc{{8, 8}, DType::BF16, {}}, TensorDesc{{8, 8}, DType::BF16, {}}};
  probe.out = {TensorDesc{{8, 8}, DType::F32, {}}};
  for (const KernelImpl& k : *KernelRegistry::instance().list("MatMul", DeviceKind::Cpu))
    if (!k.widened && k.decline(probe).empty()) return true;
  return false;
}

}  // namespace

class TestBf16Kernels : public QObject {
  Q_OBJECT

 private slots:
  // A rounding is element-wise: the layout pass carries blocked layouts through it, so
  // under autocast the convolutions and BatchNorm are blocked at least as often as in
  // float (in plain NCHW the convolutions ran at half the speed, and BatchNorm fell
  // back to its reference loops).
  void autocastKeepsTheConvolutionsBlocked() {
    auto body =
        input("x", "1,12,12") + labels() +
        node("conv1", "Conv2d", "x",
             intAttr("out_channels", 16) + intAttr("kernel_size", 3) + intAttr("padding", 1)) +
        node("bn", "BatchNorm", "conv1", intAttr("num_features", 16)) + node("act", "ReLU", "bn") +
        node("conv2", "Conv2d", "act",
             intAttr("out_channels", 16) + intAttr("kernel_size", 3) + intAttr("padding", 1)) +
        node("flat", "Flatten", "conv2") +
        node("fc", "Linear", "flat", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    int inFloat = -1;
    for (Precision p : {Precision::F32, Precision::BF16, Precision::F16}) {
      ParamStore store;
      CompileOptions o;
      o.precision = p;
      auto prog = compile(model(body), o, store);
      QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
      const Graph& g = (*prog)->graph;
      int blocked = 0;
      for (const Node& n : g.nodes)
        if ((n.op->name == "Conv2d" || n.op->name == "BatchNorm") &&
            g.values[n.outputs[0]].desc.layout == Layout::Blocked16)
          blocked += 1;
      if (p == Precision::F32) {
        if (!oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);
        QVERIFY(blocked > 0);  // 16 channels: blocked where oneDNN can
        inFloat = blocked;
      } else {
        QVERIFY2(blocked >= inFloat, qPrintable(QString("%1: %2 blocked, %3 in fp32")
                                                    .arg(precisionName(p))
                                                    .arg(blocked)
                                                    .arg(inFloat)));
      }
    }
  }

  // Under bf16, on a CPU with bf16 products (AVX512_BF16, AMX), the matrix ops whose
  // operands are both rounded read them from 16-bit storage, half the bytes; elsewhere
  // they read rounded floats, and --explain says which.
  void bf16OperandsAreStoredInSixteenBits() {
    const bool cpuHasBf16 = cpuHasBf16Products();
    qInfo("this CPU %s bf16 matrix products", cpuHasBf16 ? "has" : "has no");
    auto body =
        input("x", "24") + labels() + node("fc1", "Linear", "x", intAttr("out_features", 32)) +
        node("act", "ReLU", "fc1") + node("fc2", "Linear", "act", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc2,label");
    ParamStore store;
    CompileOptions o;
    o.precision = Precision::BF16;
    auto prog = compile(model(body), o, store);
    QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
    const Graph& g = (*prog)->graph;
    int casts = 0, halfProducts = 0;
    for (const Node& n : g.nodes) {
      if (n.op->name == "CastBf16") {
        casts += 1;
        const Value& v = g.values[n.outputs[0]];
        QCOMPARE(v.desc.dtype, DType::BF16);
        QCOMPARE(bytesOf(v.desc), numel(v.desc.shape) * 2);
      }
      if (n.op->name == "Linear" || n.op->name == "MatMul")
        halfProducts += g.values[n.inputs[0]].desc.dtype == DType::BF16 &&
                        g.values[n.inputs[1]].desc.dtype == DType::BF16;
    }
    // Forward: both layers; backward: fc2's input gradient (fc1 has none to give) and
    // both weight gradients, each reading its operands in bf16.
    QCOMPARE(halfProducts, cpuHasBf16 ? 5 : 0);
    QCOMPARE(casts > 0, cpuHasBf16);
    const std::string text = (*prog)->explain();
    QVERIFY2(text.find(cpuHasBf16 ? "read bf16 operands from 16-bit storage"
                                  : "no matrix op has a bf16 kernel") != std::string::npos,
             text.c_str());
    if (cpuHasBf16) QVERIFY2(text.find("onednn.bf16_gemm") != std::string::npos, text.c_str());
  }

  // The kernel the compiler would choose for a signature with bf16 tensors (one that
  // reads and writes bf16 itself: BatchNorm, pooling, the element-wise ops, Dropout, the
  // convolutions' passes; or a float kernel's widened twin) gives what the float kernel
  // gives on the same values, rounded to bf16 where it stores bf16: the convolutions
  // within two bf16 steps (their sums run in another order), the others exactly.
  void bf16KernelsMatchTheFloatOnes_data() {
    QTest::addColumn<QString>("op");
    QTest::addColumn<QString>("types");  // each input's, '/', each output's; h: bf16, f: float
    QTest::addColumn<bool>("exact");
    QTest::newRow("BatchNorm") << "BatchNorm"
                               << "hffff/hff" << true;
    QTest::newRow("BatchNorm+ReLU") << "BatchNorm+ReLU"
                                    << "hffff/hff" << true;
    QTest::newRow("BatchNorm to float") << "BatchNorm"
                                        << "hffff/fff" << true;
    QTest::newRow("BatchNormGrad") << "BatchNormGrad"
                                   << "hhfff/hff" << true;
    QTest::newRow("BatchNormGrad float dy") << "BatchNormGrad"
                                            << "fhfff/hff" << true;
    QTest::newRow("MaxPool2d") << "MaxPool2d"
                               << "h/h" << true;
    QTest::newRow("MaxPool2d to float") << "MaxPool2d"
                                        << "h/f" << true;
    QTest::newRow("MaxPool2dGrad") << "MaxPool2dGrad"
                                   << "hh/h" << true;
    QTest::newRow("ReLUGrad") << "ReLUGrad"
                              << "hh/h" << true;
    QTest::newRow("ReLUGrad float dy") << "ReLUGrad"
                                       << "fh/f" << true;
    QTest::newRow("ReLU") << "ReLU"
                          << "h/h" << true;
    QTest::newRow("Add") << "Add"
                         << "hf/h" << true;
    QTest::newRow("Dropout") << "Dropout"
                             << "h/h" << true;
    QTest::newRow("Dropout to bf16") << "Dropout"
                                     << "f/h" << true;
    QTest::newRow("Flatten") << "Flatten"
                             << "h/h" << true;
    QTest::newRow("Flatten to bf16") << "Flatten"
                                     << "f/h" << true;
    QTest::newRow("Flatten to float") << "Flatten"
                                      << "h/f" << true;
    QTest::newRow("Softmax") << "Softmax"
                             << "h/h" << true;
    QTest::newRow("ReduceRows") << "ReduceRows"
                                << "h/f" << true;
    QTest::newRow("Transpose") << "Transpose"
                               << "h/h" << true;
    QTest::newRow("Transpose to bf16") << "Transpose"
                                       << "f/h" << true;
    QTest::newRow("Conv2d") << "Conv2d"
                            << "hff/h" << false;
    QTest::newRow("Conv2dGradInput") << "Conv2dGradInput"
                                     << "hhf/h" << false;
    QTest::newRow("Conv2dGradWeight") << "Conv2dGradWeight"
                                      << "hhf/f" << false;
  }
  void bf16KernelsMatchTheFloatOnes() {
    QFETCH(QString, op);
    QFETCH(QString, types);
    QFETCH(bool, exact);
    const int64_t n = 4, c = 16, h = 6;
    const Shape x{n, c, h, h}, pooled{n, c, h / 2, h / 2}, per{c}, w{c, c, 3, 3};
    Attrs given;
    std::vector<Shape> shapes;
    std::string name = op.toStdString();
    if (name == "BatchNorm+ReLU") {
      name = "BatchNorm";
      given.set("activation", std::string("relu"));
    }
    if (name == "BatchNorm") shapes = {x, per, per, per, per, x, per, per};
    if (name == "BatchNormGrad") shapes = {x, x, per, per, per, x, per, per};
    if (name == "BatchNorm" || name == "BatchNormGrad") given.set("num_features", c);
    if (name == "MaxPool2d") shapes = {x, pooled};
    if (name == "MaxPool2dGrad") shapes = {pooled, x, x};
    if (name.rfind("MaxPool", 0) == 0) given.set("kernel_size", Shape{2});
    if (name == "ReLUGrad" || name == "Add") shapes = {x, x, x};
    if (name == "ReLU" || name == "Softmax") shapes = {x, x};
    if (name == "Dropout") {
      shapes = {x, x};
      given.set("p", 0.5);
    }
    if (name == "Flatten") shapes = {x, Shape{n, c * h * h}};
    if (name == "ReduceRows") shapes = {Shape{n * h, c}, Shape{c}};
    if (name == "Transpose") {
      shapes = {x, Shape{n, h, c, h}};
      given.set("perm", Shape{0, 2, 1, 3});
    }
    if (name == "Conv2d") shapes = {x, w, per, x};
    if (name == "Conv2dGradInput") shapes = {x, x, w, x};
    if (name == "Conv2dGradWeight") shapes = {x, x, w, w};
    if (name.rfind("Conv2d", 0) == 0) {
      given.set("out_channels", c);
      given.set("kernel_size", Shape{3});
      given.set("padding", Shape{1});
    }
    types.remove('/');
    QCOMPARE(size_t(types.size()), shapes.size());
    const OpDef* def =
        OpRegistry::instance().find(name.rfind("Conv2dGrad", 0) == 0 ? "Conv2d" : name);
    auto attrs = resolveAttrs(*def, given);
    QVERIFY2(attrs.ok(), attrs.ok() ? "" : attrs.error().message.c_str());
    if (name.rfind("Conv2d", 0) == 0) attrs->set("bf16_operands", true);  // as autocast sets it
    KernelSig sig{&*attrs, {}, {}, &cpuDevice()};
    const size_t nin = shapes.size() - (name == "BatchNorm" || name == "BatchNormGrad" ? 3 : 1);
    Rng rng(7);
    std::vector<std::vector<float>> values;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const bool activation = shapes[i].size() == 4 && shapes[i] != w && name != "Flatten" &&
                              name != "Softmax" && name != "Transpose";
      TensorDesc d{shapes[i],
                   types[int(i)] == 'h' ? DType::BF16 : DType::F32,
                   {},
                   activation ? Layout::Blocked16 : Layout::Plain};
      (i < nin ? sig.in : sig.out).push_back(d);
      if (i >= nin) continue;
      std::vector<float> v(size_t(numel(shapes[i])));
      for (float& e : v)  // bf16 values; variances positive
        e = fn::FromBf16{}(
            fn::ToBf16{}(float(shapes[i] == per ? rng.uniform(0.5, 2) : rng.uniform(-2, 2))));
      values.push_back(std::move(v));
    }
    const KernelSig wide = widenedSig(sig);
    const KernelImpl *chosen = nullptr, *single = nullptr;
    for (const KernelImpl& k : *KernelRegistry::instance().list(name, DeviceKind::Cpu)) {
      if (!chosen && k.decline(sig).empty()) chosen = &k;
      if (!single && k.decline(wide).empty()) single = &k;
    }
    QVERIFY2(chosen && single, "a kernel for bf16 tensors, and one for floats");
    qInfo("%s", chosen->name.c_str());
    const auto mine = launch(*chosen, sig, values);
    auto theirs = launch(*single, wide, values);
    for (size_t o = 0; o < theirs.size(); ++o)  // stored in bf16
      if (sig.out[o].dtype == DType::BF16)
        for (float& v : theirs[o]) v = fn::FromBf16{}(fn::ToBf16{}(v));
    for (size_t o = 0; o < mine.size(); ++o)
      for (size_t i = 0; i < mine[o].size(); ++i) {
        const float a = mine[o][i], b = theirs[o][i];
        const bool same = exact ? a == b : std::fabs(a - b) <= std::fabs(b) / 64 + 1e-6f;
        QVERIFY2(same, qPrintable(QString("%1 output %2 [%3]: %4 from %5, %6 from %7")
                                      .arg(op)
                                      .arg(o)
                                      .arg(i)
                                      .arg(a)
                                      .arg(chosen->name.c_str())
                                      .arg(b)
                                      .arg(single->name.c_str())));
      }
  }

  // Under bf16 the activations and their gradients that autocast rounds live in 16
  // bits between launches, on a CPU with bf16 units (a float kernel reads them
  // widened): a Conv+BatchNorm net's arena is little over half its float one. What the host reads
  // (the loss, the model's output) and what the optimizer reads (the parameters'
  // gradients) stay float; the evaluation plan stores its activations alike.
  void activationsAreStoredInBf16() {
    auto block = [](const std::string& at, const std::string& from) {
      return node(at + "conv", "Conv2d", from,
                  intAttr("out_channels", 32) + intAttr("kernel_size", 3) + intAttr("padding", 1) +
                      "attrs { key: 'bias' value { b: false } }") +
             node(at + "bn", "BatchNorm", at + "conv", intAttr("num_features", 32)) +
             node(at + "relu", "ReLU", at + "bn") +
             node(at + "pool", "MaxPool2d", at + "relu", intAttr("kernel_size", 2));
    };
    auto body = input("x", "1,16,16") + labels() + block("a", "x") + block("b", "apool") +
                node("flat", "Flatten", "bpool") +
                node("fc", "Linear", "flat", intAttr("out_features", 10)) +
                node("loss", "SoftmaxCrossEntropy", "fc,label");
    std::map<Precision, int64_t> arena;
    for (bool training : {true, false})
      for (Precision p : {Precision::F32, Precision::BF16, Precision::F16}) {
        ParamStore store;
        CompileOptions o;
        o.precision = p;
        o.batch = 64;
        o.training = training;
        auto prog = compile(model(body), o, store);
        QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
        const Graph& g = (*prog)->graph;
        int half = 0;
        for (const Value& v : g.values) {
          if (v.desc.dtype != DType::BF16) continue;
          half += 1;
          QVERIFY2(v.kind == ValueKind::Activation, v.name.c_str());
          QVERIFY2(v.name.find(".weight") == std::string::npos, v.name.c_str());
        }
        for (const Node& n : g.nodes) {
          for (ValueId v : n.inputs)  // updates and losses read float
            if (n.op->role == OpRole::Optimizer)
              QVERIFY2(g.values[v].desc.dtype == DType::F32, n.name.c_str());
          if (n.name == "loss" || n.name == "fc")
            QCOMPARE(g.values[n.outputs[0]].desc.dtype, DType::F32);
        }
        QCOMPARE(half > 0, p == Precision::BF16 && cpuHasBf16Products());
        // A product or convolution, or a gradient of one, runs a kernel of its own: its
        // operands are never widened around it.
        for (const PlanStep& step : (*prog)->steps) {
          const Node& n = g.nodes[size_t(step.node)];
          if (n.op->autocast || n.attrs.b("bf16_operands"))
            QVERIFY2(step.kernel.find("+bf16") == std::string::npos,
                     (n.name + ": " + step.kernel).c_str());
        }
        if (training) arena[p] = (*prog)->arenaBytes;
        if (p == Precision::BF16)
          QVERIFY2(((*prog)->explain().find("stored in bf16") != std::string::npos) ==
                       cpuHasBf16Products(),
                   "--explain says so");
      }
    const double f32 = double(arena[Precision::F32]), b16 = double(arena[Precision::BF16]);
    qInfo("arena: %.0f bytes in fp32, %.0f in bf16 (%.2fx), %lld in fp16", f32, b16, b16 / f32,
          (long long)arena[Precision::F16]);
    // Without bf16 units every activation stays float, each rounding written over what
    // it rounds: the float plan's size, and the weights' rounded copies (here 1.01x).
    QVERIFY(b16 <= f32 * (cpuHasBf16Products() ? 0.6 : 1.05));
    // fp16's tensors stay float, each rounding written over what it rounds.
    QVERIFY(double(arena[Precision::F16]) <= f32 * 1.05);
  }

  // Under bf16 the CPU's convolutions, each pass of them, read their operands (which
  // autocast rounded) as bf16 where the CPU has bf16 units: the same results as the
  // float kernels on the same values, up to the order of the sums, with the blocked
  // and the plain layouts. Under fp16 they stay float.
  void convolutionsComputeOnBf16Operands_data() {
    QTest::addColumn<int>("layout");
    QTest::newRow("nChw16c") << int(Layout::Blocked16);
    QTest::newRow("plain") << int(Layout::Plain);
  }
  void convolutionsComputeOnBf16Operands() {
    QFETCH(int, layout);
    if (Layout(layout) != Layout::Plain && !oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);
    Attrs a;
    a.set("out_channels", int64_t(16));
    a.set("kernel_size", Shape{3, 3});
    a.set("stride", Shape{1, 1});
    a.set("padding", Shape{1, 1});
    a.set("dilation", Shape{1, 1});
    a.set("groups", int64_t(1));
    a.set("bias", true);
    a.set("same_padding", false);
    a.set("bf16_operands", true);
    const Shape xs{4, 16, 9, 9}, ws{16, 16, 3, 3};
    auto act = [&](const Shape& s) { return TensorDesc{s, DType::F32, {}, Layout(layout)}; };
    const TensorDesc x = act(xs), dy = act(xs);
    const TensorDesc w{ws, DType::F32, {}, Layout::Plain}, b{{16}, DType::F32, {}, Layout::Plain};
    Rng rng(31);
    auto values = [&](const Shape& s) {  // bf16 values, as autocast leaves them
      std::vector<float> v(size_t(numel(s)));
      for (float& e : v) e = fn::FromBf16{}(fn::ToBf16{}(float(rng.uniform(-1, 1))));
      return v;
    };
    std::vector<float> xv = values(xs), dyv = values(xs), wv = values(ws), bv = values({16});
    struct PassCase {
      const char* op;
      std::vector<TensorDesc> in;
      TensorDesc out;
      std::vector<float*> data;
    };
    const PassCase cases[] = {
        {"Conv2d", {x, w, b}, act(xs), {xv.data(), wv.data(), bv.data()}},
        {"Conv2dGradInput", {dy, x, w}, act(xs), {dyv.data(), xv.data(), wv.data()}},
        {"Conv2dGradWeight", {dy, x, w}, w, {dyv.data(), xv.data(), wv.data()}}};
    std::string none;  // why this CPU has no bf16 convolution, if it has none
    for (const PassCase& c : cases) {
      KernelSig sig{&a, c.in, {c.out}, &cpuDevice()};
      const KernelImpl *half = nullptr, *single = nullptr;
      for (const KernelImpl& k : *KernelRegistry::instance().list(c.op, DeviceKind::Cpu)) {
        if (k.widened) continue;
        if (k.name.size() > 5 && k.name.substr(k.name.size() - 5) == "_bf16") half = &k;
        if (k.name.rfind("onednn.", 0) == 0 && k.name.find("_bf16") == std::string::npos)
          single = &k;
      }
      QVERIFY2(half && single, c.op);
      QVERIFY(single->decline(sig).empty());
      if (none = half->decline(sig); !none.empty()) {
        qInfo("%s: %s", c.op, none.c_str());
        continue;
      }
      std::vector<std::vector<float>> outs;
      for (const KernelImpl* k : {half, single}) {
        std::vector<char> workspace(size_t(k->workspace ? k->workspace(sig) : 0) + 64);
        KernelFn launch = k->prepare(sig);
        std::vector<TensorRef> in;
        for (size_t i = 0; i < c.in.size(); ++i)
          in.push_back({c.data[i], c.in[i].shape, DType::F32, {}});
        std::vector<float> y(size_t(numel(c.out.shape)), std::nanf(""));
        TensorRef out{y.data(), c.out.shape, DType::F32, {}};
        StepContext ctx;
        KernelIO io{in.data(), &out, in.size(), 1, &ctx};
        io.workspace = workspace.data();
        io.workspaceBytes = int64_t(workspace.size());
        launch(io);
        outs.push_back(y);
      }
      for (size_t i = 0; i < outs[0].size(); ++i)
        QVERIFY2(std::fabs(outs[0][i] - outs[1][i]) <= 1e-4 * (std::fabs(outs[1][i]) + 1),
                 qPrintable(QString("%1[%2]: %3 in bf16, %4 in float")
                                .arg(c.op)
                                .arg(i)
                                .arg(outs[0][i])
                                .arg(outs[1][i])));
    }
    // Chosen under bf16 for every pass; never under fp16, whose values bf16 cannot hold;
    // on a CPU without bf16 units never, and --explain says why.
    auto body =
        input("x", "1,12,12") + labels() +
        node("conv1", "Conv2d", "x",
             intAttr("out_channels", 16) + intAttr("kernel_size", 3) + intAttr("padding", 1)) +
        node("act", "ReLU", "conv1") +
        node("conv2", "Conv2d", "act",
             intAttr("out_channels", 16) + intAttr("kernel_size", 3) + intAttr("padding", 1)) +
        node("flat", "Flatten", "conv2") +
        node("fc", "Linear", "flat", intAttr("out_features", 3)) +
        node("loss", "SoftmaxCrossEntropy", "fc,label");
    for (Precision p : {Precision::BF16, Precision::F16}) {
      ParamStore store;
      CompileOptions o;
      o.precision = p;
      auto prog = compile(model(body), o, store);
      QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
      const std::string text = (*prog)->explain();
      for (const char* k :
           {"onednn.conv_fwd_bf16", "onednn.conv_bwd_data_bf16", "onednn.conv_bwd_weights_bf16"})
        QVERIFY2((text.find(std::string(k) + " [") != std::string::npos) ==
                     (p == Precision::BF16 && none.empty()),
                 qPrintable(QString("%1 under %2").arg(k).arg(precisionName(p))));
      if (p == Precision::BF16 && !none.empty())
        QVERIFY2(text.find(none) != std::string::npos, text.c_str());
    }
  }
};

QTEST_APPLESS_MAIN(TestBf16Kernels)
#include "tst_bf16_kernels.moc"
