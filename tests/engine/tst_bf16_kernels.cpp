// bf16 on the CPU's bf16 units: autocast keeping the convolutions blocked, the matrix
// products reading their operands from 16-bit storage, the convolutions computing on
// bf16 operands; and, on a CPU without bf16 units, the float kernels and why.
#include <QtTest>
#include <cmath>

#include "engine/compiler/compile.h"
#include "kernels/core/functors.h"
#include "kernels/core/rng.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

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
  // operands are both rounded read them from 16-bit storage (CastBf16), half the bytes;
  // elsewhere they stay rounded floats, and --explain says which.
  void bf16OperandsAreStoredInSixteenBits() {
    // Whether this CPU has the kernel: asked of the registry, as the pass asks.
    KernelSig probe;
    Attrs none;
    probe.attrs = &none;
    probe.in = {TensorDesc{{8, 8}, DType::BF16, {}}, TensorDesc{{8, 8}, DType::BF16, {}}};
    probe.out = {TensorDesc{{8, 8}, DType::F32, {}}};
    bool cpuHasBf16 = false;
    for (const KernelImpl& k : *KernelRegistry::instance().list("MatMul", DeviceKind::Cpu))
      cpuHasBf16 = cpuHasBf16 || k.decline(probe).empty();
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
    const auto readers = consumers(g);
    int casts = 0;
    for (const Node& n : g.nodes) {
      if (n.op->name != "CastBf16") continue;
      casts += 1;
      const Value& v = g.values[n.outputs[0]];
      QCOMPARE(v.desc.dtype, DType::BF16);
      QCOMPARE(bytesOf(v.desc), numel(v.desc.shape) * 2);
      for (NodeId r : readers[n.outputs[0]]) {
        const Node& m = g.nodes[size_t(r)];
        QVERIFY2(m.op->name == "Linear" || m.op->name == "MatMul", m.name.c_str());
        for (size_t k = 0; k < 2; ++k) QCOMPARE(g.values[m.inputs[k]].desc.dtype, DType::BF16);
      }
    }
    // Forward: both layers' input and weight; backward: fc2's input gradient (fc1 has
    // none to give) and both weight gradients read the output gradients and inputs.
    QCOMPARE(casts > 0, cpuHasBf16);
    const std::string text = (*prog)->explain();
    QVERIFY2(text.find(cpuHasBf16 ? "read bf16 operands from 16-bit storage"
                                  : "no matrix op has a bf16 kernel") != std::string::npos,
             text.c_str());
    if (cpuHasBf16) QVERIFY2(text.find("onednn.bf16_gemm") != std::string::npos, text.c_str());
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
