// Every op through the one harness: forward against a double-precision reference,
// gradients against finite differences; plus the behaviour of Dropout, whose
// forward is random by design.
#include <omp.h>

#include <QtTest>
#include <cstring>

#include "cpu_isa.h"
#include "engine/compiler/compile.h"
#include "kernels/core/pool_math.h"
#include "kernels/core/rng.h"
#include "op_cases.h"
#include "op_harness.h"

using namespace harness;
using netloom::Attrs;

namespace {

// NaN through every kernel that takes a configuration ------------------------------

// Runs each kernel of `op`'s CPU list that accepts the signature on `ins` (plain
// values, converted to each input's layout) and hands its first output, back in
// plain layout, to `check` with the kernel's name.
void eachKernel(const std::string& op, const netloom::Attrs& given,
                const std::vector<netloom::TensorDesc>& in, const netloom::TensorDesc& out,
                const std::vector<std::vector<float>>& ins,
                const std::function<void(const std::string&, const std::vector<float>&)>& check) {
  using namespace netloom;
  auto attrs = resolveAttrs(*OpRegistry::instance().find(op), given);
  QVERIFY2(attrs.ok(), attrs.ok() ? "" : attrs.error().message.c_str());
  KernelSig sig{&*attrs, in, {out}, &cpuDevice()};
  bool blocked = false;
  for (const TensorDesc& d : in) blocked = blocked || d.layout != Layout::Plain;
  int ran = 0;
  for (const KernelImpl& k : *KernelRegistry::instance().list(op, DeviceKind::Cpu)) {
    if ((blocked && !k.anyLayout) || !k.decline(sig).empty()) continue;
    std::vector<std::vector<float>> data;
    std::vector<TensorRef> refs;
    for (size_t i = 0; i < in.size(); ++i) {
      data.emplace_back(size_t(storedElements(in[i])));
      TensorDesc plain = in[i];
      plain.layout = Layout::Plain;
      if (in[i].layout == Layout::Plain)
        data.back() = ins[i];
      else
        QVERIFY(convertLayout(plain, ins[i].data(), in[i], data.back().data()));
    }
    for (size_t i = 0; i < in.size(); ++i)
      refs.push_back({data[i].data(), in[i].shape, DType::F32, DeviceId{}});
    // A padded block's padding starts as NaN: the kernel must write it zero.
    std::vector<float> y(size_t(storedElements(out)), std::nanf("")), plainY(numel(out.shape));
    TensorRef yRef{y.data(), out.shape, DType::F32, DeviceId{}};
    StepContext ctx;
    KernelIO io{refs.data(), &yRef, refs.size(), 1, &ctx};
    k.prepare(sig)(io);
    if (paddedBlocked(out)) {
      const int64_t c = out.shape[1], blocks = paddedChannels(c) / 16;
      const int64_t area = out.shape[2] * out.shape[3];
      for (size_t i = 0; i < y.size(); ++i) {
        const int64_t channel = int64_t(i) / (16 * area) % blocks * 16 + int64_t(i) % 16;
        if (channel >= c)
          QVERIFY2(y[i] == 0.f,
                   qPrintable(
                       QString("%1: padding at %2 holds %3").arg(k.name.c_str()).arg(i).arg(y[i])));
      }
    }
    TensorDesc plainOut = out;
    plainOut.layout = Layout::Plain;
    if (out.layout == Layout::Plain)
      plainY = y;
    else
      QVERIFY(convertLayout(out, y.data(), plainOut, plainY.data()));
    check(k.name, plainY);
    ++ran;
  }
  QVERIFY2(ran > 0, op.c_str());
}

// The float64 reference of the ops paddedBlocksMatchPlainAndStayZero runs, on NCHW
// inputs: x of shape xs, pooled 2×2 with stride 2 to ps; rounded to float as stored.
// Empty for Dropout, whose mask only its kernel knows.
std::vector<float> paddedReference(const std::string& op, const std::vector<std::vector<float>>& in,
                                   const netloom::Shape& xs, const netloom::Shape& ps) {
  std::vector<float> y;
  auto each = [&](auto f) {
    for (size_t i = 0; i < in[0].size(); ++i) y.push_back(float(f(i)));
  };
  auto x = [&](size_t k, size_t i) { return double(in[k][i]); };
  if (op == "ReLU") each([&](size_t i) { return std::max(x(0, i), 0.0); });
  if (op == "Tanh") each([&](size_t i) { return std::tanh(x(0, i)); });
  if (op == "Identity") each([&](size_t i) { return x(0, i); });
  if (op == "Add") each([&](size_t i) { return x(0, i) + x(1, i); });
  if (op == "ReLUGrad") each([&](size_t i) { return x(1, i) > 0 ? x(0, i) : 0.0; });
  if (op != "MaxPool2d" && op != "AvgPool2d" && op != "MaxPool2dGrad") return y;
  const int64_t planes = xs[0] * xs[1], h = xs[2], w = xs[3], oh = ps[2], ow = ps[3];
  const std::vector<float>& src = op == "MaxPool2dGrad" ? in[1] : in[0];
  if (op == "MaxPool2dGrad") y.assign(src.size(), 0.f);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        double best = -INFINITY, sum = 0;
        int64_t at = -1;  // the first largest, in scan order; NaN wins
        for (int64_t dy = 0; dy < 2; ++dy)
          for (int64_t dx = 0; dx < 2; ++dx) {
            const int64_t i = (p * h + oy * 2 + dy) * w + ox * 2 + dx;
            const double v = src[size_t(i)];
            sum += v;
            if (std::isnan(best)) continue;
            if (std::isnan(v) || v > best) best = v, at = i;
          }
        const int64_t o = (p * oh + oy) * ow + ox;
        if (op == "MaxPool2d") y.push_back(float(best));
        if (op == "AvgPool2d") y.push_back(float(sum / 4));
        if (op == "MaxPool2dGrad") y[size_t(at)] += in[0][size_t(o)];
      }
  return y;
}

netloom::TensorDesc desc(const Shape& shape, netloom::Layout layout = netloom::Layout::Plain) {
  netloom::TensorDesc d;
  d.shape = shape;
  d.layout = layout;
  return d;
}

// A kernel prepared on `planned` threads and run once on `ran` (the thread count is
// put back after), its float output of sig.out[0]'s shape, NaN where it wrote nothing.
std::vector<float> launchOn(const netloom::KernelImpl& kernel, const netloom::KernelSig& sig,
                            int planned, int ran, std::vector<netloom::TensorRef> in) {
  using namespace netloom;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(planned);
  KernelFn launch = kernel.prepare(sig);
  omp_set_num_threads(ran);
  std::vector<float> y(size_t(numel(sig.out[0].shape)), std::nanf(""));
  TensorRef out{y.data(), sig.out[0].shape, DType::F32, {}};
  StepContext ctx;
  launch(KernelIO{in.data(), &out, in.size(), 1, &ctx});
  omp_set_num_threads(threads);
  return y;
}

// Float `a` is `b`, NaN included.
bool same(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : a == b;
}

}  // namespace

class TestOps : public QObject {
  Q_OBJECT

 private slots:
  void forwardAndGradient_data() {
    QTest::addColumn<int>("index");
    auto cases = allCases();
    for (size_t i = 0; i < cases.size(); ++i) QTest::newRow(cases[i].first.c_str()) << int(i);
  }
  void forwardAndGradient() {
    QFETCH(int, index);
    run(allCases()[index].second);
  }

  void everyUserOpHasACase() {
    // A new op must add a case here: the registry and the harness stay in step.
    std::set<std::string> covered;
    for (const auto& [_, c] : allCases()) covered.insert(c.op);
    for (const netloom::OpDef* op : netloom::OpRegistry::instance().all()) {
      if (op->role == netloom::OpRole::Internal || op->role == netloom::OpRole::Optimizer ||
          op->external || op->name == "Dropout")
        continue;
      QVERIFY2(covered.count(op->name), ("no harness case for op " + op->name).c_str());
    }
  }

  void everyAttributeIsDocumented() {
    for (const netloom::OpDef* op : netloom::OpRegistry::instance().all()) {
      QVERIFY2(!op->doc.empty(), op->name.c_str());
      for (const auto& a : op->attrs) QVERIFY2(!a.doc.empty(), (op->name + "." + a.name).c_str());
    }
  }

  // The CPU's matrix product (oneDNN's, prepared per shape, cut into one band per
  // core when large and run on more than one thread) against a double-precision sum,
  // and the same bits on 2 to 4 threads, also where the plan was made for another
  // count: bands split the output, never the inner dimension. Products
  // with each operand transposed or not, one too small to split, an empty inner
  // dimension (zeros), and shapes whose bands are uneven.
  void productsMatchTheReferenceOnEveryThreadCount_data() {
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("ta");
    QTest::addColumn<bool>("tb");
    QTest::newRow("x·Wᵀ, row bands") << 192 << 256 << 300 << false << true;
    QTest::newRow("dYᵀ·X, column bands") << 100 << 784 << 64 << true << false;
    QTest::newRow("dY·W, uneven") << 250 << 130 << 170 << false << false;
    QTest::newRow("both transposed") << 70 << 300 << 200 << true << true;
    QTest::newRow("small") << 64 << 10 << 128 << false << true;
    QTest::newRow("an MLP's first layer") << 64 << 256 << 784 << false << true;
    QTest::newRow("no inner dimension") << 5 << 7 << 0 << false << false;
  }
  void productsMatchTheReferenceOnEveryThreadCount() {
    using namespace netloom;
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(bool, ta);
    QFETCH(bool, tb);
    const Shape as = ta ? Shape{k, m} : Shape{m, k}, bs = tb ? Shape{n, k} : Shape{k, n};
    Rng rng(17);
    std::vector<float> a(size_t(numel(as))), b(size_t(numel(bs)));
    for (auto* v : {&a, &b})
      for (float& e : *v) e = float(rng.uniform(-1, 1));
    Attrs attrs;
    attrs.set("trans_a", ta);
    attrs.set("trans_b", tb);
    KernelSig sig{&attrs, {desc(as), desc(bs)}, {desc({m, n})}, &cpuDevice()};
    const KernelImpl& kernel = KernelRegistry::instance().list("MatMul", DeviceKind::Cpu)->front();
    QCOMPARE(QString::fromStdString(kernel.name), QString("onednn.sgemm"));
    std::vector<std::vector<float>> results;
    // Prepared and run on 1, 2 and 3 threads, then prepared on 2 and run on 1 and 4.
    for (auto [planned, ran] : {std::pair{1, 1}, {2, 2}, {3, 3}, {2, 1}, {2, 4}})
      results.push_back(launchOn(kernel, sig, planned, ran,
                                 {{a.data(), as, DType::F32, {}}, {b.data(), bs, DType::F32, {}}}));
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double want = 0, scale = 0;
        for (int p = 0; p < k; ++p) {
          const double x = ta ? a[size_t(p * m + i)] : a[size_t(i * k + p)];
          const double y = tb ? b[size_t(j * k + p)] : b[size_t(p * n + j)];
          want += x * y;
          scale += std::fabs(x * y);
        }
        const float got = results[0][size_t(i * n + j)];
        QVERIFY2(std::fabs(got - want) <= 1e-5 * (scale + 1),
                 qPrintable(QString("C[%1][%2] = %3, want %4").arg(i).arg(j).arg(got).arg(want)));
      }
    // Planned on 2 threads, run on 1 or 4: the bands of the plan, as on 2.
    for (size_t r = 2; r < results.size(); ++r)
      QVERIFY2(std::memcmp(results[1].data(), results[r].data(), results[1].size() * 4) == 0,
               qPrintable(QString("thread case %1 gave other bits than two threads").arg(r)));
  }

  // Linear's bias and ReLU run on each band of the output right after the thread that
  // computed it: every element gets them once, whichever way the product is cut
  // (columns where the batch is short, rows where it is long, one band when small),
  // the same bits on 2 and 3 threads.
  void linearBiasAndReluReachEveryBand_data() {
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("relu");
    QTest::newRow("column bands, ReLU") << 64 << 256 << 784 << true;
    QTest::newRow("row bands, ReLU") << 300 << 40 << 200 << true;
    QTest::newRow("column bands, bias only") << 33 << 130 << 300 << false;
    QTest::newRow("one band") << 64 << 10 << 128 << true;
  }
  void linearBiasAndReluReachEveryBand() {
    using namespace netloom;
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(bool, relu);
    Rng rng(23);
    std::vector<float> x(size_t(m) * size_t(k)), w(size_t(n) * size_t(k));
    std::vector<float> bias(static_cast<size_t>(n));
    for (auto* v : {&x, &w, &bias})
      for (float& e : *v) e = float(rng.uniform(-1, 1));
    Attrs attrs;
    attrs.set("activation", std::string(relu ? "relu" : "none"));
    KernelSig sig{&attrs, {desc({m, k}), desc({n, k}), desc({n})}, {desc({m, n})}, &cpuDevice()};
    const KernelImpl& kernel = KernelRegistry::instance().list("Linear", DeviceKind::Cpu)->front();
    QCOMPARE(QString::fromStdString(kernel.name), QString("onednn.sgemm+bias"));
    std::vector<std::vector<float>> results;
    for (int t : {1, 2, 3})
      results.push_back(launchOn(kernel, sig, t, t,
                                 {{x.data(), Shape{m, k}, DType::F32, {}},
                                  {w.data(), Shape{n, k}, DType::F32, {}},
                                  {bias.data(), Shape{n}, DType::F32, {}}}));
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double want = bias[size_t(j)], scale = std::fabs(want);
        for (int p = 0; p < k; ++p) {
          const double term = double(x[size_t(i * k + p)]) * double(w[size_t(j * k + p)]);
          want += term;
          scale += std::fabs(term);
        }
        if (relu) want = std::max(want, 0.0);
        const float got = results[0][size_t(i * n + j)];
        QVERIFY2(std::fabs(got - want) <= 1e-5 * (scale + 1),
                 qPrintable(QString("y[%1][%2] = %3, want %4").arg(i).arg(j).arg(got).arg(want)));
      }
    QVERIFY2(std::memcmp(results[1].data(), results[2].data(), results[1].size() * 4) == 0,
             "3 threads gave other bits than 2");
  }

  // Dropout keeps about 1-p of the elements, scaled by 1/(1-p); its gradient uses
  // the same mask; evaluation is the identity.
  void dropoutMaskAndScale() {
    using namespace netloom;
    proto::ModelDef m;
    auto* in = m.add_nodes();
    in->set_name("x");
    in->set_op("Input");
    (*in->mutable_attrs())["shape"] = attrToProto(Shape{1000});
    auto* d = m.add_nodes();
    d->set_name("drop");
    d->set_op("Dropout");
    d->add_inputs("x");
    (*d->mutable_attrs())["p"] = attrToProto(0.3);
    auto* t = m.add_nodes();
    t->set_name("t");
    t->set_op("Input");
    (*t->mutable_attrs())["shape"] = attrToProto(Shape{1000});
    (*t->mutable_attrs())["field"] = attrToProto(std::string("t"));
    auto* l = m.add_nodes();
    l->set_name("loss");
    l->set_op("MSELoss");
    l->add_inputs("drop");
    l->add_inputs("t");
    CompileOptions o;
    o.batch = 4;
    o.updateParams = false;
    o.gradientsOf = {"x"};
    o.keep = {"drop"};
    ParamStore store;
    auto prog = compile(m, o, store);
    QVERIFY2(prog.ok(), prog.ok() ? "" : prog.error().message.c_str());
    Program& p = **prog;
    const TensorRef* x = p.input("x");
    const TensorRef* tt = p.input("t");
    for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = 1.0f, tt->f32()[i] = 0.0f;
    StepContext ctx;
    ctx.step = 1;
    ctx.seed = 9;
    p.run(ctx);
    const float* y = p.refs[p.graph.findValue("drop")].f32();
    const float* g = p.refs[p.gradients.at("x")].f32();
    int64_t kept = 0, n = x->numel();
    for (int64_t i = 0; i < n; ++i) {
      QVERIFY(y[i] == 0.0f || std::fabs(y[i] - 1.0f / 0.7f) < 1e-6f);
      kept += y[i] != 0.0f;
      // d/dx mean((y - 0)²) = 2·y·(dy/dx)/n, and dy/dx is the same mask and scale.
      QVERIFY(std::fabs(g[i] - 2.0f * y[i] * (y[i] != 0 ? 1.0f / 0.7f : 0.0f) / float(n)) < 1e-6f);
    }
    QVERIFY2(std::fabs(double(kept) / double(n) - 0.7) < 0.03, qPrintable(QString::number(kept)));
    // Another step draws another mask.
    std::vector<float> first(y, y + n);
    ctx.step = 2;
    for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = 1.0f, tt->f32()[i] = 0.0f;
    p.run(ctx);
    QVERIFY(!std::equal(first.begin(), first.end(), y));
    // Inputs are fed before every run: the arena reuses their memory after last use.
    for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = 1.0f, tt->f32()[i] = 0.0f;
    ctx.training = false;
    p.run(ctx);
    for (int64_t i = 0; i < n; ++i) QCOMPARE(y[i], 1.0f);
  }

  // As in PyTorch, NaN survives ReLU (plain, fused into Linear, and its gradient),
  // Dropout (dropped or not) and max pooling (its maximum, and its gradient, which
  // goes to the NaN), in every kernel of their lists and in both activation layouts.
  void nanPropagatesAsInPyTorch_data() {
    QTest::addColumn<bool>("blocked");
    QTest::newRow("nchw") << false;
    QTest::newRow("nChw16c") << true;
  }
  void nanPropagatesAsInPyTorch() {
    using namespace netloom;
    QFETCH(bool, blocked);
    if (blocked && !oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);
    const Shape xs{2, 16, 4, 4}, ys{2, 16, 2, 2};
    Layout layout = blocked ? Layout::Blocked16 : Layout::Plain;
    std::vector<float> x(numel(xs));
    Rng rng(9);
    for (float& v : x) v = float(rng.uniform(-2, 2));
    const float nan = std::nanf("");
    x[5] = nan;                 // sample 0, channel 0, row 1, column 1
    x[16 * 16 + 3 * 16] = nan;  // sample 1, channel 0, row 3, column 0
    x[17] = -INFINITY;
    auto nanAt = [&](int64_t i) { return std::isnan(x[i]); };

    eachKernel("ReLU", {}, {desc(xs, layout)}, desc(xs, layout), {x},
               [&](const std::string& k, const std::vector<float>& y) {
                 for (size_t i = 0; i < y.size(); ++i)
                   QVERIFY2(same(y[i], x[i] > 0 || nanAt(int64_t(i)) ? x[i] : 0.f), k.c_str());
               });
    std::vector<float> ones(x.size(), 1.f);
    eachKernel("ReLUGrad", {}, {desc(xs, layout), desc(xs, layout)}, desc(xs, layout), {ones, x},
               [&](const std::string& k, const std::vector<float>& dx) {
                 for (size_t i = 0; i < dx.size(); ++i)
                   QVERIFY2(dx[i] == (x[i] > 0 || nanAt(int64_t(i)) ? 1.f : 0.f), k.c_str());
               });

    Attrs drop;
    drop.set("p", 0.5);
    eachKernel("Dropout", drop, {desc(xs, layout)}, desc(xs, layout), {x},
               [&](const std::string& k, const std::vector<float>& y) {
                 for (size_t i = 0; i < y.size(); ++i)
                   QVERIFY2(std::isfinite(x[i]) ? y[i] == 0 || y[i] == 2 * x[i]
                                                : !std::isfinite(y[i]),  // -inf·0 is NaN too
                            k.c_str());
               });

    Attrs pool;
    pool.set("kernel_size", std::vector<int64_t>{2});
    eachKernel("MaxPool2d", pool, {desc(xs, layout)}, desc(ys, layout), {x},
               [&](const std::string& k, const std::vector<float>& y) {
                 for (int64_t p = 0; p < 32; ++p)
                   for (int64_t o = 0; o < 4; ++o) {
                     int64_t r = o / 2 * 2, c = o % 2 * 2, base = p * 16;
                     float want = -INFINITY;
                     for (int64_t i : {r * 4 + c, r * 4 + c + 1, r * 4 + c + 4, r * 4 + c + 5})
                       want =
                           std::isnan(want) || nanAt(base + i) ? nan : std::max(want, x[base + i]);
                     QVERIFY2(same(y[p * 4 + o], want),
                              qPrintable(QString("%1: plane %2 window %3: %4, want %5")
                                             .arg(k.c_str())
                                             .arg(p)
                                             .arg(o)
                                             .arg(y[p * 4 + o])
                                             .arg(want)));
                   }
               });
    std::vector<float> dy(numel(ys), 1.f);
    eachKernel("MaxPool2dGrad", pool, {desc(ys, layout), desc(xs, layout)}, desc(xs, layout),
               {dy, x}, [&](const std::string& k, const std::vector<float>& dx) {
                 QVERIFY2(dx[5] == 1.f && dx[0] == 0.f && dx[1] == 0.f && dx[4] == 0.f, k.c_str());
                 QVERIFY2(dx[16 * 16 + 3 * 16] == 1.f && dx[16 * 16 + 3 * 16 + 1] == 0.f,
                          k.c_str());
               });
    if (blocked) return;

    // Linear with its ReLU fused: a NaN weight makes its output column NaN.
    Attrs lin;
    lin.set("out_features", int64_t(4));
    lin.set("activation", std::string("relu"));
    std::vector<float> in(2 * 3, -1.f), w(4 * 3, 1.f), b(4, 0.f);
    w[2 * 3 + 1] = nan;
    eachKernel("Linear", lin, {desc({2, 3}), desc({4, 3}), desc({4})}, desc({2, 4}), {in, w, b},
               [&](const std::string& k, const std::vector<float>& y) {
                 for (int64_t r = 0; r < 2; ++r)
                   for (int64_t o = 0; o < 4; ++o)
                     QVERIFY2(same(y[r * 4 + o], o == 2 ? nan : 0.f), k.c_str());
               });
  }

  // Max pooling in nChw16c, every kernel of both lists that takes it, against the window arithmetic
  // the GPU shares (pool_math.h): overlapping windows, padding, ceil_mode windows cut
  // short, ties (values on a coarse grid), NaN and -inf. dy holds small integers, so
  // every order of summing it is exact and the gradients must match bit for bit.
  void maxPoolingBlockedMatchesTheWindowMath_data() {
    QTest::addColumn<Shape>("x");
    QTest::addColumn<Shape>("window");  // kernel h, w, stride h, w, padding h, w, ceil_mode
    QTest::newRow("2x2 s2") << Shape{2, 32, 6, 6} << Shape{2, 2, 2, 2, 0, 0, 0};
    QTest::newRow("3x3 s2 p1, overlapping") << Shape{2, 16, 7, 7} << Shape{3, 3, 2, 2, 1, 1, 0};
    QTest::newRow("3x3 s1 p1") << Shape{1, 16, 5, 6} << Shape{3, 3, 1, 1, 1, 1, 0};
    QTest::newRow("2x2 s2 ceil_mode") << Shape{1, 32, 5, 5} << Shape{2, 2, 2, 2, 0, 0, 1};
    QTest::newRow("3x2 s2x1 p1x0 ceil_mode") << Shape{2, 16, 8, 5} << Shape{3, 2, 2, 1, 1, 0, 1};
  }
  void maxPoolingBlockedMatchesTheWindowMath() {
    using namespace netloom;
    if (!oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);  // only oneDNN pools in nChw16c
    QFETCH(Shape, x);
    QFETCH(Shape, window);
    Attrs a;
    a.set("kernel_size", Shape{window[0], window[1]});
    a.set("stride", Shape{window[2], window[3]});
    a.set("padding", Shape{window[4], window[5]});
    a.set("ceil_mode", window[6] != 0);
    Window2d w;
    QVERIFY(poolWindow(a, x, w).empty());
    const Shape ys{w.n, w.c, w.oh, w.ow};
    Rng rng(31);
    std::vector<float> xv(numel(x)), dy(numel(ys));
    for (float& v : xv) v = float(int(rng.uniform(0, 5))) - 2.f;  // many ties
    for (float& v : dy) v = float(int(rng.uniform(0, 7))) - 3.f;
    xv[7] = std::nanf("");
    xv[xv.size() / 2] = -INFINITY;
    xv[xv.size() - 3] = std::nanf("");
    const int64_t planes = w.n * w.c, inArea = w.ih * w.iw, outArea = w.oh * w.ow;
    std::vector<float> wantY(dy.size()), wantDx(xv.size());
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = xv.data() + p * inArea;
      for (int64_t oy = 0; oy < w.oh; ++oy)
        for (int64_t ox = 0; ox < w.ow; ++ox)
          wantY[p * outArea + oy * w.ow + ox] = pool::forwardAt(xp, w, oy, ox, false, true);
      for (int64_t iy = 0; iy < w.ih; ++iy)
        for (int64_t ix = 0; ix < w.iw; ++ix)
          wantDx[p * inArea + iy * w.iw + ix] =
              pool::gradientAt(dy.data() + p * outArea, xp, w, iy, ix, false, true);
    }
    const Layout b = Layout::Blocked16;
    QStringList ran;
    eachKernel("MaxPool2d", a, {desc(x, b)}, desc(ys, b), {xv},
               [&](const std::string& k, const std::vector<float>& y) {
                 ran << k.c_str();
                 for (size_t i = 0; i < y.size(); ++i)
                   QVERIFY2(same(y[i], wantY[i]), qPrintable(QString("%1: y[%2] %3, want %4")
                                                                 .arg(k.c_str())
                                                                 .arg(i)
                                                                 .arg(y[i])
                                                                 .arg(wantY[i])));
               });
    eachKernel("MaxPool2dGrad", a, {desc(ys, b), desc(x, b)}, desc(x, b), {dy, xv},
               [&](const std::string& k, const std::vector<float>& dx) {
                 ran << k.c_str();
                 for (size_t i = 0; i < dx.size(); ++i)
                   QVERIFY2(dx[i] == wantDx[i], qPrintable(QString("%1: dx[%2] %3, want %4")
                                                               .arg(k.c_str())
                                                               .arg(i)
                                                               .arg(dx[i])
                                                               .arg(wantDx[i])));
               });
    QVERIFY2(ran.size() >= 2, qPrintable(ran.join(", ")));
  }

  // Kernels that take nChw16c with a padded last block (6 channels in 16) give what
  // the float64 reference gives and write the padding zero (eachKernel checks it); an
  // activation that is not zero at zero declines the padded layout.
  void paddedBlocksMatchPlainAndStayZero_data() {
    QTest::addColumn<QString>("op");
    QTest::addColumn<int>("inputs");
    QTest::addColumn<bool>("pooled");  // the output is x pooled 2x2
    QTest::newRow("ReLU") << "ReLU" << 1 << false;
    QTest::newRow("ReLUGrad") << "ReLUGrad" << 2 << false;
    QTest::newRow("Add") << "Add" << 2 << false;
    QTest::newRow("Tanh") << "Tanh" << 1 << false;
    QTest::newRow("Dropout") << "Dropout" << 1 << false;
    QTest::newRow("Identity") << "Identity" << 1 << false;
    QTest::newRow("MaxPool2d") << "MaxPool2d" << 1 << true;
    QTest::newRow("AvgPool2d") << "AvgPool2d" << 1 << true;
    QTest::newRow("MaxPool2dGrad") << "MaxPool2dGrad" << 2 << true;
  }
  void paddedBlocksMatchPlainAndStayZero() {
    using namespace netloom;
    QFETCH(QString, op);
    QFETCH(int, inputs);
    QFETCH(bool, pooled);
    if (pooled && !oneDnnRunsAvx512()) QSKIP(kNoBlockedLayouts);  // only oneDNN pools in nChw16c
    const Shape xs{2, 6, 6, 4}, ps{2, 6, 3, 2};
    Attrs a;
    if (pooled) a.set("kernel_size", Shape{2, 2});
    if (op == "Dropout") a.set("p", 0.5);
    std::vector<Shape> shapes(size_t(inputs), xs);
    if (op == "MaxPool2dGrad") shapes[0] = ps;  // dy, then x
    const Shape ys = pooled && op != "MaxPool2dGrad" ? ps : xs;
    Rng rng(7);
    std::vector<std::vector<float>> values;
    for (const Shape& s : shapes) {
      values.emplace_back(size_t(numel(s)));
      for (float& v : values.back()) v = float(rng.uniform(-2, 2));
    }
    if (op == "MaxPool2d") values[0][5] = std::nanf("");  // oneDNN's way out, the reference's
    std::vector<TensorDesc> plainIn, paddedIn;
    for (const Shape& s : shapes) {
      plainIn.push_back(desc(s));
      paddedIn.push_back(desc(s, Layout::Blocked16));
    }
    // The float64 reference; Dropout's mask is the kernel's own draw, so its plain
    // kernel is its reference.
    std::vector<float> want = paddedReference(op.toStdString(), values, xs, ps);
    if (op == "Dropout")
      eachKernel(op.toStdString(), a, plainIn, desc(ys), values,
                 [&](const std::string&, const std::vector<float>& y) {
                   if (want.empty()) want = y;
                 });
    QCOMPARE(int64_t(want.size()), numel(ys));
    QStringList ran;
    eachKernel(
        op.toStdString(), a, paddedIn, desc(ys, Layout::Blocked16), values,
        [&](const std::string& k, const std::vector<float>& y) {
          ran << k.c_str();
          for (size_t i = 0; i < y.size(); ++i)
            QVERIFY2(
                same(y[i], want[i]) ||
                    std::fabs(y[i] - want[i]) <= 1e-6f * (1 + std::fabs(want[i])),
                qPrintable(
                    QString("%1: y[%2] %3, want %4").arg(k.c_str()).arg(i).arg(y[i]).arg(want[i])));
        });
    qInfo("%s", qPrintable(ran.join(", ")));
  }

  void sigmoidDeclinesPaddedBlocks() {
    using namespace netloom;
    const Shape xs{2, 6, 3, 3};
    Attrs a;
    KernelSig padded{
        &a, {desc(xs, Layout::Blocked16)}, {desc(xs, Layout::Blocked16)}, &cpuDevice()};
    KernelSig whole = padded;
    whole.in[0].shape[1] = whole.out[0].shape[1] = 16;
    const KernelImpl& k = KernelRegistry::instance().list("Sigmoid", DeviceKind::Cpu)->front();
    QVERIFY(k.anyLayout);
    QVERIFY(k.decline(whole).empty());
    const std::string why = k.decline(padded);
    QVERIFY2(why.find("padding") != std::string::npos, why.c_str());
    for (const char* op : {"ReLU", "Tanh", "GELU"}) {
      auto attrs = resolveAttrs(*OpRegistry::instance().find(op), a);
      QVERIFY(attrs.ok());
      padded.attrs = &*attrs;
      QVERIFY2(
          KernelRegistry::instance().list(op, DeviceKind::Cpu)->front().decline(padded).empty(),
          op);
    }
  }

  void badAttributesNameTheAttribute() {
    using netloom::Attrs;
    const auto* linear = netloom::OpRegistry::instance().find("Linear");
    Attrs a;
    a.set("out_features", int64_t(0));
    auto r = netloom::resolveAttrs(*linear, a);
    QVERIFY(!r.ok());
    QVERIFY2(r.error().message.find("out_features") != std::string::npos,
             r.error().message.c_str());
    Attrs b;
    b.set("out_features", int64_t(3));
    b.set("unitz", int64_t(3));
    r = netloom::resolveAttrs(*linear, b);
    QVERIFY(!r.ok());
    QVERIFY(r.error().message.find("unitz") != std::string::npos);
    Attrs c;
    r = netloom::resolveAttrs(*linear, c);
    QVERIFY(!r.ok());
    QVERIFY(r.error().message.find("required") != std::string::npos);
  }
};

QTEST_APPLESS_MAIN(TestOps)
#include "tst_ops.moc"
