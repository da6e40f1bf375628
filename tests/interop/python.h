// Debian's Python for the interchange tests: PyTorch, onnx and Pillow are installed
// for /usr/bin/python3, and the python3 first on PATH may be another one.
#pragma once

#include <QFile>
#include <QProcess>
#include <QStringList>

#include "../common/cli.h"

namespace netloom::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

// Runs Python to its end; the test's own timeout bounds it.
inline Outcome runPython(const QStringList& args) {
  QProcess p;
  p.start(kPython, args);
  p.waitForFinished(-1);
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

// Whether /usr/bin/python3 imports `modules` ("torch, numpy").
inline bool havePython(const QString& modules) {
  return QFile::exists(kPython) && runPython({"-c", "import " + modules}).code == 0;
}

// What pyflakes finds in an export's model.py and train.py (undefined names, unused
// imports, syntax errors), or "" when it finds nothing. Debian's python3-pyflakes.
inline QString pyflakesProblems(const QString& exportDir) {
  Outcome o = runPython({"-m", "pyflakes", exportDir + "/model.py", exportDir + "/train.py"});
  if (o.code == 0) return {};
  return "pyflakes (exit " + QString::number(o.code) + "): " + o.out + o.err;
}

}  // namespace netloom::testing
