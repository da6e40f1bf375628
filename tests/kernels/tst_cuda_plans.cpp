// The CUDA backend's library plans, checked without a GPU: each plan is run through
// a plain model of the library call it describes (cuBLASLt's column-major product
// with its epilogue, cuDNN's symmetrically padded convolution passes and pooling),
// with the staging copies the kernels make, and the result is compared with the CPU
// reference kernel of the same op. What a plan declines, how algorithms are chosen and
// the per-channel conversions of batch normalisation are checked directly.
#include <QtTest>
#include <cmath>
#include <random>

#include "kernels/core/device.h"
#include "kernels/core/geometry.h"
#include "kernels/core/kernel.h"
#include "kernels/cuda/plans.h"

using namespace netloom;
using namespace netloom::cuda;

namespace {

using Floats = std::vector<float>;

Floats randomFloats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Floats v(static_cast<size_t>(n));
  for (float& f : v) f = u(gen);
  return v;
}

// Runs the CPU's reference kernel (the last of its list) of `op` on host tensors, which
// it may update in place; returns its outputs.
std::vector<Floats> cpuKernel(const std::string& op, const Attrs& attrs,
                              const std::vector<Shape>& shapes, std::vector<Floats>& inputs,
                              const std::vector<Shape>& outShapes) {
  KernelSig sig;
  sig.attrs = &attrs;
  sig.device = &cpuDevice();
  for (const Shape& s : shapes) sig.in.push_back(TensorDesc{s, DType::F32, {}});
  for (const Shape& s : outShapes) sig.out.push_back(TensorDesc{s, DType::F32, {}});
  const auto* list = KernelRegistry::instance().list(op, DeviceKind::Cpu);
  if (!list) qFatal("no CPU kernel for %s", op.c_str());
  const KernelImpl* reference = nullptr;  // the last of its own (the widened twins follow)
  for (const KernelImpl& k : *list)
    if (!k.widened) reference = &k;
  KernelFn fn = reference->prepare(sig);
  std::vector<Floats> outs;
  std::vector<TensorRef> in, out;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(TensorRef{inputs[i].data(), shapes[i], DType::F32, {}});
  for (const Shape& s : outShapes) outs.emplace_back(static_cast<size_t>(numel(s)));
  for (size_t i = 0; i < outs.size(); ++i)
    out.push_back(TensorRef{outs[i].data(), outShapes[i], DType::F32, {}});
  StepContext ctx;
  KernelIO io{in.data(), out.data(), in.size(), out.size(), &ctx};
  fn(io);
  return outs;
}

Floats cpuReference(const std::string& op, const Attrs& attrs, const std::vector<Shape>& shapes,
                    std::vector<Floats> inputs, const Shape& outShape) {
  return cpuKernel(op, attrs, shapes, inputs, {outShape})[0];
}

void expectClose(const Floats& got, const Floats& want, const char* what) {
  QCOMPARE(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-4f * (1.f + std::fabs(want[i])))
      QFAIL(qPrintable(QString("%1: element %2 is %3, the CPU kernel gives %4")
                           .arg(what)
                           .arg(i)
                           .arg(got[i])
                           .arg(want[i])));
}

// cuBLASLt's product as documented: D = epilogue(op(A)·op(B)), column-major.
Floats ltProduct(const GemmPlan& p, const Floats& a, const Floats& b, const float* bias) {
  Floats d(size_t(p.d.ld * p.d.cols));
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < p.k; ++k) {
        float av = p.transA ? a[size_t(k + i * p.a.ld)] : a[size_t(i + k * p.a.ld)];
        float bv = p.transB ? b[size_t(j + k * p.b.ld)] : b[size_t(k + j * p.b.ld)];
        acc += av * bv;
      }
      if (p.epilogue == Epilogue::Bias || p.epilogue == Epilogue::ReluBias) acc += bias[i];
      if (p.epilogue == Epilogue::Relu || p.epilogue == Epilogue::ReluBias)
        acc = std::max(acc, 0.f);
      d[size_t(i + j * p.d.ld)] = acc;
    }
  return d;
}

// The matrices cuBLASLt is told about hold exactly the stored operands.
void expectLayoutsConsistent(const GemmPlan& p) {
  QCOMPARE(p.transA ? p.a.cols : p.a.rows, p.m);
  QCOMPARE(p.transA ? p.a.rows : p.a.cols, p.k);
  QCOMPARE(p.transB ? p.b.cols : p.b.rows, p.k);
  QCOMPARE(p.transB ? p.b.rows : p.b.cols, p.n);
  QCOMPARE(p.d.rows, p.m);
  QCOMPARE(p.d.cols, p.n);
  for (const LtMatrix* l : {&p.a, &p.b, &p.d}) QVERIFY(l->ld >= l->rows);
}

// cuDNN's convolution passes as documented: cross-correlation of x (N×Ci×H×W, here the
// staged input) with the filter, padding padH/padW on both sides.
struct CudnnConvModel {
  const ConvPlan& p;
  int64_t cig() const { return p.ci / p.groups; }
  int64_t cog() const { return p.co / p.groups; }
  // Calls f(xIndex, wIndex, yIndex) for every tap that reads inside the input.
  template <class F>
  void forEachTap(F f) const {
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t o = 0; o < p.co; ++o)
        for (int64_t c = 0; c < cig(); ++c)
          for (int64_t oy = 0; oy < p.oh; ++oy)
            for (int64_t ox = 0; ox < p.ow; ++ox)
              for (int64_t ky = 0; ky < p.kh; ++ky)
                for (int64_t kx = 0; kx < p.kw; ++kx) {
                  int64_t iy = oy * p.strideH - p.padH + ky * p.dilationH;
                  int64_t ix = ox * p.strideW - p.padW + kx * p.dilationW;
                  if (iy < 0 || iy >= p.stagedH || ix < 0 || ix >= p.stagedW) continue;
                  int64_t ci = o / cog() * cig() + c;
                  f(((n * p.ci + ci) * p.stagedH + iy) * p.stagedW + ix,
                    ((o * cig() + c) * p.kh + ky) * p.kw + kx,
                    ((n * p.co + o) * p.oh + oy) * p.ow + ox);
                }
  }
  Floats forward(const Floats& x, const Floats& w) const {
    Floats y(size_t(p.n * p.co * p.oh * p.ow));
    forEachTap([&](int64_t xi, int64_t wi, int64_t yi) {
      y[size_t(yi)] += x[size_t(xi)] * w[size_t(wi)];
    });
    return y;
  }
  Floats backwardData(const Floats& w, const Floats& dy) const {
    Floats dx(size_t(p.n * p.ci * p.stagedH * p.stagedW));
    forEachTap([&](int64_t xi, int64_t wi, int64_t yi) {
      dx[size_t(xi)] += w[size_t(wi)] * dy[size_t(yi)];
    });
    return dx;
  }
  Floats backwardFilter(const Floats& x, const Floats& dy) const {
    Floats dw(size_t(p.co * cig() * p.kh * p.kw));
    forEachTap([&](int64_t xi, int64_t wi, int64_t yi) {
      dw[size_t(wi)] += x[size_t(xi)] * dy[size_t(yi)];
    });
    return dw;
  }
};

Floats copied(const Floats& src, int64_t planes, const RegionCopy& r) {
  Floats dst(size_t(planes * r.dstH * r.dstW));
  for (size_t i = 0; i < dst.size(); ++i) {
    int64_t from = r.source(int64_t(i));
    dst[i] = from >= 0 ? src[size_t(from)] : 0.f;
  }
  return dst;
}

// What the CUDA kernel computes for a plan: staging, the one cuDNN call, the bias.
Floats runConvPlan(const ConvPlan& p, const std::vector<Floats>& in, const Shape& outShape) {
  CudnnConvModel model{p};
  int64_t planes = p.n * p.ci;
  auto input = [&](int slot) {
    const Floats& x = in[size_t(slot)];
    return p.staged() ? copied(x, planes, p.stageIn()) : x;
  };
  Floats out;
  switch (p.call) {
    case ConvCall::Forward: out = model.forward(input(p.x), in[size_t(p.w)]); break;
    case ConvCall::BackwardData:
      out = model.backwardData(in[size_t(p.w)], in[size_t(p.y)]);
      if (p.staged()) out = copied(out, planes, p.stageOut());
      break;
    case ConvCall::BackwardFilter: out = model.backwardFilter(input(p.x), in[size_t(p.y)]); break;
  }
  if (p.bias >= 0) {
    int64_t c = outShape[1], area = outShape[2] * outShape[3];
    for (size_t i = 0; i < out.size(); ++i)
      out[i] += in[size_t(p.bias)][size_t(int64_t(i) / area % c)];
  }
  return out;
}

Attrs convAttrs(int64_t out, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                int64_t groups) {
  Attrs a;
  a.set("out_channels", out);
  a.set("kernel_size", std::vector<int64_t>{k});
  a.set("stride", std::vector<int64_t>{stride});
  a.set("padding", std::vector<int64_t>{pad});
  a.set("dilation", std::vector<int64_t>{dilation});
  a.set("groups", groups);
  return a;
}

// cuDNN's pooling forward as documented: symmetric padding, which max pooling never
// picks and the include-padding average counts in a divisor of kh·kw.
Floats cudnnPool(const PoolPlan& p, const Floats& x) {
  Floats y(size_t(p.n * p.c * p.oh * p.ow));
  for (int64_t plane = 0; plane < p.n * p.c; ++plane)
    for (int64_t oy = 0; oy < p.oh; ++oy)
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        float best = -INFINITY, sum = 0.f;
        int64_t count = 0;
        for (int64_t ky = 0; ky < p.kh; ++ky)
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            int64_t iy = oy * p.strideH - p.padH + ky, ix = ox * p.strideW - p.padW + kx;
            if (iy < 0 || iy >= p.ih || ix < 0 || ix >= p.iw) continue;
            float v = x[size_t((plane * p.ih + iy) * p.iw + ix)];
            best = std::max(best, v), sum += v, ++count;
          }
        float& out = y[size_t((plane * p.oh + oy) * p.ow + ox)];
        out = p.mode == PoolMode::Max                 ? best
              : p.mode == PoolMode::AverageIncludePad ? sum / float(p.kh * p.kw)
                                                      : sum / float(count);
      }
  return y;
}

Attrs poolAttrs(int64_t k, int64_t stride, int64_t pad, bool ceil, bool includePad = true) {
  Attrs a;
  a.set("kernel_size", std::vector<int64_t>{k});
  a.set("stride", std::vector<int64_t>{stride});
  a.set("padding", std::vector<int64_t>{pad});
  a.set("ceil_mode", ceil);
  a.set("count_include_pad", includePad);
  return a;
}

}  // namespace

class TestCudaPlans : public QObject {
  Q_OBJECT

 private slots:
  void matmulMatchesCpu_data() {
    QTest::addColumn<bool>("ta");
    QTest::addColumn<bool>("tb");
    QTest::newRow("NN") << false << false;
    QTest::newRow("TN") << true << false;
    QTest::newRow("NT") << false << true;
    QTest::newRow("TT") << true << true;
  }
  void matmulMatchesCpu() {
    QFETCH(bool, ta);
    QFETCH(bool, tb);
    int64_t m = 5, n = 3, k = 7;
    Shape a = ta ? Shape{k, m} : Shape{m, k}, b = tb ? Shape{n, k} : Shape{k, n};
    Floats av = randomFloats(m * k, 1), bv = randomFloats(k * n, 2);
    GemmPlan p = matmulPlan(a, b, ta, tb);
    expectLayoutsConsistent(p);
    QCOMPARE(p.epilogue, Epilogue::Default);
    Attrs attrs;
    attrs.set("trans_a", ta);
    attrs.set("trans_b", tb);
    Floats want = cpuReference("MatMul", attrs, {a, b}, {av, bv}, {m, n});
    // cuBLASLt's A is our B and its B our A; its column-major D is our row-major Y.
    expectClose(ltProduct(p, bv, av, nullptr), want, "MatMul");
  }

  // Linear over a 3-D input (rows are every leading dimension), with each epilogue.
  void linearEpiloguesMatchCpu() {
    Shape x{2, 3, 6}, w{4, 6}, bias{4};
    Floats xv = randomFloats(36, 3), wv = randomFloats(24, 4), bv = randomFloats(4, 5);
    for (bool hasBias : {false, true})
      for (bool relu : {false, true}) {
        GemmPlan p = linearPlan(x, w, hasBias, relu);
        expectLayoutsConsistent(p);
        QCOMPARE(p.m, 4);  // the bias runs along D's rows: one per output feature
        QCOMPARE(p.epilogue, hasBias ? (relu ? Epilogue::ReluBias : Epilogue::Bias)
                                     : (relu ? Epilogue::Relu : Epilogue::Default));
        Attrs attrs;
        attrs.set("activation", std::string(relu ? "relu" : "none"));
        std::vector<Shape> shapes{x, w};
        std::vector<Floats> in{xv, wv};
        if (hasBias) shapes.push_back(bias), in.push_back(bv);
        Floats want = cpuReference("Linear", attrs, shapes, in, {2, 3, 4});
        expectClose(ltProduct(p, wv, xv, bv.data()), want, "Linear");
      }
  }

  void convolutionsMatchCpu_data() {
    QTest::addColumn<bool>("transposed");
    QTest::addColumn<QString>("shape");  // N,C,H,W of the op's input
    QTest::addColumn<int>("out");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("pad");
    QTest::addColumn<int>("dilation");
    QTest::addColumn<int>("groups");
    QTest::addColumn<bool>("same");
    QTest::addColumn<int>("outputPadding");
    QTest::addColumn<bool>("staged");
    auto row = [](const char* name, bool t, const char* shape, int out, int k, int s, int p, int d,
                  int g, bool same, int op, bool staged) {
      QTest::newRow(name) << t << shape << out << k << s << p << d << g << same << op << staged;
    };
    row("3x3 pad 1", false, "2,4,7,7", 6, 3, 1, 1, 1, 1, false, 0, false);
    row("strided dilated grouped", false, "2,4,9,8", 6, 3, 2, 0, 2, 2, false, 0, false);
    row("same, even kernel", false, "1,3,6,6", 2, 4, 1, 0, 1, 1, true, 0, true);
    row("same, stride 2", false, "2,2,8,8", 4, 3, 2, 0, 1, 1, true, 0, true);
    row("depthwise", false, "1,4,5,5", 4, 3, 1, 1, 1, 4, false, 0, false);
    row("transposed, output_padding 1", true, "2,4,4,4", 3, 3, 2, 1, 1, 1, false, 1, true);
    row("transposed, pad 0, output_padding 1", true, "1,2,3,3", 2, 3, 2, 0, 1, 1, false, 1, true);
    row("transposed, pad 1, output_padding 2", true, "1,2,3,4", 3, 3, 3, 1, 1, 1, false, 2, true);
    row("transposed, rectangular", true, "2,3,3,5", 2, 4, 2, 1, 1, 1, false, 1, true);
    row("transposed, grouped", true, "1,4,3,3", 6, 2, 2, 0, 1, 2, false, 0, false);
    row("transposed, dilated", true, "1,2,4,4", 3, 3, 1, 2, 2, 1, false, 0, false);
  }
  void convolutionsMatchCpu() {
    QFETCH(bool, transposed);
    QFETCH(QString, shape);
    QFETCH(int, out);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    QFETCH(int, pad);
    QFETCH(int, dilation);
    QFETCH(int, groups);
    QFETCH(bool, same);
    QFETCH(int, outputPadding);
    QFETCH(bool, staged);
    Shape x;
    for (const QString& d : shape.split(',')) x.push_back(d.toLongLong());
    Attrs a = convAttrs(out, kernel, stride, pad, dilation, groups);
    if (transposed)
      a.set("output_padding", std::vector<int64_t>{outputPadding});
    else
      a.set("same_padding", same);
    Shape w = transposed ? Shape{x[1], out / groups, kernel, kernel}
                         : Shape{out, x[1] / groups, kernel, kernel};
    ConvPlan p;
    QCOMPARE(QString::fromStdString(convPlan(a, {x, w, {out}}, transposed, ConvPass::Forward, p)),
             QString());
    QCOMPARE(p.staged(), staged);
    // The output size cuDNN computes from the descriptors it is given.
    QCOMPARE((p.stagedH + 2 * p.padH - (p.kh - 1) * p.dilationH - 1) / p.strideH + 1, p.oh);
    QCOMPARE((p.stagedW + 2 * p.padW - (p.kw - 1) * p.dilationW - 1) / p.strideW + 1, p.ow);
    Shape y = transposed ? Shape{p.n, p.ci, p.ih, p.iw} : Shape{p.n, p.co, p.oh, p.ow};
    Floats xv = randomFloats(numel(x), 10), wv = randomFloats(numel(w), 11);
    Floats bv = randomFloats(out, 12), dyv = randomFloats(numel(y), 13);
    std::string family = transposed ? "ConvTranspose2d" : "Conv2d";

    expectClose(runConvPlan(p, {xv, wv, bv}, y),
                cpuReference(family, a, {x, w, {out}}, {xv, wv, bv}, y), "forward");
    for (ConvPass pass : {ConvPass::GradInput, ConvPass::GradWeight}) {
      ConvPlan g;
      QCOMPARE(QString::fromStdString(convPlan(a, {y, x, w}, transposed, pass, g)), QString());
      ConvPlan sameCall = g;  // the forward's convolution, another call on it
      sameCall.call = p.call;
      QCOMPARE(sameCall.key(), p.key());
      QCOMPARE(g.bias, -1);
      bool dx = pass == ConvPass::GradInput;
      Shape outShape = dx ? x : w;
      std::string op = family + (dx ? "GradInput" : "GradWeight");
      expectClose(runConvPlan(g, {dyv, xv, wv}, outShape),
                  cpuReference(op, a, {y, x, w}, {dyv, xv, wv}, outShape), op.c_str());
    }
  }

  void convolutionCallsAndRoles() {
    Attrs a = convAttrs(4, 3, 1, 1, 1, 1);
    Shape x{1, 2, 5, 5}, w{4, 2, 3, 3}, tw{2, 4, 3, 3}, y{1, 4, 5, 5};
    ConvPlan p;
    convPlan(a, {x, w, {4}}, false, ConvPass::Forward, p);
    QCOMPARE(p.call, ConvCall::Forward);
    QCOMPARE(p.bias, 2);
    QVERIFY(!p.writesInput());
    convPlan(a, {y, x, w}, false, ConvPass::GradInput, p);
    QCOMPARE(p.call, ConvCall::BackwardData);
    QVERIFY(p.writesInput());
    convPlan(a, {x, tw, {4}}, true, ConvPass::Forward, p);
    QCOMPARE(p.call, ConvCall::BackwardData);  // a transposed convolution writes the input side
    QCOMPARE(p.bias, 2);
    QCOMPARE(p.ci, 4);
    QCOMPARE(p.co, 2);
    convPlan(a, {y, x, tw}, true, ConvPass::GradInput, p);
    QCOMPARE(p.call, ConvCall::Forward);
    QCOMPARE(p.x, 0);  // dy of the transposed op is the convolution's input
    convPlan(a, {y, x, tw}, true, ConvPass::GradWeight, p);
    QCOMPARE(p.call, ConvCall::BackwardFilter);
    QCOMPARE(p.x, 0);
    QCOMPARE(p.y, 1);
  }

  void hugeTensorsAreDeclined() {
    Attrs a = convAttrs(8, 3, 1, 1, 1, 1);
    ConvPlan p;
    std::string why = convPlan(a, {{4096, 8, 512, 512}, {8, 8, 3, 3}}, false, ConvPass::Forward, p);
    QVERIFY2(why.find("2^31") != std::string::npos, why.c_str());
    SoftmaxPlan s;
    QVERIFY(!softmaxPlan({1 << 16, 1 << 16}, -1, s).empty());
  }

  void poolingMatchesCpu_data() {
    QTest::addColumn<bool>("average");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("pad");
    QTest::addColumn<bool>("ceil");
    QTest::addColumn<bool>("includePad");
    QTest::newRow("max 2/2") << false << 2 << 2 << 0 << false << true;
    QTest::newRow("max 3/2 pad 1") << false << 3 << 2 << 1 << false << true;
    QTest::newRow("max ceil adding nothing") << false << 3 << 2 << 0 << true << true;
    QTest::newRow("avg 3/2 pad 1 include") << true << 3 << 2 << 1 << false << true;
    QTest::newRow("avg 3/2 pad 1 exclude") << true << 3 << 2 << 1 << false << false;
    QTest::newRow("avg 3/1 pad 1 ceil") << true << 3 << 1 << 1 << true << true;
  }
  void poolingMatchesCpu() {
    QFETCH(bool, average);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    QFETCH(int, pad);
    QFETCH(bool, ceil);
    QFETCH(bool, includePad);
    Shape x{2, 3, 7, 7};
    Attrs a = poolAttrs(kernel, stride, pad, ceil, includePad);
    PoolPlan p;
    QCOMPARE(QString::fromStdString(poolPlan(a, x, average, p)), QString());
    QCOMPARE(p.mode, !average     ? PoolMode::Max
                     : includePad ? PoolMode::AverageIncludePad
                                  : PoolMode::AverageExcludePad);
    // cuDNN sizes the output rounding down.
    QCOMPARE((p.ih + 2 * p.padH - p.kh) / p.strideH + 1, p.oh);
    Floats xv = randomFloats(numel(x), 20);
    Shape y{p.n, p.c, p.oh, p.ow};
    expectClose(cudnnPool(p, xv),
                cpuReference(average ? "AvgPool2d" : "MaxPool2d", a, {x}, {xv}, y), "pooling");
  }

  void poolingDeclinesCeilWindowsPastThePadding() {
    PoolPlan p;
    for (bool average : {false, true}) {
      std::string why = poolPlan(poolAttrs(3, 2, 0, true), {1, 1, 6, 6}, average, p);
      QVERIFY2(why.find("ceil_mode") != std::string::npos, why.c_str());
    }
  }

  void batchNormWorkspaces() {
    Attrs a;
    a.set("eps", 1e-3);
    a.set("momentum", 0.25);
    BatchNormPlan p;
    QCOMPARE(QString::fromStdString(batchNormPlan(a, {8, 3, 5, 5}, true, false, p)), QString());
    QCOMPARE(p.s, 25);
    QCOMPARE(p.eps, 1e-3);
    QCOMPARE(p.momentum, 0.25);
    QCOMPARE(p.onesOffset, -1);
    QCOMPARE(p.workspaceBytes, kLibraryAlignment);
    QCOMPARE(QString::fromStdString(batchNormPlan(a, {8, 100}, false, false, p)), QString());
    QCOMPARE(p.s, 1);
    QCOMPARE(p.onesOffset, 512);  // 100 floats rounded up to 256-byte pieces
    QCOMPARE(p.zerosOffset, 1024);
    QCOMPARE(p.workspaceBytes, 1536);
    batchNormPlan(a, {8, 100}, false, true, p);
    QCOMPARE(p.zerosOffset, -1);  // the backward takes no shift
    QCOMPARE(p.workspaceBytes, 1024);
    // Past cuDNN's batch limit the kernel declines, saying so, rather than run.
    QCOMPARE(QString::fromStdString(batchNormPlan(a, {65535, 4}, true, false, p)), QString());
    QString past = QString::fromStdString(batchNormPlan(a, {65536, 4}, true, false, p));
    QVERIFY2(past.contains("at most 65535 samples"), qPrintable(past));
  }

  // The running statistics the CUDA kernel updates from cuDNN's batch mean and the
  // variance recovered from its inverse standard deviation, against the CPU's.
  void batchNormRunningStatisticsMatchCpu_data() {
    QTest::addColumn<QString>("shape");
    QTest::newRow("N×C×H×W") << "8,3,5,5";
    QTest::newRow("N×C") << "6,4";
    QTest::newRow("one element per channel") << "1,4";
  }
  void batchNormRunningStatisticsMatchCpu() {
    QFETCH(QString, shape);
    Shape x;
    for (const QString& d : shape.split(',')) x.push_back(d.toLongLong());
    Attrs a;
    a.set("eps", 1e-5);
    a.set("momentum", 0.1);
    BatchNormPlan p;
    QCOMPARE(QString::fromStdString(batchNormPlan(a, x, false, false, p)), QString());
    Shape ch{x[1]};
    Floats rm0 = randomFloats(x[1], 30), rv0 = randomFloats(x[1], 31);
    for (float& v : rv0) v = std::fabs(v) + 0.5f;
    std::vector<Floats> in{randomFloats(numel(x), 32), rm0, rv0};
    std::vector<Floats> out = cpuKernel("BatchNorm", a, {x, ch, ch}, in, {x, ch, ch});
    const Floats &mean = out[1], &var = out[2];
    for (int64_t c = 0; c < x[1]; ++c) {
      float invStd = VarianceToInvStd{p.eps}(var[size_t(c)]);
      float recovered = InvStdToVariance{p.eps}(invStd);
      QVERIFY(std::fabs(recovered - var[size_t(c)]) <= 1e-6f * (var[size_t(c)] + 1e-5f) * 4);
      QCOMPARE(p.runningMean()(rm0[size_t(c)], mean[size_t(c)]), in[1][size_t(c)]);
      QCOMPARE(p.runningVariance()(rv0[size_t(c)], var[size_t(c)]), in[2][size_t(c)]);
    }
  }

  void batchNormStatisticsConvert() {
    for (double eps : {1e-5, 1e-3})
      for (float var : {0.f, 1e-4f, 0.37f, 2.5f, 1e3f}) {
        float invStd = VarianceToInvStd{eps}(var);
        QCOMPARE(invStd, float(1.0 / std::sqrt(double(var) + eps)));
        float back = InvStdToVariance{eps}(invStd);
        QVERIFY2(std::fabs(back - var) <= 1e-6f * (var + float(eps)) * 4,
                 qPrintable(QString("%1 came back as %2").arg(var).arg(back)));
        QVERIFY(back >= 0.f);
      }
  }

  void softmaxAxes() {
    SoftmaxPlan p;
    QCOMPARE(QString::fromStdString(softmaxPlan({4, 10}, -1, p)), QString());
    QCOMPARE(p.n, 4);
    QCOMPARE(p.c, 10);
    QCOMPARE(p.h, 1);
    softmaxPlan({2, 3, 4, 5}, 1, p);
    QCOMPARE(p.n, 2);
    QCOMPARE(p.c, 3);
    QCOMPARE(p.h, 20);
    softmaxPlan({2, 3, 4, 5}, -2, p);
    QCOMPARE(p.n, 6);
    QCOMPARE(p.c, 4);
    QCOMPARE(p.h, 5);
  }

  void regionCopyPadsAndCrops() {
    Floats src{1, 2, 3, 4, 5, 6};  // two planes of 1 × 3
    RegionCopy grow{1, 3, 2, 4};
    Floats grown = copied(src, 2, grow);
    QCOMPARE(grown, (Floats{1, 2, 3, 0, 0, 0, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0}));
    QCOMPARE(copied(grown, 2, RegionCopy{2, 4, 1, 3}), src);
    QCOMPARE(copied(src, 2, RegionCopy{1, 3, 1, 2}), (Floats{1, 2, 4, 5}));
    RegionCopy shifted{1, 3, 2, 3, 1, 1};  // one zero row above, one zero column left
    QCOMPARE(copied(src, 2, shifted), (Floats{0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 4, 5}));
    QCOMPARE(copied(copied(src, 2, shifted), 2, RegionCopy{2, 3, 1, 3, -1, -1}),
             (Floats{1, 2, 0, 4, 5, 0}));
  }

  void algorithmChoice() {
    auto cand = [](int algo, bool ok, bool det, bool tc, int64_t ws) {
      return AlgoCandidate{algo, ok, det, tc, ws};
    };
    std::vector<AlgoCandidate> c = {cand(7, false, true, false, 0), cand(6, true, false, true, 0),
                                    cand(5, true, false, false, 1 << 30),
                                    cand(4, true, false, false, 100),
                                    cand(3, true, true, false, 200)};
    // Unavailable, TF32 and too large a workspace are skipped; the rest in rank order.
    QCOMPARE(chooseAlgorithm(c, false, 1 << 20), 3);
    QCOMPARE(chooseAlgorithm(c, true, 1 << 20), 4);
    // Under autocast TF32 is exact on the inputs, and the best-ranked such one is taken.
    QCOMPARE(chooseAlgorithm(c, false, 1 << 20, true), 1);
    QCOMPARE(chooseAlgorithm(c, true, 1 << 20, true), 4);
    c.pop_back();
    QCOMPARE(chooseAlgorithm(c, true, 1 << 20), 3);  // no deterministic one: the best other
    QCOMPARE(chooseAlgorithm(c, false, 50), -1);
  }
};

QTEST_APPLESS_MAIN(TestCudaPlans)
#include "tst_cuda_plans.moc"
