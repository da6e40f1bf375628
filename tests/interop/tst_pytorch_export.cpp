// PyTorch code export, checked by PyTorch itself: a run's weights load into the
// generated model.py strictly, its outputs equal NetLoom's on Fashion-MNIST test
// samples, and train.py trains an epoch. Needs Debian's /usr/bin/python3 with torch;
// without it the Python side is skipped, and said so.
#include <QtTest>

#include "../common/cli.h"
#include "engine/interop/pytorch_export.h"
#include "engine/io/project_file.h"
#include "engine/train/trainer.h"
#include "python.h"

namespace {

using netloom::testing::havePython;
using netloom::testing::Outcome;
using netloom::testing::runPython;
using netloom::testing::runTrain;

// Loads the weights strictly; with a probabilities file, compares softmax(forward()),
// and its logarithm (the logits up to a shift per sample),
// on the first n test samples, read and normalised by train.py's own data code.
constexpr const char* kCheck = R"PY(
import sys
import torch
out_dir, weights, probs_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, out_dir)
import model as M
import train as T
m = M.build_model()
M.load_weights(m, weights)  # strictly, shared (tied) parameters filled in
m.eval()
if probs_path == "-":
    with torch.no_grad():
        out = m(torch.zeros(2, *M.INPUT_SHAPE))
    print("loaded strictly; output", tuple(out.shape))
    sys.exit(0)
data = dict(T.DATA)
data["train_limit"], data["test_limit"] = 256, n
_, _, test, norm = T.load_data(data, T.TRAIN["seed"])
x = T.normalise(test.x, norm).reshape(len(test), *M.INPUT_SHAPE)
with torch.no_grad():
    out = m(x)
if isinstance(out, tuple):
    out = out[0]
probs = torch.softmax(out.double(), dim=1).float()
raw = bytearray(open(probs_path, "rb").read())
want = torch.frombuffer(raw, dtype=torch.float32).reshape(probs.shape)
diff = (probs - want).abs().max().item()
# Probabilities near 0 hide the logits: compare log-probabilities too (the logits up
# to each row's shift), where NetLoom's float did not underflow; where it did,
# PyTorch's must be as small.
log_probs = torch.log_softmax(out.double(), dim=1)
kept = want.double() > 1e-30
log_diff = (log_probs[kept] - torch.log(want.double()[kept])).abs().max().item()
underflow_ok = bool((log_probs[~kept] < -60).all())
print(f"max abs diff {diff:.3g}, log-probability diff {log_diff:.3g} over {len(test)} samples")
sys.exit(0 if diff <= 1e-5 and log_diff <= 1e-4 and underflow_ok else 1)
)PY";

QString projectPath(const QString& name) {
  return QString(NETLOOM_SOURCE_DIR) + "/projects/" + name + ".nlproj";
}

// A model of two instances of one block with different channels and strides, and a
// node whose name a module path cannot hold.
const char* kBlocksProject = R"(
name: "blocks"
model {
  name: "block_net"
  nodes { name: "image" op: "Input" attrs { key: "shape" value { ints { values: [1, 28, 28] } } } }
  nodes { name: "label" op: "Input" attrs { key: "field" value { s: "label" } } attrs { key: "dtype" value { s: "int32" } } }
  nodes { name: "stem" op: "Conv2d" inputs: "image" attrs { key: "out_channels" value { i: 8 } } attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "padding" value { ints { values: [1] } } } }
  nodes { name: "res1" op: "Unit" inputs: "stem" }
  nodes { name: "res2" op: "Unit" inputs: "res1" attrs { key: "channels" value { i: 16 } } attrs { key: "stride" value { ints { values: [2] } } } }
  nodes { name: "gap" op: "GlobalAvgPool2d" inputs: "res2" }
  nodes { name: "head.fc" op: "Linear" inputs: "gap" attrs { key: "out_features" value { i: 10 } } }
  nodes { name: "loss" op: "SoftmaxCrossEntropy" inputs: ["head.fc", "label"] }
  nodes { name: "accuracy" op: "Accuracy" inputs: ["head.fc", "label"] }
  outputs: "head.fc"
  blocks {
    name: "Unit"
    params { key: "channels" value { i: 8 } }
    params { key: "stride" value { ints { values: [1] } } }
    nodes { name: "x" op: "BlockInput" }
    nodes { name: "conv" op: "Conv2d" inputs: "x" attrs { key: "out_channels" value { s: "$channels" } } attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "stride" value { s: "$stride" } } attrs { key: "padding" value { ints { values: [1] } } } attrs { key: "bias" value { b: false } } }
    nodes { name: "bn" op: "BatchNorm" inputs: "conv" }
    nodes { name: "act" op: "ReLU" inputs: "bn" }
    outputs: "act"
  }
}
data { idx {} normalization { kind: FIXED scale: 0.00392156862745098 mean: 0.2860 std: 0.3530 } }
train { loss: "loss" optimizer { kind: ADAMW } schedule { kind: STEP step_epochs: 1 warmup_steps: 3 } batch_size: 32 epochs: 1 seed: 3 }
)";

}  // namespace

class TestPytorchExport : public QObject {
  Q_OBJECT

  // Trains two steps, exports, and has PyTorch check the weights (and, with
  // `compare`, the outputs); `trainEpoch` runs train.py for an epoch too.
  void check(const QString& project, bool compare, bool trainEpoch) {
    if (!havePython("torch, numpy"))
      QSKIP("/usr/bin/python3 with torch and numpy is missing: the PyTorch side is not checked");
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString weights = dir.filePath("w.safetensors"), out = dir.filePath("pytorch");
    Outcome t = runTrain({project, "--max-steps", "2", "--train-limit", "256", "--test-limit", "64",
                          "--save-weights", weights, "--quiet"});
    QVERIFY2(t.code == 0, qPrintable(t.err));

    auto loaded = netloom::loadProject(project.toStdString());
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
    const std::string projectDir = QFileInfo(project).absolutePath().toStdString();
    netloom::Status st = netloom::exportPytorch(*loaded, projectDir, out.toStdString());
    QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
    for (const char* f : {"model.py", "train.py", "README.md"})
      QVERIFY2(QFile::exists(out + "/" + f), f);
    const QString flakes = netloom::testing::pyflakesProblems(out);
    QVERIFY2(flakes.isEmpty(), qPrintable(flakes));

    const QString script = dir.filePath("check.py");
    QFile s(script);
    QVERIFY(s.open(QIODevice::WriteOnly));
    s.write(kCheck);
    s.close();

    QString probsPath = "-";
    const int samples = 64;
    if (compare) {
      netloom::TrainOptions o;
      o.projectDir = projectDir;
      o.trainLimit = 256;
      o.testLimit = samples;
      auto pred = netloom::predict(*loaded, o, weights.toStdString());
      QVERIFY2(pred.ok(), pred.ok() ? "" : pred.error().message.c_str());
      QCOMPARE(int64_t(pred->probs.size()), int64_t(samples) * pred->classes);
      probsPath = dir.filePath("probs.f32");
      QFile p(probsPath);
      QVERIFY(p.open(QIODevice::WriteOnly));
      p.write(reinterpret_cast<const char*>(pred->probs.data()),
              qint64(pred->probs.size() * sizeof(float)));
    }
    Outcome c = runPython({script, out, weights, probsPath, QString::number(samples)});
    qInfo().noquote() << QFileInfo(project).fileName() << c.out.trimmed();
    QVERIFY2(c.code == 0, qPrintable(c.out + c.err));

    if (trainEpoch) {
      Outcome r =
          runPython({out + "/train.py", "--epochs", "1", "--train-limit", "128", "--test-limit",
                     "64", "--weights", weights, "--save", dir.filePath("again.safetensors")});
      QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
      QVERIFY2(r.out.contains("epoch 1: train loss"), qPrintable(r.out));
      // What train.py saves, NetLoom reads back.
      Outcome back =
          runTrain({project, "--init-weights", dir.filePath("again.safetensors"), "--max-steps",
                    "1", "--train-limit", "64", "--test-limit", "32", "--quiet"});
      QVERIFY2(back.code == 0, qPrintable(back.err));
    }
  }

  // From the same weights, 20 AdamW steps over the same batches in NetLoom and in
  // train.py end with the same weights and the same test loss, each within 1e-4
  // relative (a tensor: of its largest element). Not the key biases: softmax ignores
  // a score added to every key alike, so their gradient is 0 but for rounding, which
  // Adam's normalised step blows up to a step of lr in either framework's direction.
  void trainsAsPytorch(const QString& name, const QStringList& limits) {
    if (!havePython("torch, numpy"))
      QSKIP("/usr/bin/python3 with torch and numpy is missing: the PyTorch side is not checked");
    QTemporaryDir dir;
    const QString project = projectPath(name), start = dir.filePath("start.safetensors");
    const QString ours = dir.filePath("netloom.safetensors"),
                  theirs = dir.filePath("torch.safetensors"), summary = dir.filePath("s.json");
    Outcome s = runTrain(
        QStringList{project, "--max-steps", "1", "--save-weights", start, "--quiet"} + limits);
    QVERIFY2(s.code == 0, qPrintable(s.err));
    Outcome n = runTrain(QStringList{project, "--init-weights", start, "--max-steps", "20",
                                     "--save-weights", ours, "--summary-json", summary, "--quiet"} +
                         limits);
    QVERIFY2(n.code == 0, qPrintable(n.err));
    auto loaded = netloom::loadProject(project.toStdString());
    QVERIFY(loaded.ok());
    const QString out = dir.filePath("pytorch");
    QVERIFY(netloom::exportPytorch(*loaded, QFileInfo(project).absolutePath().toStdString(),
                                   out.toStdString())
                .ok());
    Outcome t = runPython(
        QStringList{out + "/train.py", "--weights", start, "--max-steps", "20", "--save", theirs} +
        limits);
    QVERIFY2(t.code == 0, qPrintable(t.out + t.err));
    const QString compare = dir.filePath("compare.py");
    QFile c(compare);
    QVERIFY(c.open(QIODevice::WriteOnly));
    c.write(R"PY(
import json, re, sys
sys.path.insert(0, sys.argv[1])
import model as M
a, b = M.read_safetensors(sys.argv[2]), M.read_safetensors(sys.argv[3])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
worst, at = 0.0, ""
for k in a:
    if k.endswith("/k.bias"):
        continue
    d = (a[k] - b[k]).abs().max().item() / max(b[k].abs().max().item(), 1e-12)
    if d > worst:
        worst, at = d, k
ours = json.load(open(sys.argv[4]))["test_loss"]
theirs = float(re.findall(r"\| test loss ([\d.]+)", open(sys.argv[5]).read())[-1])
loss = abs(ours - theirs) / abs(theirs)
print(f"after 20 steps: worst |netloom - pytorch| / max |pytorch| {worst:.3g} ({at}); "
      f"test loss {ours:.6f} against {theirs:.6f}")
sys.exit(0 if worst <= 1e-4 and loss <= 1e-4 else 1)
)PY");
    c.close();
    const QString log = dir.filePath("torch.log");
    QFile l(log);
    QVERIFY(l.open(QIODevice::WriteOnly));
    l.write(t.out.toUtf8());
    l.close();
    Outcome r = runPython({compare, out, ours, theirs, summary, log});
    qInfo().noquote() << name << r.out.trimmed();
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
  }

 private slots:
  void lenet() { check(projectPath("fashion-lenet"), true, true); }
  void convBatchNorm() { check(projectPath("fashion-convbn"), true, true); }
  void resnet() { check(projectPath("fashion-resnet"), true, true); }
  // Transformers: the ViT's probabilities match; the GPT's tied weights load strictly and
  // train.py trains on its text, whose weights NetLoom reads back.
  void vit() { check(projectPath("fashion-vit"), true, false); }
  void gpt() { check(projectPath("fortunes-gpt"), false, true); }

  void gptTrainsAsPytorch() {
    trainsAsPytorch("fortunes-gpt", {"--train-limit", "640", "--test-limit", "64"});
  }
  void vitTrainsAsPytorch() {
    trainsAsPytorch("fashion-vit", {"--train-limit", "512", "--test-limit", "256"});
  }
  void mlpLoadsStrictly() { check(projectPath("fashion-mlp"), true, false); }
  void autoencoderLoadsStrictly() { check(projectPath("autoencoder"), false, false); }

  void blocksBecomeClasses() {
    QTemporaryDir dir;
    const QString path = dir.filePath("blocks.nlproj");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(kBlocksProject);
    f.close();
    auto p = netloom::loadProject(path.toStdString());
    QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
    QVERIFY(
        netloom::exportPytorch(*p, dir.path().toStdString(), dir.filePath("x").toStdString()).ok());
    const QString flakes = netloom::testing::pyflakesProblems(dir.filePath("x"));
    QVERIFY2(flakes.isEmpty(), qPrintable(flakes));
    QFile m(dir.filePath("x/model.py"));
    QVERIFY(m.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(m.readAll());
    // One class for both instances, their channels and strides its arguments.
    QVERIFY2(text.contains("class Unit(nn.Module):"), qPrintable(text));
    QVERIFY2(text.contains("self.res2 = Unit("), qPrintable(text));
    QVERIFY2(text.contains("\"head.fc.weight\": \"head_fc.weight\""), qPrintable(text));
    check(path, true, true);
  }

  void unknownOpIsRefusedAndNothingWritten() {
    QTemporaryDir dir;
    auto p = netloom::loadProject(projectPath("fashion-mlp").toStdString());
    QVERIFY(p.ok());
    auto* nd = p->mutable_model()->mutable_nodes(3);
    const std::string name = nd->name();
    nd->set_op("FancyOp");
    const QString out = dir.filePath("out");
    netloom::Status st = netloom::exportPytorch(*p, dir.path().toStdString(), out.toStdString());
    QVERIFY(!st.ok());
    QVERIFY2(st.message().find("'" + name + "'") != std::string::npos, st.message().c_str());
    QVERIFY2(st.message().find("FancyOp") != std::string::npos, st.message().c_str());
    QVERIFY(!QFileInfo::exists(out));
  }
};

QTEST_GUILESS_MAIN(TestPytorchExport)
#include "tst_pytorch_export.moc"
