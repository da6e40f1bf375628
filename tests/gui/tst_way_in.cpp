// The IDE as a newcomer meets it, defect by defect, through the real widgets: a Data
// field left empty wipes nothing; the docks show words, not enum names or zeros, and
// the schedule as a plot; windows and dialogs fit the screen; opening another project
// swaps the charts, status and runs; F5 on an untitled project asks for a name
// first; the compare table reads in any theme; what would stop a run is listed first.
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QScreen>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "../common/wait.h"
#include "editor/document.h"
#include "editor/panels.h"
#include "engine/io/project_file.h"
#include "engine/train/schedule.h"
#include "gui/charts.h"
#include "gui/dataset_dialog.h"
#include "gui/hosts_dialog.h"
#include "gui/main_window.h"
#include "gui/run_comparison.h"
#include "gui/run_controller.h"
#include "gui/screen_fit.h"
#include "gui/settings_form.h"
#include "gui/settings_hints.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::waitForSignals;

class TestWayIn : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

  QString copyProject(const char* name, const QString& folder = {}) {
    QDir(m_dir.path()).mkpath(folder.isEmpty() ? "." : folder);
    QString to = m_dir.filePath((folder.isEmpty() ? "" : folder + "/") + name);
    QFile::remove(to);
    QFile::copy(QString(NETLOOM_SOURCE_DIR "/projects/") + name, to);
    QFile(to).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    return to;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
    qputenv("NETLOOM_PROJECTS", NETLOOM_SOURCE_DIR "/projects");
    qputenv("NETLOOM_TRAIN", NETLOOM_TRAIN_EXE);
  }

  // Tabbing out of an empty CSV path, while the data come from IDX files, is no edit:
  // the IDX paths stay and nothing lands on the undo stack.
  void anEmptyFieldOfAnotherSourceWipesNothing() {
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-mlp.nlproj")));
    editor::GraphDocument* doc = w.document();
    const proto::DataDef before = doc->data();
    QVERIFY(before.has_idx());
    const int undo = doc->undoStack()->count();
    auto* csv = qobject_cast<QLineEdit*>(w.dataSettings()->field("csv.train_path"));
    QVERIFY(csv);
    emit csv->editingFinished();
    auto* fraction = qobject_cast<QDoubleSpinBox*>(w.dataSettings()->field("csv.test_fraction"));
    fraction->setValue(0);  // its default: still no edit
    QVERIFY(doc->data().has_idx());
    QCOMPARE(doc->data().SerializeAsString(), before.SerializeAsString());
    QCOMPARE(doc->undoStack()->count(), undo);
    // Only the source in use is shown.
    QVERIFY(w.dataSettings()->findChild<QGroupBox*>("idx")->isVisibleTo(w.dataSettings()));
    QVERIFY(!w.dataSettings()->findChild<QGroupBox*>("csv")->isVisibleTo(w.dataSettings()));
    // A real edit of the source in use is one step.
    auto* images = qobject_cast<QLineEdit*>(w.dataSettings()->field("idx.train_images"));
    images->setText("elsewhere.gz");
    emit images->editingFinished();
    QCOMPARE(doc->data().idx().train_images(), std::string("elsewhere.gz"));
    QCOMPARE(doc->data().idx().test_images(), before.idx().test_images());
    QCOMPARE(doc->undoStack()->count(), undo + 1);
  }

  // Training Setup speaks words: no enum names, no underscores, no bare zeros where a
  // zero means a default; optimizer rows follow the optimizer; the schedule is drawn.
  void trainingSetupShowsWhatARunUses() {
    MainWindow w;
    w.document()->setProject({});
    SettingsForm* train = w.trainingSettings();
    const QStringList acronyms = {"SGD", "CPU"};
    for (QComboBox* c : train->findChildren<QComboBox*>())
      for (int i = 0; i < c->count(); ++i) {
        const QString t = c->itemText(i);
        // An enum's name reads as one upper-case word: ADAM, KIND_UNSPECIFIED.
        const bool enumName = QRegularExpression("^[A-Z_]+$").match(t).hasMatch();
        QVERIFY2(!t.contains('_') && (!enumName || acronyms.contains(t)), qPrintable(t));
      }
    for (QLabel* l : train->findChildren<QLabel*>())
      QVERIFY2(!l->text().contains('_') && !l->text().startsWith("train."), qPrintable(l->text()));
    auto text = [&](const char* path) {
      QWidget* f = train->field(path);
      if (auto* s = qobject_cast<QAbstractSpinBox*>(f)) return s->text();
      if (auto* c = qobject_cast<QComboBox*>(f)) return c->currentText();
      return QString();
    };
    QCOMPARE(text("optimizer.kind"), QString("Adam (default)"));
    QCOMPARE(text("optimizer.lr"), QString("0.001"));
    QCOMPARE(text("batch_size"), QString("32"));
    QCOMPARE(text("epochs"), QString("1 (default)"));
    QCOMPARE(text("threads"), QString("All cores"));
    QCOMPARE(text("precision"), QString("Float32"));
    QCOMPARE(text("schedule.kind"), QString("Constant (default)"));
    QVERIFY(train->field("optimizer.beta1")->isVisibleTo(train));
    QVERIFY(!train->field("optimizer.momentum")->isVisibleTo(train));
    auto* kind = qobject_cast<QComboBox*>(train->field("optimizer.kind"));
    kind->setCurrentIndex(kind->findText("SGD"));
    QCOMPARE(w.document()->train().optimizer().kind(), proto::Optimizer::SGD);
    QVERIFY(train->field("optimizer.momentum")->isVisibleTo(train));
    QVERIFY(!train->field("optimizer.beta1")->isVisibleTo(train));
    // Precision is chosen, not typed; the choice is the project's value.
    auto* precision = qobject_cast<QComboBox*>(train->field("precision"));
    precision->setCurrentIndex(precision->findData("bf16"));
    emit precision->activated(precision->currentIndex());
    QCOMPARE(w.document()->train().precision(), std::string("bf16"));
    // A device the list lacks is typed, and is the value itself.
    auto* device = qobject_cast<QComboBox*>(train->field("device"));
    QVERIFY(device && device->isEditable());
    device->setFocus();
    device->lineEdit()->selectAll();
    QTest::keyClicks(device->lineEdit(), "cuda:3");
    QTest::keyClick(device->lineEdit(), Qt::Key_Return);
    QCOMPARE(w.document()->train().device(), std::string("cuda:3"));
    device->setCurrentIndex(device->findData("cpu"));
    emit device->activated(device->currentIndex());
    QCOMPARE(w.document()->train().device(), std::string("cpu"));

    // The schedule's plot is the engine's schedule, epoch by epoch.
    proto::TrainDef t = w.document()->train();
    t.set_epochs(4);
    t.mutable_schedule()->set_kind(proto::LrSchedule::COSINE);
    t.mutable_optimizer()->set_lr(0.1);
    w.document()->setSettings(t, w.document()->data(), "cosine");
    const std::vector<QPointF>& points = train->schedulePlot()->points();
    QVERIFY(points.size() > 50);
    QCOMPARE(points.front().y(), 0.1);
    for (const QPointF& p : points) {
      const int64_t step = std::llround(p.x() * 100);
      QCOMPARE(p.y(), learningRate(t.schedule(), 0.1, step, 100, 400));
    }
    QVERIFY(points.back().y() < 0.001);
  }

  // The window and every dialog fit the screen they open on, buttons included.
  void windowsFitTheScreen() {
    MainWindow w;
    const QRect avail = w.screen()->availableGeometry();
    QVERIFY(w.width() <= avail.width() && w.height() <= avail.height());
    HostsDialog hosts(m_dir.filePath("hosts.textproto"), &w);
    hosts.show();
    QVERIFY(onScreen(&hosts));
    auto* save = hosts.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Save);
    QVERIFY(save->isVisible());
    QVERIFY(QRect(QPoint(0, 0), hosts.size()).contains(save->geometry()));
    DatasetDialog data(w.document(), &w);
    data.show();
    QVERIFY(onScreen(&data));
    // A widget that asks for more than the screen gets the screen, no more.
    QWidget big;
    big.setMinimumSize(avail.width() + 400, avail.height() + 400);
    fitToScreen(&big, QSize(5000, 5000));
    QVERIFY(big.width() <= avail.width() && big.height() <= avail.height());
    QVERIFY(onScreen(&big));
  }

  // Opening another project swaps what the charts, the status bar and the run list
  // show for that project's own.
  void openingAnotherProjectSwapsTheRuns() {
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
    QVERIFY(p.ok());
    p->mutable_train()->set_epochs(2);
    p->mutable_train()->set_threads(1);
    QDir(m_dir.path()).mkpath("a");
    const QString a = m_dir.filePath("a/spirals.nlproj");
    QVERIFY(saveProject(a.toStdString(), *p));
    MainWindow w;
    QVERIFY(w.openFile(a));
    QSignalSpy ended(w.runs(), &RunController::runEnded);
    w.action("run")->trigger();
    QVERIFY(waitForSignals(ended));
    QVERIFY(w.runs()->charts()->lossPoints() > 0);
    QVERIFY(!w.runs()->status()->text().isEmpty());
    QCOMPARE(w.runs()->history()->count(), 1);

    QVERIFY(w.openFile(copyProject("fashion-mlp.nlproj", "b")));
    QCOMPARE(w.runs()->charts()->lossPoints(), 0);
    QCOMPARE(w.runs()->charts()->epochPoints(), 0);
    QVERIFY(w.runs()->status()->text().isEmpty());
    QCOMPARE(w.runs()->history()->count(), 0);
    // Back again: its own run, on the charts and in the list.
    QVERIFY(w.openFile(a));
    QCOMPARE(w.runs()->history()->count(), 1);
    QVERIFY(w.runs()->charts()->lossPoints() > 0);
    QVERIFY(w.runs()->status()->text().contains("finished"));
  }

  // F5 on an untitled project asks where to save it; cancelled, nothing starts and
  // the reason is given.
  void runningAnUntitledProjectAsksForAName() {
    MainWindow w;
    w.document()->setProject(*loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj"));
    w.document()->setFilePath({});
    int asked = 0;
    w.setSavePathPrompt([&](const QString& suggestion) {
      ++asked;
      [&] { QVERIFY2(suggestion.endsWith(".nlproj"), qPrintable(suggestion)); }();
      return QString();
    });
    w.action("run")->trigger();
    QCOMPARE(asked, 1);
    QVERIFY(!w.runs()->running());
    QVERIFY2(w.lastMessage().contains("saved"), qPrintable(w.lastMessage()));
  }

  // The compare table names its rows in words and draws how each run ended in the
  // palette's colours, readable in any theme.
  void compareRowsReadInWords() {
    QCOMPARE(settingLabel("result.test_accuracy"), QString("Test accuracy"));
    QCOMPARE(settingLabel("result.train_loss"), QString("Training loss"));
    QCOMPARE(settingLabel("train.optimizer.lr"), QString("Training › optimizer › lr"));
    QCOMPARE(settingLabel("data.csv.train_path"), QString("Data › csv › train path"));
  }

  // An Input drawn without a shape is listed with the way to give it one, and a wire
  // its reader cannot take for want of it is refused with the same sentence.
  void anInputWithoutAShapeSaysHowToGiveItOne() {
    MainWindow w;
    editor::GraphDocument* doc = w.document();
    const editor::NodeId image = doc->addNode("Input", {0, 0}, "image");
    const editor::NodeId flat = doc->addNode("Flatten", {0, 120});
    const QString hint =
        "Input 'image' has no shape: pick a dataset (Data > Choose Dataset…) or set its shape";
    bool listed = false;
    for (int i = 0; i < w.problems()->count(); ++i)
      listed = listed || w.problems()->item(i)->text() == hint;
    QVERIFY(listed);
    const QString refusal = doc->connectRefusal(image, 0, flat, 0);
    QVERIFY2(refusal.startsWith(hint + " (") && refusal.contains("start_dim"), qPrintable(refusal));
    // A label input needs no shape.
    proto::AttrValue label;
    label.set_s("label");
    doc->setAttr(image, "field", label);
    QVERIFY(doc->shapeHint(image).isEmpty());
  }

  // Settings a run would refuse are Problems before F5, naming the field.
  void refusedSettingsAreListedBeforeARun() {
    if (installedFashionMnist().isEmpty())
      QSKIP("Debian's dataset-fashion-mnist is not installed: the project's data is missing");
    MainWindow w;
    QVERIFY(w.openFile(copyProject("fashion-mlp.nlproj", "c")));
    auto listed = [&](const QString& text) {
      for (int i = 0; i < w.problems()->count(); ++i)
        if (w.problems()->item(i)->text().contains(text)) return true;
      return false;
    };
    QCOMPARE(w.problems()->count(), 0);
    proto::DataDef d = w.document()->data();
    d.mutable_normalization()->set_std(0);
    w.document()->setSettings(w.document()->train(), d, "std 0");
    QVERIFY(listed("data.normalization.std must be above 0"));
    d.mutable_normalization()->set_std(0.35);
    proto::TrainDef t = w.document()->train();
    t.set_batch_size(0);
    w.document()->setSettings(t, d, "batch 0");
    QVERIFY(!listed("data.normalization.std"));
    QVERIFY(listed("train.batch_size must be at least 1, got 0"));
    t.set_batch_size(16);
    t.set_loss("nothing");
    w.document()->setSettings(t, w.document()->data(), "loss");
    QVERIFY(listed("train.loss names 'nothing'"));
  }
};

QTEST_MAIN(TestWayIn)
#include "tst_way_in.moc"
