// bf16 storage on the CUDA backend, checked without a GPU: the kernels registered for
// it (the products' own bf16 kernels, CastBf16, a widened twin of every other kernel)
// and what a widened twin does, with copies standing in for the device's.
#include <QtTest>

#include "kernels/core/device.h"
#include "kernels/core/functors.h"
#include "kernels/core/kernel.h"
#include "kernels/core/widen.h"
#include "kernels/cuda/plans.h"

using namespace netloom;
using namespace netloom::cuda;

class TestCudaBf16 : public QObject {
  Q_OBJECT

 private slots:
  // bf16 storage on the GPU, as registered (no GPU needed): the products have kernels
  // of their own for bf16 operands, which refuse any other types by name; CastBf16 casts
  // float to bf16 only; and every other CUDA kernel has a widened twin after it.
  void bf16KernelsAreRegistered() {
    const KernelRegistry& r = KernelRegistry::instance();
    Attrs none, linear;
    linear.set("activation", std::string("none"));
    none.set("trans_a", false);
    none.set("trans_b", false);
    auto sig = [](const Attrs& a, std::vector<DType> in, DType out) {
      KernelSig s;
      s.attrs = &a;
      for (DType t : in) s.in.push_back(TensorDesc{{4, 4}, t, {DeviceKind::Cuda, 0}});
      if (in.size() == 3) s.in[2].shape = {4};
      s.out = {TensorDesc{{4, 4}, out, {DeviceKind::Cuda, 0}}};
      return s;
    };
    const DType F = DType::F32, B = DType::BF16;
    for (const char* op : {"Linear", "MatMul"}) {
      const Attrs& a = std::string(op) == "Linear" ? linear : none;
      const KernelImpl* half = nullptr;
      for (const KernelImpl& k : *r.list(op, DeviceKind::Cuda))
        if (k.halfTensors && !k.widened) half = &k;
      QVERIFY2(half, op);
      QCOMPARE(QString::fromStdString(half->name).endsWith("_bf16"), true);
      QCOMPARE(QString::fromStdString(half->decline(sig(a, {F, F}, F))),
               QString("takes bf16 operands only"));
      QCOMPARE(QString::fromStdString(half->decline(sig(a, {B, F}, F))),
               QString("takes bf16 operands only"));
      QCOMPARE(QString::fromStdString(half->decline(sig(a, {B, B}, B))),
               QString("writes float32 only"));
      if (std::string(op) == "Linear")
        QCOMPARE(QString::fromStdString(half->decline(sig(a, {B, B, B}, F))),
                 QString("takes a float bias only"));
    }
    const KernelImpl& cast = r.list("CastBf16", DeviceKind::Cuda)->front();
    QVERIFY(cast.halfTensors && !cast.widened);
    QVERIFY(cast.decline(sig(none, {F}, F)).size() > 0);
    QVERIFY(cast.decline(sig(none, {B}, B)).size() > 0);
    QVERIFY(cast.decline(sig(none, {F}, B)).empty());
    int lists = 0;
    for (const std::string& op : r.ops(DeviceKind::Cuda)) {
      const std::vector<KernelImpl>& list = *r.list(op, DeviceKind::Cuda);
      size_t own = 0, twins = 0;
      for (const KernelImpl& k : list) (k.widened ? twins : own) += 1;
      QVERIFY2(twins == own, op.c_str());  // one twin for each
      for (size_t k = 0; k < own; ++k)
        QCOMPARE(QString::fromStdString(list[own + k].name),
                 QString::fromStdString(list[k].name + "+bf16"));
      lists += 1;
    }
    QVERIFY(lists > 20);
  }

  // Conv2d and its gradients have bf16 kernels of their own (cuDNN on bf16 tensors), which
  // refuse by name, before asking cuDNN: a signature without bf16 tensors, a bf16 bias and
  // uneven padding (staged in float). The transposed convolutions have none.
  void bf16ConvolutionsAreRegistered() {
    const KernelRegistry& r = KernelRegistry::instance();
    auto attrs = [](int64_t k, bool same) {
      Attrs a;
      a.set("out_channels", int64_t(6));
      a.set("kernel_size", std::vector<int64_t>{k});
      a.set("stride", std::vector<int64_t>{1});
      a.set("padding", std::vector<int64_t>{k / 2});
      a.set("dilation", std::vector<int64_t>{1});
      a.set("groups", int64_t(1));
      a.set("same_padding", same);
      return a;
    };
    const Attrs odd = attrs(3, false), even = attrs(2, true);
    const DType F = DType::F32, B = DType::BF16;
    auto sig = [](const Attrs& a, std::vector<std::pair<Shape, DType>> in, Shape out, DType o) {
      KernelSig s;
      s.attrs = &a;
      for (auto& [shape, t] : in) s.in.push_back(TensorDesc{shape, t, {DeviceKind::Cuda, 0}});
      s.out = {TensorDesc{out, o, {DeviceKind::Cuda, 0}}};
      return s;
    };
    const Shape x{2, 4, 8, 8}, w{6, 4, 3, 3}, y{2, 6, 8, 8};
    for (const char* op : {"Conv2d", "Conv2dGradInput", "Conv2dGradWeight", "ConvTranspose2d"}) {
      const KernelImpl* half = nullptr;
      for (const KernelImpl& k : *r.list(op, DeviceKind::Cuda))
        if (k.halfTensors && !k.widened) half = &k;
      if (std::string(op) == "ConvTranspose2d") {
        QVERIFY2(!half, op);
        continue;
      }
      QVERIFY2(half, op);
      QVERIFY(QString::fromStdString(half->name).endsWith("_bf16"));
    }
    const KernelImpl* conv = nullptr;
    for (const KernelImpl& k : *r.list("Conv2d", DeviceKind::Cuda))
      if (k.halfTensors && !k.widened) conv = &k;
    QCOMPARE(QString::fromStdString(conv->decline(sig(odd, {{x, F}, {w, F}, {{6}, F}}, y, F))),
             QString("is for bf16 tensors"));
    QCOMPARE(QString::fromStdString(conv->decline(sig(odd, {{x, B}, {w, F}, {{6}, B}}, y, B))),
             QString("takes a float bias only"));
    const Shape w2{6, 4, 2, 2};
    QCOMPARE(QString::fromStdString(conv->decline(sig(even, {{x, B}, {w2, F}}, y, B))),
             QString("pads unevenly, which is staged in float"));
  }

  // A bf16 convolution's copies: one for each role whose op tensor is float, each as many
  // bf16 values as the role's tensor holds, on the libraries' alignment, one after another.
  void bf16ConvolutionCopiesFitTheirTensors() {
    ConvPlan p;
    Attrs a;
    a.set("out_channels", int64_t(6));
    a.set("kernel_size", std::vector<int64_t>{3});
    a.set("stride", std::vector<int64_t>{2});
    a.set("padding", std::vector<int64_t>{1});
    a.set("dilation", std::vector<int64_t>{1});
    a.set("groups", int64_t(2));
    QVERIFY(convPlan(a, {{2, 4, 9, 9}, {6, 2, 3, 3}}, false, ConvPass::Forward, p).empty());
    const ConvBf16Copies all = convBf16Copies(p, false, false, false);
    QCOMPARE(all.xElements, int64_t(2 * 4 * 9 * 9));
    QCOMPARE(all.wElements, int64_t(6 * 2 * 3 * 3));
    QCOMPARE(all.yElements, int64_t(2 * 6 * 5 * 5));
    QCOMPARE(all.x, int64_t(0));
    QCOMPARE(all.w, alignLibrary(all.xElements * 2));
    QCOMPARE(all.y, all.w + alignLibrary(all.wElements * 2));
    QCOMPARE(all.bytes, all.y + alignLibrary(all.yElements * 2));
    const ConvBf16Copies weightOnly = convBf16Copies(p, true, false, true);
    QCOMPARE(weightOnly.x, int64_t(-1));
    QCOMPARE(weightOnly.y, int64_t(-1));
    QCOMPARE(weightOnly.w, int64_t(0));
    QCOMPARE(weightOnly.bytes, alignLibrary(all.wElements * 2));
    QCOMPARE(convBf16Copies(p, true, true, true).bytes, int64_t(0));
  }

  // A widened twin (what the GPU's are, its copies on the kernel's stream) runs the float
  // kernel on its bf16 inputs made float, through the device's copies: one widening per
  // bf16 input, one narrowing per bf16 output, none for float tensors; the result is the
  // float kernel's (a concatenation), rounded as CastBf16 rounds.
  void widenedTwinsCopyThroughTheDevice() {
    const KernelImpl* concat = nullptr;  // a float kernel of the CPU's
    for (const KernelImpl& k : *KernelRegistry::instance().list("Concat", DeviceKind::Cpu))
      if (!k.widened && !k.halfTensors) concat = &k;
    QVERIFY(concat);
    int widened = 0, narrowed = 0;
    const KernelImpl twin = widenedTwin(*concat, [&](const KernelSig&) {
      return HalfCopies{[&](const uint16_t* x, float* y, int64_t n) {
                          widened += 1;
                          for (int64_t i = 0; i < n; ++i) y[i] = fn::FromBf16{}(x[i]);
                        },
                        [&](const float* x, uint16_t* y, int64_t n) {
                          narrowed += 1;
                          for (int64_t i = 0; i < n; ++i) y[i] = fn::ToBf16{}(x[i]);
                        }};
    });
    Attrs axis;
    axis.set("axis", int64_t(0));
    KernelSig s;
    s.attrs = &axis;
    s.device = &cpuDevice();
    s.in = {TensorDesc{{6}, DType::BF16, {}}, TensorDesc{{6}, DType::F32, {}}};
    s.out = {TensorDesc{{12}, DType::BF16, {}}};
    QVERIFY(twin.widened && twin.halfTensors);
    QVERIFY2(twin.decline(s).empty(), twin.decline(s).c_str());
    KernelSig floats = s;
    floats.in[0].dtype = floats.out[0].dtype = DType::F32;
    QVERIFY(!twin.decline(floats).empty());  // for bf16 tensors only
    const float av[6] = {1.f, -2.5f, 3.25f, 0.f, 1e-3f, 7.f};
    const float bv[6] = {0.1f, 0.2f, -0.3f, 4.f, 1e-3f, 1.f / 3};
    std::vector<uint16_t> a(6), y(12, 0xffff);
    for (int i = 0; i < 6; ++i) a[size_t(i)] = fn::ToBf16{}(av[i]);
    std::vector<char> workspace(size_t(twin.workspace(s)));
    std::vector<TensorRef> in{{a.data(), {6}, DType::BF16, {}},
                              {const_cast<float*>(bv), {6}, DType::F32, {}}};
    TensorRef out{y.data(), {12}, DType::BF16, {}};
    StepContext ctx;
    KernelIO io{in.data(), &out, 2, 1, &ctx};
    io.workspace = workspace.data();
    io.workspaceBytes = int64_t(workspace.size());
    twin.prepare(s)(io);
    QCOMPARE(widened, 1);
    QCOMPARE(narrowed, 1);
    for (int i = 0; i < 6; ++i) {
      QCOMPARE(y[size_t(i)], a[size_t(i)]);
      QCOMPARE(y[size_t(6 + i)], fn::ToBf16{}(bv[i]));
    }
  }
};

QTEST_APPLESS_MAIN(TestCudaBf16)
#include "tst_cuda_bf16.moc"
