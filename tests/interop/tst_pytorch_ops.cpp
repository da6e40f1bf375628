// The PyTorch export of the ops the model tests do not reach: small projects of
// average pools (ceil_mode, count_include_pad), asymmetric "same" padding, transposed
// convolutions, Concat, Reshape, LayerNorm, GELU (exact and tanh), LeakyReLU,
// Softmax, Upsample, Sigmoid and Tanh. Each model's outputs in PyTorch, from a
// NetLoom run's weights, equal predict()'s. Needs Debian's /usr/bin/python3 with
// torch; without it the Python side is skipped, and said so.
#include <QtTest>
#include <algorithm>

#include "../common/cli.h"
#include "engine/graph/op.h"
#include "engine/graph/torch_lowering.h"
#include "engine/interop/pytorch_export.h"
#include "engine/io/project_file.h"
#include "engine/train/trainer.h"
#include "python.h"

namespace {

using netloom::testing::havePython;
using netloom::testing::Outcome;
using netloom::testing::runPython;
using netloom::testing::runTrain;

// Loads the weights strictly and compares softmax(forward()) with NetLoom's
// probabilities, and log_softmax(forward()) with their logarithms: the outputs
// themselves up to one constant per sample, which the softmax of many features
// would otherwise flatten.
constexpr const char* kCheck = R"PY(
import sys
import torch
out_dir, weights, probs_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, out_dir)
import model as M
import train as T
m = M.build_model()
M.load_weights(m, weights)
m.eval()
data = dict(T.DATA)
data["train_limit"], data["test_limit"] = 256, n
_, _, test, norm = T.load_data(data, T.TRAIN["seed"])
x = T.normalise(test.x, norm).reshape(len(test), *M.INPUT_SHAPE)
with torch.no_grad():
    out = m(x)
if isinstance(out, tuple):
    out = out[0]
out = out.reshape(len(test), -1).double()
raw = bytearray(open(probs_path, "rb").read())
want = torch.frombuffer(raw, dtype=torch.float32).reshape(out.shape).double()
diff = (torch.softmax(out, dim=1) - want).abs().max().item()
log_diff = (torch.log_softmax(out, dim=1) - want.log()).abs().max().item()
print(f"{out.shape[1]} outputs: max abs diff {diff:.3g}, of log-probabilities {log_diff:.3g}")
sys.exit(0 if diff <= 1e-5 and log_diff <= 1e-4 else 1)
)PY";

// Fashion-MNIST images into `nodes`, whose node "out" is the output: the loss reads
// it as class scores (it has at least ten), so a run can train and save weights.
QString project(const QString& nodes) {
  return R"(
name: "ops"
model {
  name: "ops_net"
  nodes { name: "image" op: "Input" attrs { key: "shape" value { ints { values: [1, 28, 28] } } } }
  nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } } attrs { key: "dtype" value { s: "int32" } } }
)" + nodes +
         R"(
  nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["out", "label"] }
  outputs: "out"
}
data { idx {} normalization { kind: FIXED scale: 0.00392156862745098 mean: 0.2860 std: 0.3530 } }
train { loss: "loss" optimizer { kind: SGD lr: 0.01 } batch_size: 32 epochs: 1 seed: 5 }
)";
}

QString node(const QString& name, const QString& op, const QString& inputs,
             const QString& attrs = {}) {
  return "  nodes { name: \"" + name + "\" op: \"" + op + "\" inputs: " + inputs + " " + attrs +
         " }\n";
}

QString ints(const QString& key, const QString& values) {
  return "attrs { key: \"" + key + "\" value { ints { values: [" + values + "] } } }";
}
QString integer(const QString& key, int v) {
  return "attrs { key: \"" + key + "\" value { i: " + QString::number(v) + " } }";
}
QString real(const QString& key, double v) {
  return "attrs { key: \"" + key + "\" value { f: " + QString::number(v) + " } }";
}
QString flag(const QString& key, bool v) {
  return "attrs { key: \"" + key + "\" value { b: " + (v ? "true" : "false") + " } }";
}
QString text(const QString& key, const QString& v) {
  return "attrs { key: \"" + key + "\" value { s: \"" + v + "\" } }";
}

}  // namespace

class TestPytorchOps : public QObject {
  Q_OBJECT

  // Trains a step for weights, exports, and compares PyTorch's outputs with predict()'s.
  void compare(const QString& nodes) {
    QTemporaryDir dir;
    const QString path = dir.filePath("ops.nlproj");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(project(nodes).toUtf8());
    f.close();
    const QString weights = dir.filePath("w.safetensors"), out = dir.filePath("pytorch");
    Outcome t = runTrain({path, "--max-steps", "1", "--train-limit", "64", "--test-limit", "32",
                          "--save-weights", weights, "--quiet"});
    QVERIFY2(t.code == 0, qPrintable(t.out + t.err));
    auto loaded = netloom::loadProject(path.toStdString());
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
    netloom::Status st =
        netloom::exportPytorch(*loaded, dir.path().toStdString(), out.toStdString());
    QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
    const QString flakes = netloom::testing::pyflakesProblems(out);
    QVERIFY2(flakes.isEmpty(), qPrintable(flakes));

    const int samples = 16;
    netloom::TrainOptions o;
    o.projectDir = dir.path().toStdString();
    o.trainLimit = 256;
    o.testLimit = samples;
    auto pred = netloom::predict(*loaded, o, weights.toStdString());
    QVERIFY2(pred.ok(), pred.ok() ? "" : pred.error().message.c_str());
    const QString probs = dir.filePath("probs.f32"), script = dir.filePath("check.py");
    QFile p(probs), s(script);
    QVERIFY(p.open(QIODevice::WriteOnly) && s.open(QIODevice::WriteOnly));
    p.write(reinterpret_cast<const char*>(pred->probs.data()),
            qint64(pred->probs.size() * sizeof(float)));
    p.close();
    s.write(kCheck);
    s.close();
    Outcome c = runPython({script, out, weights, probs, QString::number(samples)});
    qInfo().noquote() << QTest::currentDataTag() << c.out.trimmed();
    QVERIFY2(c.code == 0, qPrintable(c.out + c.err));
  }

 private slots:
  void initTestCase() {
    if (!havePython("torch, numpy"))
      QSKIP("/usr/bin/python3 with torch and numpy is missing: the PyTorch side is not checked");
  }

  void ops_data() {
    QTest::addColumn<QString>("nodes");
    const QString conv = ints("kernel_size", "3") + " " + integer("out_channels", 4);
    // 28 → 14 with one extra row and column at the end; then a 4 × 2 kernel at
    // stride 1, which pads one before and two after (rows), zero and one (columns).
    QTest::newRow("same padding, avg pools")
        << node("c1", "Conv2d", "\"image\"",
                conv + " " + ints("stride", "2") + " " + flag("same_padding", true)) +
               node("c2", "Conv2d", "\"c1\"",
                    ints("kernel_size", "4, 2") + " " + integer("out_channels", 3) + " " +
                        flag("same_padding", true)) +
               node("p1", "AvgPool2d", "\"c2\"",
                    ints("kernel_size", "3") + " " + ints("stride", "2") + " " +
                        ints("padding", "1") + " " + flag("ceil_mode", true) + " " +
                        flag("count_include_pad", false)) +
               node("p2", "AvgPool2d", "\"p1\"",
                    ints("kernel_size", "3") + " " + ints("stride", "2") + " " +
                        ints("padding", "1") + " " + flag("ceil_mode", true)) +
               node("p3", "AvgPool2d", "\"c2\"",
                    ints("kernel_size", "2, 3") + " " + ints("padding", "1") + " " +
                        flag("count_include_pad", false)) +
               node("lr", "LeakyReLU", "\"p2\"", real("negative_slope", 0.2)) +
               node("f1", "Flatten", "\"lr\"") + node("f3", "Flatten", "\"p3\"") +
               node("out", "Concat", "[\"f1\", \"f3\"]");
    QTest::newRow("transposed conv, upsample")
        << node("c1", "Conv2d", "\"image\"",
                conv + " " + ints("stride", "2") + " " + ints("padding", "1")) +
               node("t1", "ConvTranspose2d", "\"c1\"",
                    ints("kernel_size", "3") + " " + integer("out_channels", 2) + " " +
                        ints("stride", "2") + " " + ints("padding", "1") + " " +
                        ints("output_padding", "1")) +
               node("sg", "Sigmoid", "\"t1\"") +
               node("p", "AvgPool2d", "\"sg\"", ints("kernel_size", "4")) +
               node("up", "Upsample", "\"p\"", ints("scale_factor", "2, 3")) +
               node("th", "Tanh", "\"up\"") + node("out", "Flatten", "\"th\"");
    // Samples as 28 rows of 28, each row normalised and projected to 16 features.
    const QString rows = node("seq", "Reshape", "\"image\"", ints("shape", "28, 28")) +
                         node("ln", "LayerNorm", "\"seq\"") +
                         node("fc", "Linear", "\"ln\"", integer("out_features", 16));
    const QString flat = ints("shape", "-1");
    QTest::newRow("GELU") << rows + node("g", "GELU", "\"fc\"") +
                                 node("out", "Reshape", "\"g\"", flat);
    QTest::newRow("GELU tanh") << rows + node("g", "GELU", "\"fc\"", text("approximate", "tanh")) +
                                      node("out", "Reshape", "\"g\"", flat);
    QTest::newRow("Softmax over rows") << rows +
                                              node("sm", "Softmax", "\"fc\"", integer("axis", 1)) +
                                              node("out", "Reshape", "\"sm\"", flat);
    QTest::newRow("LayerNorm over two dims")
        << rows +
               node("ln2", "LayerNorm", "\"fc\"",
                    integer("normalized_dims", 2) + " " + real("eps", 0.001)) +
               node("out", "Reshape", "\"ln2\"", flat);
    QTest::newRow("sequence ops")
        << rows + node("g1", "GELU", "\"fc\"") +
               node("fc2", "Linear", "\"g1\"", integer("out_features", 8)) +
               node("g2", "GELU", "\"fc2\"", text("approximate", "tanh")) +
               node("mm", "Linear", "\"g1\"",
                    integer("out_features", 6) + " " + flag("bias", false)) +
               node("sm", "Softmax", "\"mm\"", integer("axis", 1)) +
               node("sm2", "Softmax", "\"g2\"") +
               node("cat", "Concat", "[\"sm\", \"sm2\", \"g2\"]", integer("axis", 2)) +
               node("ln2", "LayerNorm", "\"cat\"",
                    integer("normalized_dims", 2) + " " + real("eps", 0.001)) +
               node("out", "Reshape", "\"ln2\"", flat);
    // Attention over the 28 rows as tokens, 2 heads of 8: learned and sinusoidal
    // positions, RMSNorm, rotary queries and keys, causal attention with dropout
    // (off in evaluation), a batched product's scores as a float mask.
    const QString heads = ints("shape", "28, 2, 8"), swap = ints("perm", "0, 2, 1, 3");
    QTest::newRow("attention ops")
        << rows + node("pos", "PositionEmbedding", "\"fc\"", integer("max_len", 32)) +
               node("sin", "PositionEmbedding", "\"pos\"", text("kind", "sinusoidal")) +
               node("rms", "RMSNorm", "\"sin\"") +
               node("q", "Linear", "\"rms\"", integer("out_features", 16)) +
               node("k", "Linear", "\"rms\"", integer("out_features", 16)) +
               node("v", "Linear", "\"rms\"", integer("out_features", 16)) +
               node("qh", "Reshape", "\"q\"", heads) + node("kh", "Reshape", "\"k\"", heads) +
               node("vh", "Reshape", "\"v\"", heads) + node("qt", "Transpose", "\"qh\"", swap) +
               node("kt", "Transpose", "\"kh\"", swap) + node("vt", "Transpose", "\"vh\"", swap) +
               node("qr", "RotaryEmbedding", "\"qt\"") +
               node("kr", "RotaryEmbedding", "\"kt\"", real("base", 500)) +
               node("att", "ScaledDotProductAttention", "[\"qr\", \"kr\", \"vt\"]",
                    flag("causal", true) + " " + real("dropout", 0.1)) +
               node("sc", "BatchMatMul", "[\"qt\", \"kt\"]", flag("trans_b", true)) +
               node("att2", "ScaledDotProductAttention", "[\"att\", \"kt\", \"vt\", \"sc\"]",
                    real("scale", 0.25)) +
               node("back", "Transpose", "\"att2\"", swap) +
               node("merged", "Reshape", "\"back\"", ints("shape", "28, 16")) +
               node("plain", "RMSNorm", "\"merged\"", flag("affine", false)) +
               node("out", "Reshape", "\"plain\"", flat);
  }

  // Every op that declares its PyTorch form as data (OpDef::torchForm), at its
  // defaults and with each attribute moved off its default.
  void declaredOps_data() {
    QTest::addColumn<QString>("nodes");
    const QString rows = node("seq", "Reshape", "\"image\"", ints("shape", "28, 28")) +
                         node("fc", "Linear", "\"seq\"", integer("out_features", 16));
    int declared = 0;
    for (const netloom::OpDef* op : netloom::OpRegistry::instance().all()) {
      if (op->torchForm.empty()) continue;
      ++declared;
      QString tuned;
      for (const netloom::AttrDef& a : op->attrs)
        if (const double* def = std::get_if<double>(&a.def))
          tuned += real(QString::fromStdString(a.name),
                        std::clamp(*def == 0 ? 0.5 : *def * 1.5, a.min, a.max)) +
                   " ";
      const QString name = QString::fromStdString(op->name);
      QTest::newRow(qPrintable(name)) << rows + node("a", name, "\"fc\"") +
                                             node("out", "Reshape", "\"a\"", ints("shape", "-1"));
      if (!tuned.isEmpty())
        QTest::newRow(qPrintable(name + " tuned"))
            << rows + node("a", name, "\"fc\"", tuned) +
                   node("out", "Reshape", "\"a\"", ints("shape", "-1"));
    }
    if (declared == 0) QTest::newRow("none declared") << QString();
  }

  // Every op a model can hold says, in its op file, how it reads as PyTorch: the
  // export has no case of its own for any op.
  void everyLayerDeclaresItsPytorchForm() {
    QStringList missing;
    int declared = 0;
    for (const netloom::OpDef* op : netloom::OpRegistry::instance().all()) {
      if (op->role != netloom::OpRole::Layer || op->external) continue;
      if (!op->torch && op->torchForm.empty())
        missing << QString::fromStdString(op->name);
      else
        ++declared;
    }
    QVERIFY2(missing.isEmpty(), qPrintable("no PyTorch form: " + missing.join(", ")));
    QVERIFY2(declared >= 25, qPrintable(QString::number(declared)));
  }

  void declaredOps() {
    QFETCH(QString, nodes);
    if (nodes.isEmpty()) QSKIP("no op declares its PyTorch form as data");
    compare(nodes);
  }

  void ops() {
    QFETCH(QString, nodes);
    compare(nodes);
  }
};

QTEST_GUILESS_MAIN(TestPytorchOps)
#include "tst_pytorch_ops.moc"
