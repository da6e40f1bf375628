// Waiting in tests, shared by every suite: on a signal, or on a state that events
// bring about (a step in the stream, a process stopped). The bound only turns a
// hang into a failure with a message; nothing relies on anything being fast or
// slow, so a loaded machine makes a test slower, never red.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QTest>
#include <functional>

namespace netloom::testing {

inline constexpr int kHangMs = 240000;
// Epochs no test waits out: a run given these ends only when the test ends it.
inline constexpr int kEndlessEpochs = 100000;

// Processes events until `done()` holds; false when it never did.
inline bool waitUntil(const std::function<bool()>& done, int boundMs = kHangMs) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > boundMs) return done();
    QTest::qWait(5);
  }
  return true;
}

// Until `spy` has caught `count` signals in all.
inline bool waitForSignals(QSignalSpy& spy, int count = 1, int boundMs = kHangMs) {
  return waitUntil([&] { return spy.count() >= count; }, boundMs);
}

// Every thread of process `pid` is stopped (SIGSTOP has taken effect): from here
// on it cannot run a single instruction until SIGCONT.
inline bool processStopped(qint64 pid) {
  const QString task = QString("/proc/%1/task").arg(pid);
  const QStringList threads = QDir(task).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
  if (threads.isEmpty()) return false;
  for (const QString& t : threads) {
    QFile f(task + "/" + t + "/stat");
    if (!f.open(QIODevice::ReadOnly)) return false;
    const QByteArray stat = f.readAll();
    // "pid (comm) S ...": the state follows the last ')', as comm may hold one.
    const qsizetype close = stat.lastIndexOf(')');
    if (close < 0 || close + 2 >= stat.size()) return false;
    const char state = stat[close + 2];
    if (state != 'T' && state != 't') return false;
  }
  return true;
}

// A netloom-train started with NETLOOM_HOLD_AT_STEP and NETLOOM_HOLD_FIFO=`fifo`
// holds at that step: waits until it does (its reader has opened the FIFO) and
// returns the FIFO's write end, or -1. Writing a line to it, or closing it, lets
// the run go on.
inline int waitForHold(const QString& fifo, int boundMs = kHangMs) {
  int fd = -1;
  const QByteArray path = QFile::encodeName(fifo);
  waitUntil(
      [&] {
        // Non-blocking: ENXIO while no reader is there, so a run that died before
        // the hold fails the test instead of hanging it.
        fd = ::open(path.constData(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        return fd >= 0;
      },
      boundMs);
  return fd;
}

}  // namespace netloom::testing
