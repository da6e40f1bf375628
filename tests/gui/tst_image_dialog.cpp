// Data ▸ Use Image Folder…'s dialog against folders too big to list while the user
// waits: a listing is held part-way by the test, and typing, Cancel and destruction
// must neither wait for it nor use its result; typing fast lists once; a small
// folder still previews and applies.
#include <fcntl.h>
#include <unistd.h>

#include <QDialogButtonBox>
#include <QDir>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPointer>
#include <QPushButton>
#include <QSemaphore>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThreadPool>
#include <QTimer>
#include <QUndoStack>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <memory>

#include "../common/wait.h"
#include "editor/document.h"
#include "gui/image_data_dialog.h"

using namespace netloom;
using netloom::editor::GraphDocument;
using netloom::gui::ImageDataDialog;

namespace {

constexpr size_t kBigFiles = 200000;
constexpr size_t kHoldAt = kBigFiles / 2;  // mid-way through the class folder

// Holds the first listing that reaches `at` entries until the test lets it go. The
// wait is bounded only so that a dialog that waited for its worker fails the test
// (`timedOut`) instead of hanging it.
struct Hold {
  explicit Hold(size_t at) : at(at) {}
  void onEntry(size_t entries) {
    ++calls;
    if (entries != at || taken.exchange(true)) return;
    reached.release();
    if (!go.tryAcquire(1, testing::kHangMs)) timedOut = true;
  }
  const size_t at;
  QSemaphore reached, go;
  std::atomic<bool> taken{false}, timedOut{false};
  std::atomic<size_t> calls{0};
};

// Empty files are enough: listing opens none.
bool makeEmptyFiles(const QString& dir, size_t count) {
  if (!QDir().mkpath(dir)) return false;
  const QByteArray base = QFile::encodeName(dir) + '/';
  for (size_t i = 0; i < count; ++i) {
    const QByteArray path = base + QByteArray::number(qulonglong(i)) + ".png";
    const int fd = ::open(path.constData(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    ::close(fd);
  }
  return true;
}

bool writePng(const QString& path, int gray) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  QImage img(8, 8, QImage::Format_Grayscale8);
  img.fill(gray);
  return img.save(path, "PNG");
}

QString cancelledMessage(const QFuture<ImageDataDialog::Listing>& f) {
  const auto& index = f.result().index;
  return index.ok() ? QString("listed") : QString::fromStdString(index.error().message);
}

}  // namespace

class TestImageDialog : public QObject {
  Q_OBJECT

  // tmpfs where there is one: 200,000 files are made there in about a second.
  std::unique_ptr<QTemporaryDir> m_dir;
  GraphDocument m_doc;

  std::shared_ptr<Hold> holdOn(ImageDataDialog& dialog) {
    auto hold = std::make_shared<Hold>(kHoldAt);
    dialog.setListHook([hold](size_t entries) { hold->onEntry(entries); });
    dialog.setDebounceMs(0);
    return hold;
  }

 private slots:
  void initTestCase() {
    // The held listings keep a pool thread each; the ones the test waits for need
    // another, even where this machine has a single core.
    QThreadPool::globalInstance()->setMaxThreadCount(
        std::max(QThreadPool::globalInstance()->maxThreadCount(), 4));
    const QString shm = "/dev/shm";
    const QFileInfo shmInfo(shm);
    const QString root = shmInfo.isDir() && shmInfo.isWritable() ? shm : QDir::tempPath();
    m_dir = std::make_unique<QTemporaryDir>(root + "/tst_image_dialog-XXXXXX");
    QVERIFY(m_dir->isValid());
    QVERIFY(makeEmptyFiles(m_dir->filePath("big/all"), kBigFiles));
    QVERIFY(writePng(m_dir->filePath("small/cat/a.png"), 40));
    QVERIFY(writePng(m_dir->filePath("small/cat/b.png"), 60));
    for (int i = 0; i < 3; ++i) QVERIFY(writePng(m_dir->filePath("small/dog/%1.png").arg(i), 200));
    m_doc.setFilePath(m_dir->filePath("project.nlproj"));  // relative paths resolve here
  }

  // The engine's side alone: a control cancelled before the first entry stops a
  // folder or a list there.
  void aCancelledListingStopsAtTheFirstEntry() {
    QFile csv(m_dir->filePath("list.csv"));
    QVERIFY(csv.open(QIODevice::WriteOnly));
    csv.write("small/cat/a.png,cat\nsmall/dog/0.png,dog\n");
    csv.close();
    size_t calls = 0;
    ListControl control;
    control.cancelled = true;
    control.onEntry = [&](size_t) { ++calls; };
    auto folder = listImageFolder(m_dir->filePath("big").toStdString(), nullptr, &control);
    QVERIFY(!folder.ok());
    QVERIFY2(folder.error().message.find("listing cancelled") != std::string::npos,
             folder.error().message.c_str());
    auto list = readImageList(csv.fileName().toStdString(), false, nullptr, &control);
    QVERIFY(!list.ok());
    QVERIFY2(list.error().message.find("listing cancelled") != std::string::npos,
             list.error().message.c_str());
    QCOMPARE(calls, size_t(2));
    QVERIFY(readImageList(csv.fileName().toStdString(), false).ok());  // no control: unchanged
  }

  void typingWhileHeldCancelsAndStaysResponsive() {
    ImageDataDialog dialog(&m_doc, ImageDataDialog::Kind::Folder);
    auto hold = holdOn(dialog);
    dialog.show();
    QSignalSpy ready(&dialog, &ImageDataDialog::previewReady);
    auto* train = dialog.findChild<QLineEdit*>("imageTrain");
    auto* summary = dialog.findChild<QLabel*>("imageSummary");
    QVERIFY(train && summary);
    dialog.setTrainPath("big");
    QVERIFY(testing::waitUntil([&] { return hold->reached.tryAcquire(); }));
    QCOMPARE(dialog.listingsStarted(), 1);
    QFuture<ImageDataDialog::Listing> first = dialog.latestListing();
    QVERIFY2(summary->text().startsWith("Listing big"), qPrintable(summary->text()));

    // Each keystroke is handled on this thread while the worker is held, and starts
    // nothing until the path stops changing.
    QTest::keyClicks(train, "zz");
    QCOMPARE(train->text(), QString("bigzz"));
    QCOMPARE(dialog.listingsStarted(), 1);
    QVERIFY2(summary->text().startsWith("Listing bigzz"), qPrintable(summary->text()));
    bool ticked = false;
    QTimer::singleShot(0, &dialog, [&] { ticked = true; });
    QVERIFY(testing::waitUntil([&] { return ticked; }));

    // The new path is listed to its end while the old listing is still held.
    QVERIFY(testing::waitForSignals(ready));
    QCOMPARE(dialog.listingsStarted(), 2);
    QVERIFY2(summary->text().contains("does not exist"), qPrintable(summary->text()));
    QVERIFY(!first.isFinished());

    // Let go, the old listing stops at the entry it was held at, cancelled.
    hold->go.release();
    first.waitForFinished();
    QVERIFY(!hold->timedOut);
    QCOMPARE(hold->calls.load(), kHoldAt);
    QVERIFY2(cancelledMessage(first).contains("listing cancelled"),
             qPrintable(cancelledMessage(first)));
    // Its result reaches the dialog as a stale one and is dropped.
    QCoreApplication::sendPostedEvents();
    QCoreApplication::processEvents();
    QCOMPARE(ready.count(), 1);
    QVERIFY2(summary->text().contains("does not exist"), qPrintable(summary->text()));
  }

  void cancelClosesAtOnceWhileHeld() {
    auto* dialog = new ImageDataDialog(&m_doc, ImageDataDialog::Kind::Folder);
    QPointer<ImageDataDialog> guard(dialog);
    auto hold = holdOn(*dialog);
    dialog->show();
    dialog->setTrainPath("big");
    QVERIFY(testing::waitUntil([&] { return hold->reached.tryAcquire(); }));
    QFuture<ImageDataDialog::Listing> first = dialog->latestListing();

    auto* buttons = dialog->findChild<QDialogButtonBox*>();
    QVERIFY(buttons && buttons->button(QDialogButtonBox::Cancel));
    QSignalSpy rejected(dialog, &QDialog::rejected);
    buttons->button(QDialogButtonBox::Cancel)->click();
    QCOMPARE(rejected.count(), 1);
    QVERIFY(!dialog->isVisible());
    // As when the menu's exec() returns and its dialog goes out of scope.
    delete dialog;
    QVERIFY(guard.isNull());
    QVERIFY(!first.isFinished());  // neither closing nor destruction waited for it

    hold->go.release();
    first.waitForFinished();
    QVERIFY(!hold->timedOut);
    QCOMPARE(hold->calls.load(), kHoldAt);
    QVERIFY2(cancelledMessage(first).contains("listing cancelled"),
             qPrintable(cancelledMessage(first)));
    // Whatever the worker's end posted must find nothing of the dialog to touch.
    QCoreApplication::sendPostedEvents();
    QCoreApplication::processEvents();
  }

  void typingFastListsOnce() {
    ImageDataDialog dialog(&m_doc, ImageDataDialog::Kind::Folder);
    // No edit-free pause ends while typing, however slow this machine is.
    dialog.setDebounceMs(testing::kHangMs);
    QSignalSpy ready(&dialog, &ImageDataDialog::previewReady);
    auto* train = dialog.findChild<QLineEdit*>("imageTrain");
    const QString typed = m_dir->filePath("small");
    for (QChar c : typed) {
      QTest::keyClick(train, c.toLatin1());
      QCoreApplication::processEvents();
    }
    QCOMPARE(train->text(), typed);
    QCOMPARE(dialog.listingsStarted(), 0);
    dialog.setDebounceMs(0);  // the pause under way ends now
    QVERIFY(testing::waitForSignals(ready));
    QCOMPARE(dialog.listingsStarted(), 1);
    QCOMPARE(dialog.findChild<QTableWidget*>("imageClasses")->rowCount(), 2);
  }

  void aSmallFolderIsPreviewedThenUsed() {
    const proto::DataDef before = m_doc.data();
    ImageDataDialog dialog(&m_doc, ImageDataDialog::Kind::Folder);
    dialog.setDebounceMs(0);
    QSignalSpy ready(&dialog, &ImageDataDialog::previewReady);
    dialog.setTrainPath("small");
    QVERIFY(testing::waitForSignals(ready));
    auto* classes = dialog.findChild<QTableWidget*>("imageClasses");
    auto* samples = dialog.findChild<QListWidget*>("imageSamples");
    auto* summary = dialog.findChild<QLabel*>("imageSummary");
    QVERIFY(classes && samples && summary);
    QCOMPARE(classes->rowCount(), 2);
    QCOMPARE(classes->item(0, 0)->text(), QString("cat"));
    QCOMPARE(classes->item(0, 1)->text(), QString("2"));
    QCOMPARE(classes->item(1, 0)->text(), QString("dog"));
    QCOMPARE(classes->item(1, 1)->text(), QString("3"));
    QCOMPARE(samples->count(), 5);
    QVERIFY(!samples->item(0)->icon().isNull());
    QVERIFY2(summary->text().contains("5 images in 2 classes"), qPrintable(summary->text()));
    QCOMPARE(dialog.listingsStarted(), 1);

    QVERIFY(dialog.apply());
    QVERIFY(m_doc.data().has_image_folder());
    QCOMPARE(m_doc.data().image_folder().train(), std::string("small"));
    QCOMPARE(m_doc.data().class_names_size(), 2);
    QCOMPARE(m_doc.data().class_names(1), std::string("dog"));
    m_doc.undoStack()->undo();
    QCOMPARE(m_doc.data().SerializeAsString(), before.SerializeAsString());
  }
};

QTEST_MAIN(TestImageDialog)
#include "tst_image_dialog.moc"
