// A newcomer's first network, through the real window and the keys a person presses:
// File ▸ New, Data ▸ Choose Dataset (the installed Fashion-MNIST), five layers added
// with Tab from the Input down (Flatten, Linear, ReLU, Linear, SoftmaxCrossEntropy),
// two sizes typed in the inspector, F5 (which asks where to save the untitled
// project, then trains) and F7: a finished run with accuracy on the charts and a
// confusion matrix. No path, no shape and no label input is typed or drawn. The
// count of clicks and keys is printed; the README records it.
#include <qcustomplot.h>

#include <QComboBox>
#include <QDialogButtonBox>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "../common/wait.h"
#include "editor/document.h"
#include "editor/palette.h"
#include "editor/panels.h"
#include "editor/scene.h"
#include "editor/view.h"
#include "gui/charts.h"
#include "gui/dataset_dialog.h"
#include "gui/evaluation.h"
#include "gui/first_run.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"
#include "gui/settings_form.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::testing::waitForSignals;
using netloom::testing::waitUntil;

class TestNewcomer : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  int m_clicks = 0, m_keys = 0;

  void click(QWidget* w) {
    QTest::mouseClick(w, Qt::LeftButton);
    ++m_clicks;
  }
  void type(QWidget* w, const QString& text) {
    QTest::keyClicks(w, text);
    m_keys += int(text.size());
  }
  void key(QWidget* w, Qt::Key k) {
    QTest::keyClick(w, k);
    ++m_keys;
  }
  // A window shortcut: the action the key is bound to (an offscreen window is never
  // the active one that shortcuts reach).
  void press(MainWindow& w, const char* action, Qt::Key k) {
    QAction* a = w.action(action);
    QVERIFY(a);
    QCOMPARE(a->shortcut(), QKeySequence(k));
    a->trigger();
    ++m_keys;
  }
  // Tab on the canvas with the chain's last node selected, then the layer's name.
  void addAfterSelected(MainWindow& w, const QString& op) {
    editor::GraphView* view = w.view();
    view->setFocus();
    key(view, Qt::Key_Tab);
    auto* field = view->quickAdd()->findChild<QLineEdit*>();
    QVERIFY(field && field->isVisible());
    type(field, op);
    key(field, Qt::Key_Return);
  }
  void setSize(MainWindow& w, int value) {
    auto* spin = qobject_cast<QSpinBox*>(w.inspector()->fieldFor("out_features"));
    QVERIFY(spin);
    spin->setFocus();
    spin->selectAll();
    ++m_clicks;  // the field, clicked
    type(spin, QString::number(value));
    key(spin, Qt::Key_Return);
  }

 private slots:
  void initTestCase() {
    if (installedFashionMnist().isEmpty()) QSKIP("Debian's dataset-fashion-mnist is not installed");
    QVERIFY(m_dir.isValid());
    qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
  }

  void fromAnEmptyCanvasToAnEvaluatedNetwork() {
    MainWindow w;
    w.resize(1366, 768);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QApplication::setActiveWindow(&w);
    editor::GraphDocument* doc = w.document();

    // The empty canvas says where to start.
    QVERIFY(w.firstRunPage()->isVisible());
    QVERIFY(w.firstRunPage()->findChild<QLabel*>("firstRunKeys")->text().contains("F5"));

    // File ▸ New, then New from Dataset… on the first-run page.
    w.action("new")->trigger();
    ++m_clicks;
    w.setDatasetHook([&](DatasetDialog& d) {
      d.show();
      // The installed Fashion-MNIST is offered first, and previewed off the GUI thread.
      QSignalSpy ready(&d, &DatasetDialog::previewReady);
      if (!d.preview().status.ok() || d.classTable()->rowCount() == 0) waitForSignals(ready);
      [&] {
        QCOMPARE(d.source(), DatasetDialog::Source::Fashion);
        QCOMPARE(d.classTable()->rowCount(), 10);
        QCOMPARE(d.classTable()->item(0, 0)->text(), QString("T-shirt/top"));
        QCOMPARE(d.classTable()->item(9, 1)->text(), QString("6000"));
        QVERIFY(d.sampleGrid()->count() >= 10);
      }();
      auto* box = d.findChild<QDialogButtonBox*>();
      click(box->button(QDialogButtonBox::Ok));
      return d.result() == QDialog::Accepted;
    });
    click(w.firstRunPage()->findChild<QPushButton*>("newFromDataset"));
    QVERIFY(!w.firstRunPage()->isVisible());

    // The dataset shaped the Input and set the classes and a normalisation measured
    // on the training split.
    const editor::NodeId input = doc->findNode("image");
    QVERIFY(input >= 0);
    QCOMPARE(doc->analysis().nodes.at("image").outputs[0].shape.size(), size_t(4));
    QCOMPARE(doc->data().class_names_size(), 10);
    QCOMPARE(doc->data().normalization().kind(), proto::Normalization::FIXED);
    QVERIFY(std::abs(doc->data().normalization().mean() - 0.286) < 0.01);
    QVERIFY(std::abs(doc->data().normalization().std() - 0.353) < 0.01);

    // Four layers and the loss, each added with Tab after the one before.
    w.scene()->selectNodes({input});
    ++m_clicks;
    addAfterSelected(w, "Flatten");
    addAfterSelected(w, "Linear");
    setSize(w, 128);
    addAfterSelected(w, "ReLU");
    addAfterSelected(w, "Linear");
    setSize(w, 10);
    addAfterSelected(w, "SoftmaxC");  // enough to find SoftmaxCrossEntropy
    QVERIFY2(doc->analysis().ok(),
             qPrintable(QString::fromStdString(doc->analysis().problems.front().message)));
    QCOMPARE(int(doc->nodes().size()), 6);  // no label input was drawn
    QCOMPARE(w.problems()->count(), 0);

    // Kept short for the test suite (a person would leave these): a subset, one epoch.
    proto::DataDef data = doc->data();
    data.set_train_limit(3000);
    data.set_test_limit(1000);
    doc->setSettings(doc->train(), data, "subset");

    // F5 on the untitled project asks where to save it, then trains.
    const QString path = m_dir.filePath("first.nlproj");
    w.setSavePathPrompt([&](const QString& suggestion) {
      [&] { QVERIFY(suggestion.endsWith(".nlproj")); }();
      m_keys += 7;  // a name, then Enter
      return path;
    });
    QSignalSpy ended(w.runs(), &RunController::runEnded);
    press(w, "run", Qt::Key_F5);
    QVERIFY2(w.runs()->running() || ended.count(), qPrintable(w.lastMessage()));
    QVERIFY2(waitForSignals(ended), qPrintable(w.lastMessage()));
    QVERIFY2(ended.first().first().toBool(), qPrintable(ended.first().at(1).toString()));
    QCOMPARE(doc->filePath(), path);
    // The only loss node, named for the run in the project.
    const editor::NodeId loss = doc->findNode(doc->train().loss());
    QVERIFY(loss >= 0);
    QCOMPARE(doc->node(loss).def.op(), std::string("SoftmaxCrossEntropy"));

    // Accuracy on the charts, and well above chance.
    TrainingCharts* charts = w.runs()->charts();
    QVERIFY(charts->epochPoints() >= 1);
    const double accuracy = charts->epochPlot()->graph(2)->data()->at(0)->value;
    QVERIFY2(accuracy > 0.6, qPrintable(QString::number(accuracy)));

    // F7: the confusion matrix of the test set.
    press(w, "evaluateRun", Qt::Key_F7);
    QVERIFY(w.evaluationWindow()->isVisible());
    QCOMPARE(w.evaluation()->confusion()->rowCount(), 10);
    QCOMPARE(w.evaluation()->predictions().samples.size(), int64_t(1000));
    qInfo("newcomer path: %d clicks and %d keys", m_clicks, m_keys);
  }
};

QTEST_MAIN(TestNewcomer)
#include "tst_newcomer.moc"
