// The Generate panel as a user drives it: a language model trains in the IDE with a
// checkpoint every epoch, and while it goes on, Generate samples from its latest
// checkpoint, streaming the prompt and then each token; the text is the one
// netloom-train --generate gives for the same weights and settings. What cannot be
// sampled says why, and no run is disturbed.
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>

#include "../common/tiny_gpt.h"
#include "../common/wait.h"
#include "engine/io/project_file.h"
#include "engine/train/generate.h"
#include "gui/generate_panel.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"
#include "gui/runs.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::waitForSignals;
using netloom::testing::waitUntil;

class TestGeneratePanel : public QObject {
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

QTEST_MAIN(TestGeneratePanel)
#include "tst_generate_panel.moc"
