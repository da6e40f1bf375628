// ONNX export: every example project exports and passes libonnx's full check (and
// Python onnx's, where Debian's /usr/bin/python3 has it); exported and imported back,
// a model gives the same outputs on Fashion-MNIST samples, folded BatchNorm or not;
// the weights come from the file, the project or the seed; what has no ONNX form is
// refused by name and nothing is written.
#include <QtTest>
#include <algorithm>

#include "../common/cli.h"
#include "engine/graph/op.h"
#include "engine/interop/onnx.h"
#include "engine/io/project_file.h"
#include "onnx_fixture.h"

using namespace onnxfixture;

namespace {

// Every example project, as the IDE offers them on first start.
QStringList exampleProjects() {
  QStringList names;
  for (const QString& f : QDir(NETLOOM_SOURCE_DIR "/projects").entryList({"*.nlproj"}, QDir::Files))
    names << f.chopped(int(qstrlen(".nlproj")));
  return names;
}

QString projectPath(const QString& name) {
  return QString(NETLOOM_SOURCE_DIR) + "/projects/" + name + ".nlproj";
}

// Every op NetLoom exports, in one model: grouped and dilated convolution, "same"
// padding, transposed convolution, both poolings with padding and ceil_mode,
// nearest upsampling, BatchNorm after a convolution (foldable) and after an
// activation (not), both GELUs, Concat, Add, LayerNorm with and without affine,
// Linear over rank 3 and rank 2, Softmax, Flatten from dimension 1 and 2, Reshape,
// Dropout, Identity and both global poolings.
const char* kAllOps = R"(
name: "all-ops"
model {
  name: "all_ops"
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [3, 8, 8] } } } }
  nodes { name: "c1" op: "Conv2d" inputs: "x" attrs { key: "out_channels" value { i: 6 } } attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "padding" value { ints { values: [2] } } } attrs { key: "dilation" value { ints { values: [2] } } } attrs { key: "groups" value { i: 3 } } }
  nodes { name: "a1" op: "LeakyReLU" inputs: "c1" attrs { key: "negative_slope" value { f: 0.1 } } }
  nodes { name: "bn1" op: "BatchNorm" inputs: "a1" }
  nodes { name: "up" op: "Upsample" inputs: "bn1" attrs { key: "scale_factor" value { ints { values: [2] } } } }
  nodes { name: "ap" op: "AvgPool2d" inputs: "up" attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "stride" value { ints { values: [2] } } } attrs { key: "padding" value { ints { values: [1] } } } attrs { key: "count_include_pad" value { b: false } } }
  nodes { name: "ct" op: "ConvTranspose2d" inputs: "ap" attrs { key: "out_channels" value { i: 4 } } attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "stride" value { ints { values: [2] } } } attrs { key: "padding" value { ints { values: [1] } } } attrs { key: "output_padding" value { ints { values: [1] } } } }
  nodes { name: "mp" op: "MaxPool2d" inputs: "ct" attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "stride" value { ints { values: [2] } } } attrs { key: "padding" value { ints { values: [1] } } } attrs { key: "ceil_mode" value { b: true } } }
  nodes { name: "c2" op: "Conv2d" inputs: "mp" attrs { key: "out_channels" value { i: 4 } } attrs { key: "kernel_size" value { ints { values: [4] } } } attrs { key: "stride" value { ints { values: [2] } } } attrs { key: "same_padding" value { b: true } } attrs { key: "bias" value { b: false } } }
  nodes { name: "bn2" op: "BatchNorm" inputs: "c2" }
  nodes { name: "g1" op: "GELU" inputs: "bn2" }
  nodes { name: "g2" op: "GELU" inputs: "bn2" attrs { key: "approximate" value { s: "tanh" } } }
  nodes { name: "cat" op: "Concat" inputs: ["g1", "g2"] }
  nodes { name: "sg" op: "Sigmoid" inputs: "cat" }
  nodes { name: "th" op: "Tanh" inputs: "cat" }
  nodes { name: "ad" op: "Add" inputs: ["sg", "th"] }
  nodes { name: "gp" op: "GlobalAvgPool2d" inputs: "ad" attrs { key: "keepdim" value { b: true } } }
  nodes { name: "gp2" op: "GlobalAvgPool2d" inputs: "ad" }
  nodes { name: "rs" op: "Reshape" inputs: "ad" attrs { key: "shape" value { ints { values: [8, -1] } } } }
  nodes { name: "fs" op: "Flatten" inputs: "ad" attrs { key: "start_dim" value { i: 2 } } }
  nodes { name: "ad2" op: "Add" inputs: ["rs", "fs"] }
  nodes { name: "ln" op: "LayerNorm" inputs: "ad2" }
  nodes { name: "l3" op: "Linear" inputs: "ln" attrs { key: "out_features" value { i: 6 } } }
  nodes { name: "sm" op: "Softmax" inputs: "l3" }
  nodes { name: "fl" op: "Flatten" inputs: "sm" }
  nodes { name: "dr" op: "Dropout" inputs: "fl" attrs { key: "p" value { f: 0.3 } } }
  nodes { name: "id" op: "Identity" inputs: "dr" }
  nodes { name: "fg" op: "Flatten" inputs: "gp" }
  nodes { name: "cat2" op: "Concat" inputs: ["id", "gp2", "fg"] }
  nodes { name: "ln2" op: "LayerNorm" inputs: "cat2" attrs { key: "affine" value { b: false } } }
  nodes { name: "fc" op: "Linear" inputs: "ln2" attrs { key: "out_features" value { i: 5 } } }
  nodes { name: "out" op: "ReLU" inputs: "fc" }
  outputs: "out"
}
train { seed: 3 }
)";

// Two instances of one block (convolution, BatchNorm, ReLU): inlined as "b1/conv"...
const char* kBlocks = R"(
name: "blocks"
model {
  name: "blocks"
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [2, 6, 6] } } } }
  nodes { name: "b1" op: "Unit" inputs: "x" attrs { key: "ch" value { i: 4 } } }
  nodes { name: "b2" op: "Unit" inputs: "b1" attrs { key: "ch" value { i: 5 } } }
  nodes { name: "fl" op: "Flatten" inputs: "b2" }
  nodes { name: "fc" op: "Linear" inputs: "fl" attrs { key: "out_features" value { i: 3 } } }
  outputs: "fc"
  blocks {
    name: "Unit"
    params { key: "ch" value { i: 4 } }
    nodes { name: "in" op: "BlockInput" }
    nodes { name: "conv" op: "Conv2d" inputs: "in" attrs { key: "out_channels" value { s: "$ch" } } attrs { key: "kernel_size" value { ints { values: [3] } } } attrs { key: "padding" value { ints { values: [1] } } } attrs { key: "bias" value { b: false } } }
    nodes { name: "bn" op: "BatchNorm" inputs: "conv" }
    nodes { name: "act" op: "ReLU" inputs: "bn" }
    outputs: "act"
  }
}
train { seed: 5 }
)";

// The sequence and attention ops, each written as several ONNX nodes and read back
// as one: learned and sinusoidal positions, RMSNorm with and without a weight,
// heads split by Reshape and Transpose, rotary embedding of queries and keys,
// causal attention and attention under a float mask, a batched product.
const char* kSequenceOps = R"(
name: "sequence-ops"
model {
  name: "sequence_ops"
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [6, 8] } } } }
  nodes { name: "pos" op: "PositionEmbedding" inputs: "x" attrs { key: "max_len" value { i: 10 } } }
  nodes { name: "sin" op: "PositionEmbedding" inputs: "pos" attrs { key: "kind" value { s: "sinusoidal" } } }
  nodes { name: "norm" op: "RMSNorm" inputs: "sin" }
  nodes { name: "q" op: "Linear" inputs: "norm" attrs { key: "out_features" value { i: 8 } } }
  nodes { name: "k" op: "Linear" inputs: "norm" attrs { key: "out_features" value { i: 8 } } }
  nodes { name: "v" op: "Linear" inputs: "norm" attrs { key: "out_features" value { i: 8 } } }
  nodes { name: "qh" op: "Reshape" inputs: "q" attrs { key: "shape" value { ints { values: [6, 2, 4] } } } }
  nodes { name: "kh" op: "Reshape" inputs: "k" attrs { key: "shape" value { ints { values: [6, 2, 4] } } } }
  nodes { name: "vh" op: "Reshape" inputs: "v" attrs { key: "shape" value { ints { values: [6, 2, 4] } } } }
  nodes { name: "qt" op: "Transpose" inputs: "qh" attrs { key: "perm" value { ints { values: [0, 2, 1, 3] } } } }
  nodes { name: "kt" op: "Transpose" inputs: "kh" attrs { key: "perm" value { ints { values: [0, 2, 1, 3] } } } }
  nodes { name: "vt" op: "Transpose" inputs: "vh" attrs { key: "perm" value { ints { values: [0, 2, 1, 3] } } } }
  nodes { name: "qr" op: "RotaryEmbedding" inputs: "qt" }
  nodes { name: "kr" op: "RotaryEmbedding" inputs: "kt" attrs { key: "base" value { f: 500 } } }
  nodes { name: "att" op: "ScaledDotProductAttention" inputs: ["qr", "kr", "vt"] attrs { key: "causal" value { b: true } } }
  nodes { name: "scores" op: "BatchMatMul" inputs: ["qt", "kt"] attrs { key: "trans_b" value { b: true } } }
  nodes { name: "att2" op: "ScaledDotProductAttention" inputs: ["att", "kt", "vt", "scores"] attrs { key: "scale" value { f: 0.25 } } }
  nodes { name: "back" op: "Transpose" inputs: "att2" attrs { key: "perm" value { ints { values: [0, 2, 1, 3] } } } }
  nodes { name: "merged" op: "Reshape" inputs: "back" attrs { key: "shape" value { ints { values: [6, 8] } } } }
  nodes { name: "plain" op: "RMSNorm" inputs: "merged" attrs { key: "affine" value { b: false } } }
  nodes { name: "out" op: "Linear" inputs: "plain" attrs { key: "out_features" value { i: 5 } } }
  outputs: "out"
}
train { seed: 7 }
)";

// Every op that declares its ONNX form as data (OpDef::onnxForm) after one Linear: at
// its defaults, and with each attribute its form names moved off its default.
std::string declaredOps() {
  std::string text = R"(name: "declared-ops"
model {
  name: "declared_ops"
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [12] } } } }
  nodes { name: "fc" op: "Linear" inputs: "x" attrs { key: "out_features" value { i: 10 } } }
)";
  bool any = false;
  for (const OpDef* op : OpRegistry::instance().all()) {
    if (op->onnxForm.empty()) continue;
    for (bool tuned : {false, true}) {
      const std::string name = op->name + (tuned ? "_tuned" : "");
      text += "  nodes { name: \"" + name + "\" op: \"" + op->name + "\" inputs: \"fc\"";
      for (const AttrDef& a : op->attrs) {
        const double* def = std::get_if<double>(&a.def);
        if (!tuned || !def || op->onnxForm.find(a.name) == std::string::npos) continue;
        text += " attrs { key: \"" + a.name + "\" value { f: " +
                std::to_string(std::clamp(*def == 0 ? 0.5 : *def * 1.5, a.min, a.max)) + " } }";
      }
      text += " }\n";
      any = true;
    }
  }
  if (!any) return {};
  text += "  nodes { name: \"cat\" op: \"Concat\" inputs: [";
  std::string sep;
  for (const OpDef* op : OpRegistry::instance().all())
    if (!op->onnxForm.empty()) {
      text += sep + "\"" + op->name + "\", \"" + op->name + "_tuned\"";
      sep = ", ";
    }
  return text + "] }\n  outputs: \"cat\"\n}\ntrain { seed: 9 }\n";
}

proto::Project parse(const char* text) {
  auto p = parseProject(text, "test.nlproj");
  if (!p) qFatal("%s", p.error().message.c_str());
  return *p;
}

// The seeded weights, with every BatchNorm's statistics and affine parameters
// moved off their initial values so that the normalisation (and its folding)
// changes the outputs.
std::vector<NamedTensor> perturbedWeights(const proto::Project& project) {
  proto::ModelDef m = project.model();
  proto::NodeDef* probe = m.add_nodes();
  std::string out = m.outputs_size() ? m.outputs(0) : std::string();
  for (const auto& n : m.nodes())
    if (out.empty() && n.name() == project.train().loss()) out = n.inputs(0);
  probe->set_name("weights_probe");
  probe->set_op("MSELoss");
  probe->add_inputs(out);
  probe->add_inputs(out);
  CompileOptions o;
  o.batch = 1;
  o.training = false;
  o.seed = project.train().seed();
  o.loss = "weights_probe";
  o.metrics = {"weights_probe"};
  o.keep = {out};
  ParamStore store;
  auto prog = compile(m, o, store);
  if (!prog) qFatal("%s", prog.error().message.c_str());
  std::vector<NamedTensor> tensors = store.exportParams();
  uint64_t state = 12345;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(state >> 11) * 0x1.0p-53;
  };
  for (NamedTensor& t : tensors) {
    const bool mean = t.name.ends_with(".running_mean"), var = t.name.ends_with(".running_var");
    bool bnAffine = false;
    for (const auto& n : project.model().nodes())
      bnAffine = bnAffine || (n.op() == "BatchNorm" &&
                              (t.name == n.name() + ".weight" || t.name == n.name() + ".bias"));
    if (!mean && !var && !bnAffine) continue;
    std::vector<float> v = floatsOf(t);
    for (float& x : v)
      x = var ? float(0.5 + uniform()) : mean ? float(uniform() - 0.5) : float(x + uniform() - 0.5);
    setFloats(t, v);
  }
  return tensors;
}

// Whether the model's data Input takes int32 token ids.
bool tokenInput(const proto::Project& p) {
  for (const auto& node : p.model().nodes())
    if (node.op() == "Input" && !node.attrs().count("field") && node.attrs().count("dtype"))
      return node.attrs().at("dtype").s() == "int32";
  return false;
}

std::vector<float> inputsFor(const proto::Project& p, int64_t n) {
  if (p.data().has_idx()) return fashionSamples(p, n);
  int64_t per = 1;
  for (const auto& node : p.model().nodes())
    if (node.op() == "Input" && !node.attrs().count("field"))
      for (int64_t d : node.attrs().at("shape").ints().values()) per *= d;
  std::vector<float> x(size_t(n * per));
  const bool ids = tokenInput(p);  // token ids, as floats the fixture converts
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = ids ? float((k * 7) % 50) : float(std::sin(double(k) * 0.37) * 1.5);
  return x;
}

int countOps(const proto::Project& p, const std::string& op) {
  int c = 0;
  for (const auto& n : p.model().nodes()) c += n.op() == op;
  return c;
}

}  // namespace

class TestOnnx : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    if (!onnxAvailable()) QSKIP("this build has no libonnx: ONNX export and import are left out");
  }

  // Every layer writes itself as ONNX from its op file (a form as data, or its
  // export), and reads itself back: by its form, its arithmetic pattern, or an ONNX
  // op it declares. A layer that reads no input (a constant) becomes an initializer,
  // which the import reads as a weight: it has no ONNX node of its own.
  void everyLayerDeclaresItsOnnxForm() {
    QStringList noExport, noImport;
    int declared = 0;
    for (const OpDef* op : OpRegistry::instance().all()) {
      if (op->role != OpRole::Layer || op->external) continue;
      ++declared;
      if (op->onnxForm.empty() && !op->onnxExport) noExport << QString::fromStdString(op->name);
      if (op->onnxForm.empty() && op->onnxImport.empty() && !op->onnxPointwise &&
          !op->onnxPattern && !op->inputs.empty())
        noImport << QString::fromStdString(op->name);
    }
    QVERIFY2(noExport.isEmpty(), qPrintable("no ONNX export: " + noExport.join(", ")));
    QVERIFY2(noImport.isEmpty(), qPrintable("no ONNX import: " + noImport.join(", ")));
    QVERIFY2(declared >= 25, qPrintable(QString::number(declared)));
  }

  // The import finds the op file that maps an ONNX op by the op type alone: one
  // owner each.
  void eachOnnxOpHasOneOwner() {
    std::map<std::string, std::string> owner;
    QStringList twice;
    for (const OpDef* op : OpRegistry::instance().all())
      for (const auto& [type, fn] : op->onnxImport) {
        QVERIFY2(fn, (op->name + ": " + type).c_str());
        if (!owner.emplace(type, op->name).second)
          twice << QString::fromStdString(type + " (" + owner[type] + ", " + op->name + ")");
      }
    QVERIFY2(twice.isEmpty(), qPrintable(twice.join(", ")));
    for (const char* type : {"Conv", "Gemm", "MatMul", "BatchNormalization", "Resize", "Pad"})
      QVERIFY2(owner.count(type), type);
  }

  void exportsEveryExampleProject() {
    QTemporaryDir dir;
    QStringList files;
    const QStringList names = exampleProjects();
    QVERIFY(names.size() >= 6);
    for (const QString& name : names) {
      auto project = loadProject(projectPath(name).toStdString());
      QVERIFY2(project.ok(), qPrintable(name));
      for (bool fold : {false, true}) {
        const QString out = dir.filePath(name + (fold ? "-folded" : "") + ".onnx");
        OnnxExportOptions o;
        o.foldBatchNorm = fold;
        Status st = exportOnnx(*project, NETLOOM_SOURCE_DIR "/projects", out.toStdString(), o);
        if (!st) {
          // A project with an op that has no ONNX form is refused naming it, and
          // nothing is written.
          const QString msg = QString::fromStdString(st.message());
          QVERIFY2(
              msg.contains(QRegularExpression("node '[^']+' \\(op \\w+\\): .* has no ONNX form")),
              qPrintable(name + ": " + msg));
          QVERIFY(!QFile::exists(out));
          qInfo("%s: refused: %s", qPrintable(name), qPrintable(msg));
          continue;
        }
        QVERIFY(QFile::exists(out));
        files << out;
      }
    }
    if (!havePython("onnx"))
      QSKIP("/usr/bin/python3 with onnx is missing: Python's checker is not run");
    const char* check = R"PY(
import sys, onnx
for path in sys.argv[1:]:
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    assert m.opset_import[0].version == 17 and m.ir_version == 8, path
    dim = m.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == "batch", path
    for t in m.graph.initializer:
        assert t.data_type != onnx.TensorProto.FLOAT or len(t.raw_data) > 0, (path, t.name)
print("checked", len(sys.argv) - 1)
)PY";
    PyResult r = python(QStringList{"-c", check} + files);
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
    qInfo("%s", qPrintable(r.out.trimmed()));
  }

  void roundTripGivesTheSameOutputs_data() {
    QTest::addColumn<QString>("name");
    for (const QString& name : exampleProjects()) QTest::newRow(qPrintable(name)) << name;
    QTest::newRow("all-ops") << QString("all-ops");
    QTest::newRow("blocks") << QString("blocks");
    QTest::newRow("declared-ops") << QString("declared-ops");
    QTest::newRow("sequence-ops") << QString("sequence-ops");
  }

  void roundTripGivesTheSameOutputs() {
    QFETCH(QString, name);
    QTemporaryDir dir;
    proto::Project project;
    if (name == "declared-ops") {
      const std::string text = declaredOps();
      if (text.empty()) QSKIP("no op declares its ONNX form as data");
      project = parse(text.c_str());
    } else if (name == "all-ops" || name == "blocks" || name == "sequence-ops") {
      project = parse(name == "all-ops" ? kAllOps : name == "blocks" ? kBlocks : kSequenceOps);
    } else {
      auto loaded = loadProject(projectPath(name).toStdString());
      QVERIFY(loaded.ok());
      project = *loaded;
    }
    const std::string weights = dir.filePath("weights.safetensors").toStdString();
    QVERIFY(writeSafetensors(weights, perturbedWeights(project)).ok());
    const int64_t n = 8;
    const std::vector<float> x = inputsFor(project, n);
    QVERIFY(!x.empty());
    Output want = forward(project, weights, x, n);
    QVERIFY2(want.error.empty(), want.error.c_str());
    for (bool fold : {false, true}) {
      const QString tag = fold ? "folded" : "plain";
      const std::string onnx = dir.filePath(tag + ".onnx").toStdString();
      const std::string back = dir.filePath(tag + ".nlproj").toStdString();
      OnnxExportOptions o;
      o.initWeights = weights;
      o.foldBatchNorm = fold;
      Status st = exportOnnx(project, dir.path().toStdString(), onnx, o);
      if (!st && name != "declared-ops" &&
          QString::fromStdString(st.message()).contains("has no ONNX form"))
        QSKIP(qPrintable("refused, as exportsEveryExampleProject checks: " +
                         QString::fromStdString(st.message())));
      QVERIFY2(st.ok(), st ? "" : st.message().c_str());
      st = importOnnx(onnx, back);
      QVERIFY2(st.ok(), st ? "" : st.message().c_str());
      auto imported = loadProject(back);
      QVERIFY(imported.ok());
      QCOMPARE(imported->train().init_weights(), tag.toStdString() + ".safetensors");
      Output got = forward(*imported, dir.filePath(tag + ".safetensors").toStdString(), x, n);
      QVERIFY2(got.error.empty(), got.error.c_str());
      QCOMPARE(got.shape, want.shape);
      const double diff = maxAbsDiff(got.values, want.values);
      qInfo("%s %s: max abs diff %.3g over %lld samples", qPrintable(name), qPrintable(tag), diff,
            static_cast<long long>(n));
      QVERIFY2(diff <= 1e-5, qPrintable(QString::number(diff)));
      const int bn = name == "blocks" ? 2 : countOps(project, "BatchNorm");
      if (!fold) QCOMPARE(countOps(*imported, "BatchNorm"), bn);
      if (fold && bn > 0) QVERIFY(countOps(*imported, "BatchNorm") < bn);
      // Each declared op and pattern comes back as itself, its attributes read from
      // the nodes.
      for (const auto& node : project.model().nodes()) {
        const OpDef* op = OpRegistry::instance().find(node.op());
        if (!op || (op->onnxForm.empty() && !op->onnxPattern)) continue;
        QVERIFY2(countOps(*imported, node.op()) == countOps(project, node.op()), node.op().c_str());
      }
    }
  }

  void weightsComeFromTheSeedOrTheProject() {
    QTemporaryDir dir;
    auto project = loadProject(projectPath("fashion-lenet").toStdString());
    QVERIFY(project.ok());
    // No weights anywhere: the seeded initialisation a run starts from.
    const std::string onnx = dir.filePath("seeded.onnx").toStdString();
    QVERIFY(exportOnnx(*project, dir.path().toStdString(), onnx).ok());
    QVERIFY(importOnnx(onnx, dir.filePath("seeded.nlproj").toStdString()).ok());
    auto seeded = readSafetensors(dir.filePath("seeded.safetensors").toStdString());
    QVERIFY(seeded.ok());
    std::map<std::string, std::vector<float>> byName;
    for (const NamedTensor& t : *seeded) byName[t.name] = floatsOf(t);
    proto::Project plain = *project;
    for (const NamedTensor& t : perturbedWeights(plain)) {
      QVERIFY2(byName.count(t.name), t.name.c_str());
      if (!t.name.ends_with("running_mean") && !t.name.ends_with("running_var"))
        QCOMPARE(byName[t.name], floatsOf(t));
    }
    // train.init_weights, relative to the project's folder.
    auto convbn = loadProject(projectPath("fashion-convbn").toStdString());
    QVERIFY(convbn.ok());
    std::vector<NamedTensor> mine = perturbedWeights(*convbn);
    QVERIFY(writeSafetensors(dir.filePath("mine.safetensors").toStdString(), mine).ok());
    convbn->mutable_train()->set_init_weights("mine.safetensors");
    const std::string onnx2 = dir.filePath("mine.onnx").toStdString();
    QVERIFY(exportOnnx(*convbn, dir.path().toStdString(), onnx2).ok());
    QVERIFY(importOnnx(onnx2, dir.filePath("mine-back.nlproj").toStdString()).ok());
    auto back = readSafetensors(dir.filePath("mine-back.safetensors").toStdString());
    QVERIFY(back.ok());
    byName.clear();
    for (const NamedTensor& t : *back) byName[t.name] = floatsOf(t);
    for (const NamedTensor& t : mine) QCOMPARE(byName[t.name], floatsOf(t));
  }

  void refusesWhatHasNoOnnxForm_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");
    // A window ceil_mode adds past the padding is averaged differently by runtimes.
    QTest::newRow("avgpool ceil") << R"(
model {
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [1, 5, 5] } } } }
  nodes { name: "pool" op: "AvgPool2d" inputs: "x" attrs { key: "kernel_size" value { ints { values: [2] } } } attrs { key: "ceil_mode" value { b: true } } }
  outputs: "pool"
})"
                                  << "node 'pool' (op AvgPool2d): attribute ceil_mode=true with a "
                                     "last window past the padding "
                                     "has no ONNX form";
    QTest::newRow("loss as output")
        << R"(
model {
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [4] } } } }
  nodes { name: "y" op: "Input" attrs { key: "shape" value { ints { values: [4] } } } attrs { key: "field" value { s: "label" } } }
  nodes { name: "fc" op: "Linear" inputs: "x" attrs { key: "out_features" value { i: 4 } } }
  nodes { name: "mse" op: "MSELoss" inputs: ["fc", "y"] }
  outputs: "mse"
})"
        << "node 'mse' (op MSELoss): a loss or metric on the way to "
           "the model's outputs has no ONNX "
           "form";  // A declared op whose ONNX forms leave out an attribute set off its default.
    QTest::newRow("softplus threshold") << R"(
model {
  nodes { name: "x" op: "Input" attrs { key: "shape" value { ints { values: [4] } } } }
  nodes { name: "sp" op: "Softplus" inputs: "x" attrs { key: "threshold" value { f: 5 } } }
  outputs: "sp"
})"
                                        << "node 'sp' (op Softplus): attribute threshold=5";
  }

  void refusesWhatHasNoOnnxForm() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const QByteArray utf8 = text.toUtf8();
    proto::Project p = parse(utf8.constData());
    const QString out = dir.filePath("refused.onnx");
    Status st = exportOnnx(p, dir.path().toStdString(), out.toStdString());
    QVERIFY(!st.ok());
    QVERIFY2(QString::fromStdString(st.message()).contains(expected), st.message().c_str());
    QVERIFY(!QFile::exists(out));
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 0);
  }

  void netloomTrainConverts() {
    QTemporaryDir dir;
    const QString onnx = dir.filePath("convbn.onnx"), back = dir.filePath("convbn.nlproj");
    auto r = netloom::testing::runTrain(
        {projectPath("fashion-convbn"), "--export-onnx", onnx, "--fold-bn"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("wrote ONNX"));
    r = netloom::testing::runTrain({"--import-onnx", onnx, "--to", back});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(QFile::exists(back) && QFile::exists(dir.filePath("convbn.safetensors")));
    // The imported project trains from its own weights once it is given data.
    auto project = loadProject(back.toStdString());
    QVERIFY(project.ok());
    QCOMPARE(project->train().loss(), std::string("loss"));
    QCOMPARE(countOps(*project, "BatchNorm"), 0);
    auto original = loadProject(projectPath("fashion-convbn").toStdString());
    *project->mutable_data() = original->data();
    QVERIFY(saveProject(back.toStdString(), *project).ok());
    r = netloom::testing::runTrain({back, "--max-steps", "2", "--train-limit", "64", "--test-limit",
                                    "32", "--batch-size", "16", "--quiet"});
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
  }

  // Each exported model with its inputs and NetLoom's outputs, for
  // tests/interop/ort_parity.sh, which sets NETLOOM_ONNX_PARITY_DIR (else a
  // temporary folder, whose cases are checked to be complete).
  void writeParityCases() {
    QTemporaryDir scratch;
    const QByteArray where = qgetenv("NETLOOM_ONNX_PARITY_DIR");
    QDir out(where.isEmpty() ? scratch.path() : QString::fromUtf8(where));
    QVERIFY(out.mkpath("."));
    QTemporaryDir dir;
    QStringList names = exampleProjects();
    names << "all-ops"
          << "sequence-ops";
    const std::string declared = declaredOps();
    if (!declared.empty()) names << "declared-ops";
    for (const QString& name : names) {
      proto::Project project = name == "all-ops"        ? parse(kAllOps)
                               : name == "sequence-ops" ? parse(kSequenceOps)
                               : name == "declared-ops"
                                   ? parse(declared.c_str())
                                   : *loadProject(projectPath(name).toStdString());
      const std::string weights = dir.filePath(name + ".safetensors").toStdString();
      QVERIFY(writeSafetensors(weights, perturbedWeights(project)).ok());
      const int64_t n = 8;
      const std::vector<float> x = inputsFor(project, n);
      Output want = forward(project, weights, x, n);
      QVERIFY2(want.error.empty(), want.error.c_str());
      for (bool fold : {false, true}) {
        const QString base = out.filePath(name + (fold ? "-folded" : ""));
        OnnxExportOptions o;
        o.initWeights = weights;
        o.foldBatchNorm = fold;
        Status st =
            exportOnnx(project, dir.path().toStdString(), (base + ".onnx").toStdString(), o);
        if (!st && QString::fromStdString(st.message()).contains("has no ONNX form")) continue;
        QVERIFY2(st.ok(), st ? "" : st.message().c_str());
        QVERIFY(writeFloats(base + ".input.bin", x));
        QFile shape(base + ".shape");
        QVERIFY(shape.open(QIODevice::WriteOnly));
        shape.write(QByteArray::number(qlonglong(n)));
        for (const auto& node : project.model().nodes())
          if (node.op() == "Input" && !node.attrs().count("field"))
            for (int64_t d : node.attrs().at("shape").ints().values())
              shape.write(" " + QByteArray::number(qlonglong(d)));
        shape.close();
        if (tokenInput(project)) {  // parity.js feeds int32 where this says so
          QFile dtype(base + ".dtype");
          QVERIFY(dtype.open(QIODevice::WriteOnly));
          dtype.write("int32");
        }
        QVERIFY(writeFloats(base + ".netloom.bin", want.values));
      }
    }
    // Every written model has its input, shape and NetLoom's outputs beside it, and
    // the declared ops' model is among them.
    const QStringList models = out.entryList({"*.onnx"}, QDir::Files);
    QVERIFY(models.size() >= names.size());
    QVERIFY(declared.empty() || models.contains("declared-ops.onnx"));
    for (const QString& m : models)
      for (const char* ext : {".input.bin", ".shape", ".netloom.bin"})
        QVERIFY2(out.exists(m.chopped(5) + ext), qPrintable(m + ext));
  }
};

QTEST_GUILESS_MAIN(TestOnnx)
#include "tst_onnx.moc"
