// Convolutions the compiler must refuse: each message names the node and the
// attribute at fault, so the editor can point at both. A valid model of the same
// form compiles, and picks oneDNN unless reference kernels are asked for.
#include <QtTest>

#include "engine/compiler/compile.h"
#include "model_text.h"

using namespace netloom;
using namespace testutil;

namespace {

std::string ints(const std::string& key, const std::string& values) {
  return "attrs { key: '" + key + "' value { ints { values: [" + values + "] } } }";
}

// x (per-sample `shape`) -> `op` named 'conv' with a 3×3 kernel unless `attrs` says
// otherwise -> MSELoss against a target of per-sample shape `target`.
std::string convModel(const std::string& op, const std::string& shape, const std::string& attrs,
                      const std::string& target = "1") {
  std::string kernel =
      attrs.find("'kernel_size'") == std::string::npos ? ints("kernel_size", "3") : std::string();
  return input("x", shape) + input("t", target, "t") + node("conv", op, "x", kernel + attrs) +
         node("loss", "MSELoss", "conv,t");
}

}  // namespace

class TestConvErrors : public QObject {
  Q_OBJECT

 private slots:
  void errorsNameNodeAndAttribute_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QStringList>("mentions");
    auto row = [](const char* name, const std::string& body, QStringList mentions) {
      QTest::newRow(name) << QString::fromStdString(body) << mentions;
    };
    row("kernel larger than the padded input",
        convModel("Conv2d", "2, 4, 4",
                  intAttr("out_channels", 3) + ints("kernel_size", "5") + ints("padding", "0")),
        {"'conv'", "'kernel_size'", "5×5", "larger than the padded input 4×4"});
    row("dilated kernel larger than the padded input",
        convModel("Conv2d", "2, 5, 5",
                  intAttr("out_channels", 3) + ints("kernel_size", "3") + ints("dilation", "3")),
        {"'conv'", "'kernel_size'", "dilated 7×7", "padded input 5×5"});
    row("stride 0",
        convModel("Conv2d", "2, 5, 5", intAttr("out_channels", 3) + ints("stride", "0")),
        {"'conv'", "'stride'"});
    row("groups do not divide the input channels",
        convModel("Conv2d", "3, 5, 5", intAttr("out_channels", 4) + intAttr("groups", 2)),
        {"'conv'", "'groups'", "3 input channels"});
    row("groups do not divide out_channels",
        convModel("Conv2d", "4, 5, 5", intAttr("out_channels", 3) + intAttr("groups", 2)),
        {"'conv'", "'groups'", "out_channels (3)"});
    row("transposed: groups do not divide out_channels",
        convModel("ConvTranspose2d", "4, 3, 3", intAttr("out_channels", 3) + intAttr("groups", 2)),
        {"'conv'", "'groups'", "out_channels (3)"});
    row("transposed: output_padding not below the stride",
        convModel("ConvTranspose2d", "2, 3, 3",
                  intAttr("out_channels", 2) + ints("stride", "2") + ints("output_padding", "2")),
        {"'conv'", "'output_padding'"});
    row("transposed: empty output",
        convModel("ConvTranspose2d", "2, 1, 1",
                  intAttr("out_channels", 2) + ints("kernel_size", "1") + ints("padding", "1")),
        {"'conv'", "'padding'", "empty"});
  }
  void errorsNameNodeAndAttribute() {
    QFETCH(QString, body);
    QFETCH(QStringList, mentions);
    expectCompileError(body.toStdString(), mentions);
  }

  // The scaffolding above is sound: with valid attributes the same models compile,
  // the forward and both gradients on oneDNN, or all on the reference when asked.
  void validModelsCompile_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("kernelPrefix");
    std::string conv =
        convModel("Conv2d", "4, 6, 6",
                  intAttr("out_channels", 2) + intAttr("groups", 2) + ints("stride", "2") +
                      "attrs { key: 'same_padding' value { "
                      "b: true } }",
                  "2, 3, 3");
    std::string deconv = convModel(
        "ConvTranspose2d", "4, 3, 3",
        intAttr("out_channels", 2) + ints("stride", "2") + ints("output_padding", "1"), "2, 8, 8");
    QTest::newRow("conv") << QString::fromStdString(conv) << "onednn.";
    QTest::newRow("conv transpose") << QString::fromStdString(deconv) << "onednn.";
  }
  void validModelsCompile() {
    QFETCH(QString, body);
    QFETCH(QString, kernelPrefix);
    for (bool reference : {false, true}) {
      ParamStore store;
      CompileOptions o;
      o.batch = 2;
      o.referenceKernels = reference;
      o.gradientsOf = {"x"};
      o.updateParams = false;
      auto p = compile(model(body.toStdString()), o, store);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message.c_str());
      int convSteps = 0;
      for (const PlanStep& s : (*p)->steps) {
        const std::string& op = (*p)->graph.nodes[s.node].op->name;
        if (op.find("Conv") == std::string::npos) continue;
        ++convSteps;
        std::string want = reference ? "reference." : kernelPrefix.toStdString();
        QVERIFY2(s.kernel.rfind(want, 0) == 0, (op + " -> " + s.kernel).c_str());
      }
      QCOMPARE(convSteps, 3);  // forward, input gradient, weight gradient
    }
  }
};

QTEST_APPLESS_MAIN(TestConvErrors)
#include "tst_conv_errors.moc"
