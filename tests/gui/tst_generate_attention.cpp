// The Generate panel and the attention maps as a user drives them: a language model
// trains in the IDE with a checkpoint every epoch, and while it goes on, Generate
// samples from its latest checkpoint, streaming the prompt and then each token; the
// text is the one netloom-train --generate gives for the same weights and settings.
// Evaluate then shows the prompt's attention maps, and a ViT's over an image's
// patches; hovering names the pair and the weight. What cannot be sampled or shown
// says why, and no run is disturbed.
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "../common/fashion.h"
#include "../common/tiny_gpt.h"
#include "../common/wait.h"
#include "editor/document.h"
#include "engine/io/project_file.h"
#include "engine/train/generate.h"
#include "gui/attention_view.h"
#include "gui/dataset_dialog.h"
#include "gui/generate_panel.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"
#include "gui/runs.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::waitForSignals;
using netloom::testing::waitUntil;

class TestGenerateAttention : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  testutil::TinyGpt m_gpt;

  // The tiny GPT, training for ever with a checkpoint each epoch, all of them kept.
  QString endlessProject() {
    auto p = loadProject(m_gpt.project);
    if (!p) return {};
    p->mutable_train()->set_epochs(testing::kEndlessEpochs);
    p->mutable_train()->set_threads(1);
    p->mutable_train()->mutable_checkpoint()->set_every_epochs(1);
    QString path = m_dir.filePath("endless.nlproj");
    return saveProject(path.toStdString(), *p) ? path : QString();
  }

 private slots:
  void initTestCase() {
    m_gpt = testutil::writeTinyGpt(m_dir.path());
    QVERIFY(!m_gpt.project.empty());
  }

  // Data ▸ Choose Dataset ▸ Text: the corpus is previewed (its vocabulary and how it
  // begins) and applied as the token Input and the next-token labels, the vocabulary
  // kept in the project. A GPT dropped from the library and a loss then train on it.
  void drawAGptOnText() {
    editor::GraphDocument doc;
    DatasetDialog data(&doc);
    QSignalSpy ready(&data, &DatasetDialog::previewReady);
    data.choose(DatasetDialog::Source::Text);
    data.textContext()->setValue(16);
    data.textPath()->setText(QString::fromStdString(m_gpt.text));
    emit data.textPath()->editingFinished();
    QVERIFY(waitForSignals(ready));
    QVERIFY2(data.preview().status.ok(), data.preview().status.message().c_str());
    QVERIFY2(data.findChild<QLabel*>("datasetSummary")
                 ->text()
                 .contains(QString("a vocabulary of %1").arg(m_gpt.vocab)),
             qPrintable(data.findChild<QLabel*>("datasetSummary")->text()));
    QCOMPARE(data.classTable()->rowCount(), m_gpt.vocab);
    QVERIFY(data.apply());
    const proto::Project chosen = doc.toProject();
    QVERIFY(chosen.data().has_text());
    QCOMPARE(chosen.data().text().vocab_size(), m_gpt.vocab);
    QCOMPARE(chosen.data().text().context(), 16);
    editor::NodeId tokens = doc.findNode("tokens"), next = doc.findNode("next");
    QVERIFY(tokens >= 0 && next >= 0);
    QCOMPARE(doc.node(tokens).def.attrs().at("dtype").s(), std::string("int32"));
    QCOMPARE(doc.node(next).def.attrs().at("shape").ints().values(0), int64_t(16));

    editor::NodeId gpt = doc.addNode("GPT", {300, 0});
    QVERIFY(doc.connectPorts(tokens, 0, gpt, 0));
    proto::AttrValue v;
    v.set_i(m_gpt.vocab);
    doc.setAttr(gpt, "vocab", v);
    v.set_i(16);
    doc.setAttr(gpt, "context", v);
    v.set_i(32);
    doc.setAttr(gpt, "d_model", v);
    v.set_i(64);
    doc.setAttr(gpt, "hidden", v);
    v.Clear();
    for (int d : {-1, 4, 8}) v.mutable_ints()->add_values(d);
    doc.setAttr(gpt, "split", v);
    v.Clear();
    for (int d : {-1, 32}) v.mutable_ints()->add_values(d);
    doc.setAttr(gpt, "merged", v);
    editor::NodeId loss = doc.addNode("SoftmaxCrossEntropy", {600, 0});
    QVERIFY(doc.connectPorts(gpt, 0, loss, 0));
    QVERIFY2(doc.analysis().ok(),
             doc.analysis().ok() ? "" : doc.analysis().problems.front().message.c_str());
    proto::Project p = doc.toProject();
    p.mutable_train()->set_batch_size(4);
    p.mutable_train()->set_loss("softmaxcrossentropy");  // as Training Setup offers it
    TrainOptions o;
    o.maxSteps = 2;
    o.threads = 1;
    auto trained = runTraining(p, o, [](const proto::TrainEvent&) {});
    QVERIFY2(trained.ok(), trained.ok() ? "" : trained.error().message.c_str());
    QCOMPARE(trained->steps, int64_t(2));
  }

  void samplesWhileTheModelTrains() {
    MainWindow w;
    GeneratePanel* panel = w.generatePanel();
    QVERIFY(panel);
    // No run yet: Generate says what to do.
    QVERIFY(!panel->generate());
    QVERIFY2(panel->status()->text().contains("no run"), qPrintable(panel->status()->text()));

    QVERIFY(w.openFile(endlessProject()));
    w.action("run")->trigger();
    QVERIFY(w.runs()->running());
    QVERIFY(waitUntil(
        [&] { return w.runs()->current() && !latestCheckpoint(*w.runs()->current()).isEmpty(); }));

    panel->prompt()->setText("the ");
    panel->maxTokens()->setValue(5);
    panel->topK()->setValue(5);
    panel->seed()->setValue(4);
    QSignalSpy pieces(panel, &GeneratePanel::pieceShown), done(panel, &GeneratePanel::finished);
    QTest::mouseClick(panel->button(), Qt::LeftButton);
    QVERIFY(panel->running());
    QCOMPARE(panel->button()->text(), QString("Stop"));
    QVERIFY(waitForSignals(done));
    QVERIFY2(done[0][0].toBool(), qPrintable(panel->status()->text()));
    QVERIFY(w.runs()->running());  // training went on
    QVERIFY(panel->weightsUsed().contains("checkpoints/step-"));
    QCOMPARE(pieces.count(), 1 + 5);  // the prompt, then each token as it came
    QCOMPARE(pieces[0][0].toString(), QString("the "));
    const QString shown = panel->output()->toPlainText();
    QVERIFY(shown.startsWith("the "));
    QCOMPARE(panel->button()->text(), QString("Generate"));

    GenerateOptions o;
    o.prompt = "the ";
    o.weights = panel->weightsUsed().toStdString();
    o.maxTokens = 5;
    o.temperature = panel->temperature()->value();
    o.topK = 5;
    o.seed = 4;
    auto same = generateText(w.runs()->current()->project, o);
    QVERIFY2(same.ok(), same.ok() ? "" : same.error().message.c_str());
    QCOMPARE(shown, QString::fromStdString(*same));

    QSignalSpy ended(w.runs(), &RunController::runEnded);
    w.runs()->stop();
    QVERIFY(waitForSignals(ended));

    // Evaluate (F7): a language model shows its attention maps, the prompt's tokens
    // down and across; hovering a cell names the pair and its weight.
    QVERIFY(w.evaluateRun());
    QVERIFY(w.evaluationWindow()->isVisible());
    QCOMPARE(w.evaluationTabs()->currentWidget(), static_cast<QWidget*>(w.attention()));
    QVERIFY(!w.evaluationTabs()->isTabEnabled(0));
    AttentionView* view = w.attention();
    view->prompt()->setText("a cat");
    QVERIFY(view->inspect().ok());
    QCOMPARE(int(view->heads().size()), 2);
    HeatMap* head1 = view->heads()[1];
    head1->resize(200, 220);
    const QString hover = head1->describe(head1->cellRect(2, 1).center());
    const float weight = view->maps().layers[0].at(1, 2, 1);
    QVERIFY(weight > 0 && weight < 1);
    QCOMPARE(hover,
             QString("att, head 1, query 2 'c' → key 1 ' ': %1").arg(double(weight), 0, 'f', 3));
    QVERIFY(head1->describe(head1->cellRect(1, 2).center()).endsWith(": 0.000"));  // causal
    QVERIFY(head1->describe(QPoint(199, 219)).isEmpty());
  }

  // A ViT's maps are over an image's patches: the sample is shown beside them and a
  // hover names the patches by row and column.
  void imagePatchesAreNamed() {
    if (!testing::haveFashion()) QSKIP("Fashion-MNIST is not installed (dataset-fashion-mnist)");
    const std::string weights = m_dir.filePath("vit.safetensors").toStdString();
    auto vit = testing::briefVit(weights, 32, 8);
    QVERIFY2(vit.ok(), vit.ok() ? "" : vit.error().message.c_str());
    TrainOptions o;
    o.threads = 1;
    AttentionView view;
    view.sample()->setValue(2);
    QVERIFY(view.showRun(*vit, o, QString::fromStdString(weights)).ok());
    QVERIFY(view.sample()->isVisibleTo(&view) && !view.prompt()->isVisibleTo(&view));
    QCOMPARE(view.layer()->count(), 4);
    view.layer()->setCurrentIndex(3);
    QCOMPARE(int(view.heads().size()), 4);
    HeatMap* h = view.heads()[0];
    h->resize(320, 340);
    QVERIFY2(h->describe(h->cellRect(5, 15).center())
                 .contains("query patch 5 (row 1, column 1) → key patch 15 (row 3, column 3)"),
             qPrintable(h->describe(h->cellRect(5, 15).center())));
    // Drawn: the cell's colour darkens with its weight (every weight of a ViT's row is
    // above 0, and none is 1).
    const QImage shot = h->grab().toImage();
    const QColor cell = shot.pixelColor(h->cellRect(5, 15).center());
    QVERIFY2(cell.red() < 255 && cell.blue() == 255, qPrintable(cell.name()));
    view.sample()->setValue(8);
    QVERIFY(!view.inspect().ok());
    QVERIFY(view.status()->text().contains("8 samples of the test split"));
  }

  // A source that cannot be sampled is named: a project whose data is not text, and
  // weights that are not there (the error names the file).
  void whatCannotBeSampledSaysWhy() {
    GeneratePanel panel;
    auto project = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
    QVERIFY(project.ok());
    panel.setSourceProvider([&]() -> Result<GenerateSource> {
      return GenerateSource{*project, m_dir.path(), m_dir.filePath("w.safetensors"), "r"};
    });
    QVERIFY(!panel.generate());
    QVERIFY2(panel.status()->text().contains("not text"), qPrintable(panel.status()->text()));

    auto gpt = loadProject(m_gpt.project);
    QVERIFY(gpt.ok());
    panel.setSourceProvider([&]() -> Result<GenerateSource> {
      return GenerateSource{*gpt, m_dir.path(), m_dir.filePath("absent.safetensors"), "r"};
    });
    QSignalSpy done(&panel, &GeneratePanel::finished);
    QVERIFY(panel.generate());
    QVERIFY(waitForSignals(done));
    QVERIFY(!done[0][0].toBool());
    QVERIFY2(panel.status()->text().contains("absent.safetensors"),
             qPrintable(panel.status()->text()));
  }
};

QTEST_MAIN(TestGenerateAttention)
#include "tst_generate_attention.moc"
