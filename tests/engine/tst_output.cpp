// Output paths: what a path names is never replaced by the atomic write. A device or a
// FIFO is written in place, a symlink's target is replaced and the link stays a link, a
// folder is refused, and a folder that cannot be written leaves nothing behind. The
// same holds for the event stream's writer.
#include <grp.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>
#include <cerrno>
#include <cstring>

#include "engine/io/event_stream.h"
#include "engine/io/output_file.h"
#include "output_fixture.h"

using namespace netloom;
using namespace outputfixture;

namespace {

std::string linkText(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, size_t(n));
}

// Everything in a folder, hidden files, links, FIFOs and devices included: a
// temporary file left behind shows up here.
QStringList entries(const QString& dir) {
  return QDir(dir).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden | QDir::System,
                             QDir::Name);
}

proto::TrainEvent stepEvent(int64_t step) {
  proto::TrainEvent e;
  e.mutable_step()->set_step(step);
  return e;
}

// What writing into a folder without write permission says, run as the caller is, or,
// for root (whom folder permissions do not stop), in a child process that has given
// root up for the unprivileged `nobody`. Empty when the write was refused as it should.
QString refusedInReadOnlyFolder(const std::string& path) {
  auto attempt = [&]() -> std::string {
    Status st = writeFileAtomic(path, "new");
    if (st.ok()) return "the write succeeded";
    const std::string& m = st.message();
    if (m.find(path) == std::string::npos || m.find(std::strerror(EACCES)) == std::string::npos)
      return "unexpected message: " + m;
    return {};
  };
  if (::geteuid() != 0) return QString::fromStdString(attempt());
  int pipeFds[2];
  if (::pipe(pipeFds) != 0) return "pipe failed";
  pid_t child = ::fork();
  if (child < 0) return "fork failed";
  if (child == 0) {
    ::close(pipeFds[0]);
    const uid_t nobody = 65534;
    std::string why = ::setgroups(0, nullptr) == 0 && ::setresgid(nobody, nobody, nobody) == 0 &&
                              ::setresuid(nobody, nobody, nobody) == 0
                          ? attempt()
                          : std::string("cannot become nobody: ") + std::strerror(errno);
    (void)!::write(pipeFds[1], why.data(), why.size());
    ::_exit(0);
  }
  ::close(pipeFds[1]);
  std::string why;
  char buf[512];
  for (ssize_t n; (n = ::read(pipeFds[0], buf, sizeof buf)) > 0;) why.append(buf, size_t(n));
  ::close(pipeFds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status)) return "the child did not finish";
  return QString::fromStdString(why);
}

}  // namespace

class TestOutput : public QObject {
  Q_OBJECT

 private slots:
  void fifoIsWrittenInPlace() {
    QTemporaryDir dir;
    const std::string fifo = dir.filePath("out.fifo").toStdString();
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    {
      FifoReader reader(fifo);
      QVERIFY(reader.ok());
      Status st = writeFileAtomic(fifo, "{\"steps\":3}\n");
      QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
      QCOMPARE(reader.drain(), std::string("{\"steps\":3}\n"));
    }
    QCOMPARE(typeOf(fifo), mode_t(S_IFIFO));
    // The event stream, asked to append: there is nothing to keep in a FIFO, nor to read.
    for (bool append : {true, false}) {
      FifoReader reader(fifo);
      EventWriter w;
      Status st = w.open(fifo, append);
      QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
      for (int i = 1; i <= 3; ++i) QVERIFY(w.write(stepEvent(i)).ok());
      w.close();
      auto read = parseEvents(reader.drain(), 0);
      QVERIFY(read.ok());
      QCOMPARE(read->events.size(), size_t(3));
      QCOMPARE(read->events[2].step().step(), int64_t(3));
    }
    QCOMPARE(typeOf(fifo), mode_t(S_IFIFO));
    QCOMPARE(entries(dir.path()), QStringList{"out.fifo"});
  }

  // /dev/stdout and its kind end in /proc's links to open files: written through them.
  void procLinkIsWrittenThrough() {
    int fds[2];
    QCOMPARE(::pipe(fds), 0);
    const std::string link = "/proc/self/fd/" + std::to_string(fds[1]);
    Status st = writeFileAtomic(link, "{}\n");
    ::close(fds[1]);
    QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
    char buf[16];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    ::close(fds[0]);
    QCOMPARE(std::string(buf, size_t(std::max<ssize_t>(n, 0))), std::string("{}\n"));
  }

  void symlinkTargetIsReplaced() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("real") && QDir(dir.path()).mkpath("sub"));
    const std::string real = dir.filePath("real/summary.json").toStdString();
    QVERIFY(writeFileAtomic(real, "old").ok());
    QCOMPARE(::chmod(real.c_str(), 0640), 0);
    // A chain of relative links, one of them in another folder: each target is
    // relative to its link's folder.
    const std::string link = dir.filePath("sub/link").toStdString();
    const std::string chain = dir.filePath("chain").toStdString();
    QCOMPARE(::symlink("../real/summary.json", link.c_str()), 0);
    QCOMPARE(::symlink("sub/link", chain.c_str()), 0);

    Status st = writeFileAtomic(chain, "new");
    QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
    QCOMPARE(readAll(real), std::string("new"));
    QCOMPARE(typeOf(chain), mode_t(S_IFLNK));
    QCOMPARE(typeOf(link), mode_t(S_IFLNK));
    QCOMPARE(linkText(chain), std::string("sub/link"));
    QCOMPARE(linkText(link), std::string("../real/summary.json"));
    QCOMPARE(int(statOf(real).st_mode & 07777), 0640);  // the replaced file keeps its bits

    // A dangling link: its target is created, the link stays.
    const std::string dangling = dir.filePath("weights").toStdString();
    QCOMPARE(::symlink("real/weights.bin", dangling.c_str()), 0);
    QVERIFY(writeFileAtomic(dangling, "w").ok());
    QCOMPARE(typeOf(dangling), mode_t(S_IFLNK));
    QCOMPARE(readAll(dir.filePath("real/weights.bin").toStdString()), std::string("w"));

    // The event stream through a link: appending keeps what the target holds.
    const std::string events = dir.filePath("events").toStdString();
    QCOMPARE(::symlink("real/events.pb", events.c_str()), 0);
    EventWriter w;
    QVERIFY(w.open(events).ok());
    QVERIFY(w.write(stepEvent(1)).ok() && w.write(stepEvent(2)).ok());
    w.close();
    QVERIFY(w.open(events, true).ok());
    QVERIFY(w.write(stepEvent(3)).ok());
    w.close();
    QCOMPARE(typeOf(events), mode_t(S_IFLNK));
    auto read = readEvents(dir.filePath("real/events.pb").toStdString());
    QVERIFY(read.ok());
    QCOMPARE(read->events.size(), size_t(3));

    // A loop is refused, naming the path.
    const std::string a = dir.filePath("a").toStdString(), b = dir.filePath("b").toStdString();
    QCOMPARE(::symlink("b", a.c_str()), 0);
    QCOMPARE(::symlink("a", b.c_str()), 0);
    st = writeFileAtomic(a, "x");
    QVERIFY(!st.ok());
    QVERIFY2(st.message().find(a) != std::string::npos &&
                 st.message().find("symbolic links") != std::string::npos,
             st.message().c_str());
    QCOMPARE(typeOf(a), mode_t(S_IFLNK));

    QCOMPARE(entries(dir.filePath("real")),
             (QStringList{"events.pb", "summary.json", "weights.bin"}));
  }

  void uncommittedOutputLeavesNothing() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("model.safetensors").toStdString();
    QVERIFY(writeFileAtomic(path, "old").ok());
    {
      OutputFile out;
      QVERIFY(out.open(path).ok());
      QVERIFY(out.write("half", 4).ok());
      QCOMPARE(entries(dir.path()).size(), 2);  // the temporary file beside it
    }
    QCOMPARE(entries(dir.path()), QStringList{"model.safetensors"});
    QCOMPARE(readAll(path), std::string("old"));
  }

  void folderIsRefused() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("out"));
    const std::string folder = dir.filePath("out").toStdString();
    const std::string link = dir.filePath("link").toStdString();
    QCOMPARE(::symlink("out", link.c_str()), 0);
    for (const std::string& path : {folder, link}) {
      Status st = writeFileAtomic(path, "x");
      QVERIFY(!st.ok());
      QVERIFY2(st.message().find(path) != std::string::npos &&
                   st.message().find("is a directory") != std::string::npos,
               st.message().c_str());
      EventWriter w;
      st = w.open(path, true);
      QVERIFY(!st.ok());
      QVERIFY2(st.message().find("is a directory") != std::string::npos, st.message().c_str());
    }
    QCOMPARE(typeOf(folder), mode_t(S_IFDIR));
    QCOMPARE(typeOf(link), mode_t(S_IFLNK));
    QVERIFY(entries(dir.filePath("out")).isEmpty());
    QCOMPARE(entries(dir.path()), (QStringList{"link", "out"}));
  }

  void readOnlyFolderLeavesNothing() {
    QTemporaryDir dir;
    // The unprivileged child must reach the folder.
    QCOMPARE(::chmod(dir.path().toUtf8().constData(), 0755), 0);
    QVERIFY(QDir(dir.path()).mkpath("ro"));
    const std::string existing = dir.filePath("ro/summary.json").toStdString();
    QVERIFY(writeFileAtomic(existing, "old", 0644).ok());
    QCOMPARE(::chmod(dir.filePath("ro").toUtf8().constData(), 0555), 0);
    for (const std::string& path : {existing, dir.filePath("ro/new.json").toStdString()}) {
      QString why = refusedInReadOnlyFolder(path);
      QVERIFY2(why.isEmpty(), qPrintable(QString::fromStdString(path) + ": " + why));
    }
    QCOMPARE(readAll(existing), std::string("old"));
    QCOMPARE(entries(dir.filePath("ro")), QStringList{"summary.json"});
    QCOMPARE(::chmod(dir.filePath("ro").toUtf8().constData(), 0755), 0);
  }

  void blockDeviceIsRefused() {
    QTemporaryDir dir;
    // An unassigned block device number: nothing could be written there anyway.
    const std::string node = dir.filePath("disk").toStdString();
    if (::mknod(node.c_str(), S_IFBLK | 0600, makedev(240, 0)) != 0)
      QSKIP(qPrintable(QString("cannot make a block device node here: ") + std::strerror(errno)));
    Status st = writeFileAtomic(node, "x");
    QVERIFY(!st.ok());
    QVERIFY2(st.message().find(node) != std::string::npos &&
                 st.message().find("block device") != std::string::npos,
             st.message().c_str());
    QCOMPARE(typeOf(node), mode_t(S_IFBLK));
    QCOMPARE(entries(dir.path()), QStringList{"disk"});
  }

  void deviceIsWrittenInPlace() {
    // First a node of our own with the null device's numbers, in a scratch folder: if
    // the write replaced a device, it replaced this one. Only then /dev/null itself.
    QTemporaryDir dir;
    const std::string node = dir.filePath("null").toStdString();
    const std::string link = dir.filePath("to-null").toStdString();
    const dev_t nullDevice = makedev(1, 3);
    if (::mknod(node.c_str(), S_IFCHR | 0666, nullDevice) == 0) {
      QCOMPARE(::symlink("null", link.c_str()), 0);
      for (const std::string& path : {node, link}) {
        Status st = writeFileAtomic(path, "summary");
        QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
        EventWriter w;
        QVERIFY(w.open(path, true).ok());
        QVERIFY(w.write(stepEvent(1)).ok());
      }
      QCOMPARE(typeOf(node), mode_t(S_IFCHR));
      QCOMPARE(statOf(node).st_rdev, nullDevice);
      QCOMPARE(typeOf(link), mode_t(S_IFLNK));
      QCOMPARE(entries(dir.path()), (QStringList{"null", "to-null"}));
    } else if (::geteuid() == 0) {
      QSKIP(qPrintable(QString("root cannot make a device node in ") + dir.path() + " (" +
                       std::strerror(errno) + "), so /dev/null is not tried"));
    }
    // Without root the node cannot be made, and /dev/null could not be replaced either.
    const std::string devNull = "/dev/null";
    if (typeOf(devNull) != S_IFCHR) QSKIP("this machine has no /dev/null device");
    Status st = writeFileAtomic(devNull, "summary");
    QVERIFY2(st.ok(), st.ok() ? "" : st.message().c_str());
    EventWriter w;
    QVERIFY(w.open(devNull, true).ok());
    QVERIFY(w.write(stepEvent(1)).ok());
    w.close();
    QCOMPARE(typeOf(devNull), mode_t(S_IFCHR));
    QCOMPARE(statOf(devNull).st_rdev, nullDevice);
  }
};

QTEST_GUILESS_MAIN(TestOutput)
#include "tst_output.moc"
