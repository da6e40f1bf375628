// Around a training run in the IDE, through the real window: the evaluation view of a
// finished run, inference on an image file, the settings docks that edit the project
// and show its problems as one types, and the charts' smoothing.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QSpinBox>
#include <QTableWidget>
#include <QtTest>

#include "../common/wait.h"
#include "editor/document.h"
#include "editor/panels.h"
#include "engine/io/project_file.h"
#include "gui/charts.h"
#include "gui/evaluation.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"
#include "gui/settings_form.h"
#include "training_fixture.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::trigger;
using netloom::testing::waitForEnd;
using netloom::testing::waitUntil;

class TestTrainingViews : public QObject {
  Q_OBJECT

  netloom::testing::ProjectFolder m_dir;

 private slots:
  void initTestCase() { qputenv("NETLOOM_TRAIN", NETLOOM_TRAIN_EXE); }

  // The evaluation view of a finished run: the confusion matrix counts every test
  // sample, its accuracy is the run's, mistakes and confidence order the grid.
  void evaluationOfARun() {
    MainWindow w;
    QVERIFY(w.openFile(m_dir.spirals("evaluate", 10)));
    trigger(w, "run");
    QVERIFY(waitForEnd(w));
    trigger(w, "evaluateRun");
    const Evaluation& e = w.evaluation()->evaluation();
    int64_t total = 0, diagonal = 0;
    for (int32_t t = 0; t < e.classes; ++t)
      for (int32_t p = 0; p < e.classes; ++p) {
        total += e.confusion[size_t(t * e.classes + p)];
        if (t == p) diagonal += e.confusion[size_t(t * e.classes + p)];
      }
    QCOMPARE(total, int64_t(600));  // the project's test samples
    QCOMPARE(w.evaluation()->confusion()->rowCount(), 3);
    // Its axes are named.
    QVERIFY(w.evaluation()->findChild<QLabel*>("confusionTrueAxis")->text().startsWith("True"));
    QVERIFY(w.evaluation()
                ->findChild<QLabel*>("confusionPredictedAxis")
                ->text()
                .startsWith("Predicted"));
    double runAccuracy = w.runs()->current()->finished()->test_accuracy();
    QVERIFY2(std::fabs(e.accuracy - runAccuracy) < 1e-6,
             qPrintable(QString("%1 vs %2").arg(e.accuracy).arg(runAccuracy)));
    QCOMPARE(double(diagonal) / double(total), e.accuracy);
    int64_t support = 0;
    for (const ClassStats& c : e.perClass) support += c.support;
    QCOMPARE(support, total);
    w.evaluation()->mistakesOnly()->setChecked(true);
    QCOMPARE(int64_t(w.evaluation()->shownSamples().size()), total - diagonal);
    QCOMPARE(int64_t(w.evaluation()->samples()->count()), total - diagonal);
    // Each caption line fits its cell: nothing cut off, nothing over a neighbour.
    QListWidget* grid = w.evaluation()->samples();
    QFontMetrics fm(grid->font());
    for (int i = 0; i < grid->count(); ++i) {
      const QStringList lines = grid->item(i)->text().split('\n');
      QVERIFY(lines.size() <= 2);
      for (const QString& line : lines)
        QVERIFY2(fm.horizontalAdvance(line) + 4 <= grid->gridSize().width(), qPrintable(line));
    }
    w.evaluation()->mistakesOnly()->setChecked(false);
    w.evaluation()->sortBy()->setCurrentIndex(1);  // least confident first
    std::vector<int64_t> order = w.evaluation()->shownSamples();
    for (size_t i = 1; i < order.size(); ++i)
      QVERIFY(e.confidence[size_t(order[i - 1])] <= e.confidence[size_t(order[i])]);
    w.evaluation()->samples()->setCurrentRow(0);
    QVERIFY2(w.evaluation()->detail()->text().contains("Test sample #"),
             qPrintable(w.evaluation()->detail()->text()));
  }

  // Inference on an image file: a test image written out as a PNG and read back
  // gets the class the evaluation gave that test sample.
  void predictsAnImageFile() {
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/fashion-lenet.nlproj");
    QVERIFY(p.ok());
    QString dir = m_dir.filePath("lenet");
    QDir().mkpath(dir);
    auto* d = p->mutable_data();
    d->set_train_limit(512);
    d->set_test_limit(64);
    auto* idx = d->mutable_idx();
    QDir base(NETLOOM_SOURCE_DIR "/projects");
    for (std::string* f : {idx->mutable_train_images(), idx->mutable_train_labels(),
                           idx->mutable_test_images(), idx->mutable_test_labels()})
      *f = base.absoluteFilePath(QString::fromStdString(*f)).toStdString();
    p->mutable_train()->set_epochs(1);
    QString path = dir + "/lenet.nlproj";
    QVERIFY(saveProject(path.toStdString(), *p));
    MainWindow w;
    QVERIFY(w.openFile(path));
    trigger(w, "run");
    QVERIFY(waitForEnd(w));
    QVERIFY(w.evaluateRun());
    EvaluationWidget* ev = w.evaluation();
    QCOMPARE(ev->predictions().samples.size(), int64_t(64));
    QVERIFY(ev->confusion()->horizontalHeaderItem(0)->text() == "T-shirt/top");
    QImage img = sampleImage(ev->predictions().samples, 5);
    QCOMPARE(img.size(), QSize(28, 28));
    QString png = dir + "/sample5.png";
    QVERIFY(img.save(png));
    QVERIFY(ev->predictImage(png).ok());
    int32_t predicted = ev->evaluation().predicted[5];
    QString top = ev->detail()->text().section("<br>", 1, 1);
    QVERIFY2(top.startsWith(ev->confusion()->horizontalHeaderItem(predicted)->text() + ":"),
             qPrintable(ev->detail()->text()));
    QVERIFY(!ev->predictImage(dir + "/missing.png").ok());
  }

  // The Training and Data docks edit the project's settings: undoable, saved, and
  // read by the next run; the Data dock previews samples and counts classes.
  void settingsDocksEditTheProject() {
    QString path = m_dir.spirals("settings", 2);
    MainWindow w;
    QVERIFY(w.openFile(path));
    editor::GraphDocument* doc = w.document();
    std::string before = doc->toText();
    auto* lr = qobject_cast<QDoubleSpinBox*>(w.trainingSettings()->field("optimizer.lr"));
    QVERIFY(lr);
    QCOMPARE(lr->value(), 0.01);
    lr->setValue(0.02);
    QCOMPARE(doc->train().optimizer().lr(), 0.02);
    auto* batch = qobject_cast<QSpinBox*>(w.trainingSettings()->field("batch_size"));
    QVERIFY(batch);
    batch->setValue(64);
    // Every wire's shape carries the batch.
    QCOMPARE(doc->analysis().nodes.at("fc1").outputs[0].shape, (Shape{64, 64}));
    auto* kind = qobject_cast<QComboBox*>(w.trainingSettings()->field("optimizer.kind"));
    QVERIFY(kind);
    kind->setCurrentIndex(kind->findText("SGD"));
    QCOMPARE(doc->train().optimizer().kind(), proto::Optimizer::SGD);
    doc->undoStack()->undo();
    QCOMPARE(doc->train().optimizer().kind(), proto::Optimizer::ADAM);
    QCOMPARE(kind->currentText(), QString("Adam"));  // the form follows the document
    doc->undoStack()->undo();
    doc->undoStack()->undo();
    QCOMPARE(doc->toText(), before);
    doc->undoStack()->redo();
    QVERIFY(w.save());
    QCOMPARE(loadProject(path.toStdString())->train().optimizer().lr(), 0.02);
    // The data dock: a synthetic source's fields, and the preview.
    auto* samples = qobject_cast<QSpinBox*>(w.dataSettings()->field("synthetic.train_samples"));
    QVERIFY(samples);
    QCOMPARE(samples->value(), 1500);
    QVERIFY(w.dataSettings()->preview().ok());
    QCOMPARE(w.dataSettings()->previewSamples()->count(), 48);
    QListWidget* preview = w.dataSettings()->previewSamples();
    QVERIFY(preview->gridSize().isValid());  // a cell per sample: captions never overlap
    for (int i = 1; i < preview->count(); ++i)
      QVERIFY(!preview->visualItemRect(preview->item(i))
                   .intersects(preview->visualItemRect(preview->item(i - 1))));
    QVERIFY2(w.dataSettings()->classCounts()->text().startsWith("1500 training"),
             qPrintable(w.dataSettings()->classCounts()->text()));
  }

  // The docks check settings as a run would: the error names its field, which is
  // drawn red; accepted but suspicious values are warnings; fixing them clears it.
  void settingsDocksShowProblemsAsYouType() {
    QString path = m_dir.spirals("settings-problems", 2);
    MainWindow w;
    QVERIFY(w.openFile(path));
    SettingsForm* train = w.trainingSettings();
    QVERIFY(train->problems()->isHidden());
    // A batch size below 1 cannot be entered: the field starts at 1.
    auto* batch = qobject_cast<QSpinBox*>(train->field("batch_size"));
    QCOMPARE(batch->minimum(), 1);
    auto* threads = qobject_cast<QSpinBox*>(train->field("threads"));
    threads->setValue(5000);
    QVERIFY(!train->problems()->isHidden());
    QVERIFY2(train->problems()->text().contains("train.threads must be at most 1024, got 5000"),
             qPrintable(train->problems()->text()));
    QVERIFY(threads->styleSheet().contains("border"));
    threads->setValue(0);
    QCOMPARE(threads->text(), QString("All cores"));  // never a bare 0
    QVERIFY(train->problems()->isHidden());
    QVERIFY(threads->styleSheet().isEmpty());
    auto* lr = qobject_cast<QDoubleSpinBox*>(train->field("optimizer.lr"));
    lr->setValue(0);
    QVERIFY2(train->problems()->text().contains("warning: train.optimizer.lr is 0"),
             qPrintable(train->problems()->text()));
    // Each dock shows its own part's problems.
    QVERIFY(w.dataSettings()->problems()->isHidden());
    auto* noise = qobject_cast<QDoubleSpinBox*>(w.dataSettings()->field("synthetic.noise"));
    noise->setValue(-1);
    QVERIFY2(w.dataSettings()->problems()->text().contains("data.synthetic.noise"),
             qPrintable(w.dataSettings()->problems()->text()));
    QVERIFY(noise->styleSheet().contains("border"));
  }

  void smoothingIsTensorBoards() {
    std::vector<double> s = smoothed({1, 2, 3}, 0.5);
    // The moving average divided by 1 - w^n, as TensorBoard draws it.
    QCOMPARE(s[0], 1.0);
    QVERIFY(std::fabs(s[1] - (0.5 * 0.5 * 1 + 0.5 * 2) / 0.75) < 1e-12);
    QCOMPARE(smoothed({4, 5}, 0.0), (std::vector<double>{4, 5}));
  }
};

QTEST_MAIN(TestTrainingViews)
#include "tst_training_views.moc"
