// ONNX import of models NetLoom did not write: a CNN (with SiLU, Softplus, Mish and HardSwish as
// PyTorch writes them out) exported by torch.onnx.export at
// opsets 13 and 17, with BatchNorm kept and folded by PyTorch, gives PyTorch's
// outputs within 1e-5 and trains; unsupported ops and attributes are all listed and
// nothing is written. The models come from Debian's /usr/bin/python3 (torch, onnx);
// without it these tests skip and say so.
#include <QtTest>

#include "../common/cli.h"
#include "engine/interop/onnx.h"
#include "engine/io/project_file.h"
#include "onnx_fixture.h"

using namespace onnxfixture;

namespace {

// Conv, BatchNorm, ReLU, MaxPool, GELU (PyTorch writes it out with Erf), a residual
// Add, AvgPool, Concat, a view(batch, -1) (Shape, Gather, Unsqueeze, Concat feed the
// Reshape), and Linear layers. BatchNorm's statistics and affine parameters are
// moved off their initial values so that it matters.
constexpr const char* kMakeModels = R"PY(
import os, sys
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

out = sys.argv[1]
torch.manual_seed(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.gelu = nn.GELU()
        self.avg = nn.AvgPool2d(2)
        self.side = nn.Conv2d(8, 4, 1)
        self.fc1 = nn.Linear(12 * 7 * 7, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        h = self.pool(torch.relu(self.bn1(self.conv1(x))))
        g = self.gelu(self.bn2(self.conv2(h)))
        a = self.avg(g + h)
        c = torch.cat([a, self.side(a)], dim=1)
        f = c.view(c.size(0), -1)
        h1 = self.fc1(f)
        h1 = F.silu(h1) + F.softplus(h1, beta=2.0) + F.mish(h1) + F.hardswish(h1)
        return self.fc2(F.gelu(h1))

m = Net()
with torch.no_grad():
    for bn in (m.bn1, m.bn2):
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
m.train()
with torch.no_grad():
    for _ in range(3):
        m(torch.randn(16, 1, 28, 28) * 2 + 0.5)
m.eval()
x = torch.randn(4, 1, 28, 28)
with torch.no_grad():
    y = m(x)
x.numpy().astype(np.float32).tofile(os.path.join(out, "input.bin"))
y.numpy().astype(np.float32).tofile(os.path.join(out, "reference.bin"))
for opset in (13, 17):
    for bn in ("kept", "folded"):
        kw = dict(opset_version=opset, input_names=["x"], output_names=["y"])
        if opset == 17:
            kw["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
        if bn == "kept":
            kw["training"] = torch.onnx.TrainingMode.PRESERVE
        torch.onnx.export(m, x, os.path.join(out, f"cnn-{opset}-{bn}.onnx"), **kw)
print("torch", torch.__version__)
)PY";

// Models with ops and attributes NetLoom has no form for.
constexpr const char* kMakeRefused = R"PY(
import os, sys
import onnx
from onnx import helper, TensorProto

out = sys.argv[1]
def save(name, nodes, x_shape, y_shape):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(out, name + ".onnx"))

save("trig", [helper.make_node("Cos", ["x"], ["c"], name="my_cos"),
              helper.make_node("Relu", ["c"], ["r"], name="act"),
              helper.make_node("Sin", ["r"], ["y"], name="my_sin")], ["batch", 4], ["batch", 4])
save("dilated", [helper.make_node("MaxPool", ["x"], ["y"], name="dilated_pool",
                                  kernel_shape=[2, 2], dilations=[2, 2])],
     ["batch", 1, 8, 8], ["batch", 1, 6, 6])
)PY";

int countOps(const proto::Project& p, const std::string& op) {
  int c = 0;
  for (const auto& n : p.model().nodes()) c += n.op() == op;
  return c;
}

}  // namespace

class TestOnnxImport : public QObject {
  Q_OBJECT

  QTemporaryDir m_models;
  QString m_noTorch;

 private slots:
  void initTestCase() {
    if (!onnxAvailable()) QSKIP("this build has no libonnx: ONNX import is left out");
    if (!havePython("torch, onnx, numpy")) {
      m_noTorch = "/usr/bin/python3 with torch, onnx and numpy is missing: no model to import";
      return;
    }
    const QString script = m_models.filePath("make_models.py");
    QFile f(script);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(kMakeModels);
    f.close();
    PyResult r = python({script, m_models.path()});
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
    qInfo("%s", qPrintable(r.out.trimmed()));
  }

  void importsPyTorchCnn_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("batchNorms");
    QTest::newRow("opset 13, BatchNorm kept") << "cnn-13-kept" << 2;
    QTest::newRow("opset 13, BatchNorm folded") << "cnn-13-folded" << 0;
    QTest::newRow("opset 17, BatchNorm kept") << "cnn-17-kept" << 2;
    QTest::newRow("opset 17, BatchNorm folded") << "cnn-17-folded" << 0;
  }

  void importsPyTorchCnn() {
    if (!m_noTorch.isEmpty()) QSKIP(qPrintable(m_noTorch));
    QFETCH(QString, file);
    QFETCH(int, batchNorms);
    QTemporaryDir dir;
    const std::string project = dir.filePath(file + ".nlproj").toStdString();
    Status st = importOnnx(m_models.filePath(file + ".onnx").toStdString(), project);
    QVERIFY2(st.ok(), st ? "" : st.message().c_str());
    auto p = loadProject(project);
    QVERIFY(p.ok());
    QCOMPARE(countOps(*p, "BatchNorm"), batchNorms);
    QCOMPARE(countOps(*p, "GELU"), 2);
    // Declared ops, as PyTorch writes them out (onnx_form.h's patterns).
    for (const char* op : {"SiLU", "Softplus", "Mish", "HardSwish"}) QCOMPARE(countOps(*p, op), 1);
    QCOMPARE(countOps(*p, "Conv2d"), 3);
    QCOMPARE(countOps(*p, "Linear"), 2);
    QCOMPARE(p->train().loss(), std::string("loss"));
    QCOMPARE(p->train().init_weights(), file.toStdString() + ".safetensors");
    const std::vector<float> x = readFloats(m_models.filePath("input.bin"));
    const std::vector<float> want = readFloats(m_models.filePath("reference.bin"));
    QCOMPARE(x.size(), size_t(4 * 28 * 28));
    Output got = forward(*p, dir.filePath(file + ".safetensors").toStdString(), x, 4);
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.shape, (Shape{4, 10}));
    const double diff = maxAbsDiff(got.values, want);
    qInfo("%s: max abs diff %.3g against PyTorch over 4 samples", qPrintable(file), diff);
    QVERIFY2(diff <= 1e-5, qPrintable(QString::number(diff)));
  }

  void importedProjectTrains() {
    if (!m_noTorch.isEmpty()) QSKIP(qPrintable(m_noTorch));
    QTemporaryDir dir;
    const QString project = dir.filePath("cnn.nlproj");
    auto r = netloom::testing::runTrain(
        {"--import-onnx", m_models.filePath("cnn-17-kept.onnx"), "--to", project});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    // The import leaves the data to the user: here, Fashion-MNIST.
    auto p = loadProject(project.toStdString());
    QVERIFY(p.ok());
    proto::IdxSource* idx = p->mutable_data()->mutable_idx();
    const QString fashion = NETLOOM_FASHION_DIR;
    idx->set_train_images((fashion + "/train-images-idx3-ubyte.gz").toStdString());
    idx->set_train_labels((fashion + "/train-labels-idx1-ubyte.gz").toStdString());
    idx->set_test_images((fashion + "/t10k-images-idx3-ubyte.gz").toStdString());
    idx->set_test_labels((fashion + "/t10k-labels-idx1-ubyte.gz").toStdString());
    p->mutable_data()->mutable_normalization()->set_kind(proto::Normalization::FIXED);
    p->mutable_data()->mutable_normalization()->set_scale(1.0 / 255);
    p->mutable_data()->mutable_normalization()->set_std(1.0);
    QVERIFY(saveProject(project.toStdString(), *p).ok());
    r = netloom::testing::runTrain({project, "--max-steps", "3", "--train-limit", "64",
                                    "--test-limit", "32", "--batch-size", "16", "--quiet",
                                    "--save-weights", dir.filePath("trained.safetensors")});
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
    QVERIFY(QFile::exists(dir.filePath("trained.safetensors")));
  }

  void refusesUnsupportedOpsByName_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QStringList>("expected");
    QTest::newRow("Cos and Sin") << "trig"
                                 << QStringList{
                                        "2 nodes or attributes have no NetLoom form",
                                        "node 'my_cos' (op Cos): the op has no NetLoom form",
                                        "node 'my_sin' (op Sin): the op has no NetLoom form"};
    QTest::newRow("dilated MaxPool")
        << "dilated"
        << QStringList{"node 'dilated_pool' (op MaxPool): attribute dilations has no NetLoom form"};
  }

  void refusesUnsupportedOpsByName() {
    if (!havePython("onnx")) QSKIP("/usr/bin/python3 with onnx is missing: no model to refuse");
    QFETCH(QString, file);
    QFETCH(QStringList, expected);
    QTemporaryDir dir;
    const QString script = dir.filePath("make_refused.py");
    QFile f(script);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(kMakeRefused);
    f.close();
    PyResult r = python({script, dir.path()});
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
    const QString project = dir.filePath("out/refused.nlproj");
    QVERIFY(QDir(dir.path()).mkdir("out"));
    Status st = importOnnx(dir.filePath(file + ".onnx").toStdString(), project.toStdString());
    QVERIFY(!st.ok());
    const QString msg = QString::fromStdString(st.message());
    for (const QString& e : expected) QVERIFY2(msg.contains(e), qPrintable(msg));
    QVERIFY(!msg.contains("'act'"));  // Relu has a NetLoom form
    QCOMPARE(QDir(dir.filePath("out")).entryList(QDir::Files | QDir::Hidden).size(), 0);
    // netloom-train says the same and exits 2.
    auto cli = netloom::testing::runTrain(
        {"--import-onnx", dir.filePath(file + ".onnx"), "--to", project});
    QCOMPARE(cli.code, 2);
    QVERIFY2(cli.err.contains(expected.last()), qPrintable(cli.err));
  }
};

QTEST_GUILESS_MAIN(TestOnnxImport)
#include "tst_onnx_import.moc"
