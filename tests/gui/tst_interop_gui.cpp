// The IDE's ways in and out, through the real window (offscreen): Data ▸ Use Image
// Folder… lists a folder off the GUI thread and previews its classes before it
// becomes the data source (one undo step); File ▸ Export ▸ ONNX… and PyTorch…
// write their files; File ▸ Import ONNX… makes a project and opens it.
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QUndoStack>
#include <QtTest>
#include <filesystem>
#include <functional>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

#include "../common/wait.h"
#include "editor/document.h"
#include "engine/interop/onnx.h"
#include "gui/image_data_dialog.h"
#include "gui/interop_actions.h"
#include "gui/main_window.h"

using namespace netloom;
using netloom::gui::ImageDataDialog;
using netloom::gui::MainWindow;

namespace {

void writePng(const QString& path, uint8_t value) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  std::vector<uint8_t> px(28 * 28, value);
  QVERIFY(stbi_write_png(path.toLocal8Bit().constData(), 28, 28, 1, px.data(), 28));
}

QString lenet() {
  return QString(NETLOOM_SOURCE_DIR) + "/projects/fashion-lenet.nlproj";
}

}  // namespace

class TestInteropGui : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

 private slots:
  void theMenusHoldTheActions() {
    // Each action is reachable from the menu bar (in a menu or a submenu of one), under
    // a title a user can read.
    MainWindow w;
    QMap<QAction*, QString> reachable;  // action -> the menu path it is under
    std::function<void(QMenu*, const QString&)> walk = [&](QMenu* menu, const QString& path) {
      for (QAction* a : menu->actions()) {
        reachable.insert(a, path);
        if (a->menu()) walk(a->menu(), path + " ▸ " + a->menu()->title());
      }
    };
    for (QAction* top : w.menuBar()->actions())
      if (top->menu()) walk(top->menu(), top->menu()->title());
    QVERIFY(reachable.size() > 10);
    for (const char* name : {"useImageFolder", "useImageList", "exportOnnx", "exportOnnxFolded",
                             "exportPytorch", "importOnnx"}) {
      QAction* a = w.action(name);
      QVERIFY2(a, name);
      QVERIFY2(reachable.contains(a), qPrintable(QString(name) + " is in no menu"));
      QVERIFY2(!a->text().remove('&').trimmed().isEmpty(), name);
    }
  }

  void anImageFolderIsPreviewedThenUsed() {
    const QString project = m_dir.filePath("folder/lenet.nlproj");
    QDir().mkpath(m_dir.filePath("folder"));
    QVERIFY(QFile::copy(lenet(), project));
    const QString images = m_dir.filePath("folder/pictures");
    for (int i = 0; i < 2; ++i) writePng(images + QString("/coat/%1.png").arg(i), 40);
    for (int i = 0; i < 3; ++i) writePng(images + QString("/bag/%1.png").arg(i), 200);
    QDir().mkpath(images + "/empty");
    MainWindow w;
    QVERIFY(w.openFile(project));
    const proto::DataDef before = w.document()->data();

    ImageDataDialog dialog(w.document(), ImageDataDialog::Kind::Folder, &w);
    QSignalSpy ready(&dialog, &ImageDataDialog::previewReady);
    dialog.setTrainPath(images);
    QVERIFY(ready.wait(testing::kHangMs));
    auto* classes = dialog.findChild<QTableWidget*>("imageClasses");
    auto* samples = dialog.findChild<QListWidget*>("imageSamples");
    auto* summary = dialog.findChild<QLabel*>("imageSummary");
    QVERIFY(classes && samples && summary);
    QCOMPARE(classes->rowCount(), 3);
    QCOMPARE(classes->item(0, 0)->text(), QString("bag"));
    QCOMPARE(classes->item(0, 1)->text(), QString("3"));
    QCOMPARE(classes->item(1, 1)->text(), QString("2"));
    QCOMPARE(classes->item(2, 1)->text(), QString("0"));
    QCOMPARE(samples->count(), 5);
    QVERIFY(!samples->item(0)->icon().isNull());
    QCOMPARE(samples->item(0)->text(), QString("bag"));
    QVERIFY2(summary->text().contains("5 images in 3 classes"), qPrintable(summary->text()));
    QVERIFY2(summary->text().contains("holds no images"), qPrintable(summary->text()));

    // The model's input gives the shape; the path is kept relative to the project.
    QVERIFY(dialog.apply());
    const proto::DataDef& data = w.document()->data();
    QVERIFY(data.has_image_folder());
    QCOMPARE(data.image_folder().train(), std::string("pictures"));
    QCOMPARE(data.image_folder().channels(), 1);
    QCOMPARE(data.image_folder().height(), 28);
    QCOMPARE(data.class_names_size(), 3);
    QCOMPARE(data.class_names(0), std::string("bag"));
    // Saved and read back, the source is the same.
    QVERIFY(w.saveAs(project));
    MainWindow again;
    QVERIFY(again.openFile(project));
    QCOMPARE(again.document()->data().image_folder().train(), std::string("pictures"));
    // One step undoes it.
    w.document()->undoStack()->undo();
    QVERIFY(w.document()->data().has_idx());
    QCOMPARE(w.document()->data().SerializeAsString(), before.SerializeAsString());

    // A path that is not a folder says so, and nothing is applied.
    ImageDataDialog bad(w.document(), ImageDataDialog::Kind::Folder, &w);
    QSignalSpy badReady(&bad, &ImageDataDialog::previewReady);
    bad.setTrainPath(m_dir.filePath("nowhere"));
    QVERIFY(badReady.wait(testing::kHangMs));
    QVERIFY(bad.findChild<QLabel*>("imageSummary")->text().contains("does not exist"));
    QVERIFY(!bad.apply());
    QVERIFY(w.document()->data().has_idx());
  }

  void anImageListIsPreviewedThenUsed() {
    const QString dir = m_dir.filePath("list");
    for (int i = 0; i < 3; ++i) writePng(dir + QString("/img/a%1.png").arg(i), 90);
    writePng(dir + "/img/b0.png", 10);
    QFile csv(dir + "/train.csv");
    QVERIFY(csv.open(QIODevice::WriteOnly));
    csv.write(
        "path,label\nimg/a0.png,shoe\nimg/a1.png,shoe\nimg/b0.png,bag\n"
        "img/a2.png,shoe\nnotes.txt,bag\n");
    csv.close();
    const QString project = dir + "/lenet.nlproj";
    QVERIFY(QFile::copy(lenet(), project));
    MainWindow w;
    QVERIFY(w.openFile(project));
    ImageDataDialog dialog(w.document(), ImageDataDialog::Kind::List, &w);
    QSignalSpy ready(&dialog, &ImageDataDialog::previewReady);
    dialog.setTrainPath("train.csv");  // relative to the project
    QVERIFY(ready.wait(testing::kHangMs));
    auto* classes = dialog.findChild<QTableWidget*>("imageClasses");
    QCOMPARE(classes->rowCount(), 2);
    QCOMPARE(classes->item(0, 0)->text(), QString("bag"));
    QCOMPARE(classes->item(1, 1)->text(), QString("3"));
    QCOMPARE(dialog.findChild<QListWidget*>("imageSamples")->count(), 4);
    const QString summary = dialog.findChild<QLabel*>("imageSummary")->text();
    QVERIFY2(summary.contains("notes.txt"), qPrintable(summary));  // not an image: reported
    QVERIFY(dialog.apply());
    const proto::DataDef& data = w.document()->data();
    QVERIFY(data.has_image_list());
    QCOMPARE(data.image_list().train(), std::string("train.csv"));
    QVERIFY(data.image_list().has_header());
  }

  void exportsAndImportsFromTheMenus() {
    const QString project = m_dir.filePath("menus/lenet.nlproj");
    QDir().mkpath(m_dir.filePath("menus"));
    QVERIFY(QFile::copy(lenet(), project));
    MainWindow w;
    QVERIFY(w.openFile(project));
    QStringList asked;
    QMap<QString, QString> answers{{"onnx-out", m_dir.filePath("menus/out.onnx")},
                                   {"pytorch-dir", m_dir.filePath("menus/torch")},
                                   {"onnx-in", m_dir.filePath("menus/out.onnx")},
                                   {"project-out", m_dir.filePath("menus/imported.nlproj")}};
    w.interop()->setPathPrompt([&](const QString& kind, const QString&) {
      asked << kind;
      return answers.value(kind);
    });
    w.action("exportPytorch")->trigger();
    for (const char* f : {"model.py", "train.py", "README.md"})
      QVERIFY2(QFile::exists(m_dir.filePath("menus/torch/") + f), f);
    if (!onnxAvailable()) QSKIP("this build has no ONNX support (libonnx-dev not found)");
    answers["onnx-out"] = m_dir.filePath("menus/folded.onnx");
    w.action("exportOnnxFolded")->trigger();
    QVERIFY2(QFile::exists(answers["onnx-out"]), qPrintable(w.lastMessage()));
    answers["onnx-out"] = m_dir.filePath("menus/out.onnx");
    w.action("exportOnnx")->trigger();
    QVERIFY2(QFile::exists(answers["onnx-out"]), qPrintable(w.lastMessage()));
    QVERIFY2(w.lastMessage().contains("initial weights"), qPrintable(w.lastMessage()));
    w.action("importOnnx")->trigger();
    QCOMPARE(asked, (QStringList{"pytorch-dir", "onnx-out", "onnx-out", "onnx-in", "project-out"}));
    QVERIFY2(QFile::exists(answers["project-out"]), qPrintable(w.lastMessage()));
    QCOMPARE(w.document()->filePath(), answers["project-out"]);
    QVERIFY(w.document()->analysis().ok());
    QVERIFY(!w.document()->train().init_weights().empty());
  }
};

QTEST_MAIN(TestInteropGui)
#include "tst_interop_gui.moc"
