// netloom-train run as a user runs it, for tests: its exit code and what it printed.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>

namespace netloom::testing {

struct Outcome {
  int code = -1;  // -1: it did not exit normally
  QString out, err;
};

inline Outcome runTrain(const QStringList& args) {
  QProcess p;
  p.start(NETLOOM_TRAIN_EXE, args);
  p.waitForFinished(300000);
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace netloom::testing
