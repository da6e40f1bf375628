// The source's layering, as the README's architecture section gives it: every include
// in engine/ runs from a folder to one before it (or beside it, as the table allows),
// the editor, the IDE and remote/ use the engine's public headers only, and no build
// file compiles another folder's source file by path.
#include <QtTest>
#include <map>
#include <set>

namespace {

// What each engine folder may include, itself aside.
const std::map<QString, QSet<QString>> kAllowed = {
    {"util", {}},
    {"proto", {}},
    {"io", {"util", "proto"}},
    {"data", {"util", "proto", "io"}},
    {"graph", {"util", "proto", "io"}},
    {"ops", {"util", "proto", "io", "graph"}},
    {"runtime", {"util", "proto", "io", "data", "graph", "ops"}},
    {"parallel", {"util", "proto", "io", "runtime"}},
    {"sweep", {"util", "proto", "io", "graph", "train"}},
    {"compiler", {"util", "proto", "io", "data", "graph", "ops", "runtime"}},
    {"train", {"util", "proto", "io", "data", "graph", "ops", "runtime", "compiler", "parallel"}},
    {"interop", {"util", "proto", "io", "data", "graph", "ops", "runtime", "compiler"}},
    {"cli",
     {"util", "proto", "io", "data", "graph", "ops", "runtime", "compiler", "parallel", "train",
      "interop", "sweep"}},
};

// The engine headers the editor, the IDE and remote/ may include beyond whole public
// folders: the runtime's device list, and the interop entry points.
const QSet<QString> kPublicFolders = {"util",  "proto", "io",    "data",
                                      "graph", "ops",   "train", "sweep"};
const QSet<QString> kPublicHeaders = {"engine/runtime/devices.h", "engine/interop/onnx.h",
                                      "engine/interop/pytorch_export.h"};

QStringList sources(const QString& folder) {
  QStringList files;
  QDirIterator it(QString(NETLOOM_SOURCE_DIR) + "/" + folder, {"*.h", "*.cpp", "*.cu", "*.cuh"},
                  QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) files << it.next();
  return files;
}

// Every "engine/x/..." include of `file`, with its line.
QList<QPair<int, QString>> engineIncludes(const QString& file) {
  QFile f(file);
  QList<QPair<int, QString>> out;
  if (!f.open(QIODevice::ReadOnly)) return out;
  static const QRegularExpression include("^\\s*#\\s*include\\s*\"(engine/[^\"]+)\"");
  int line = 0;
  while (!f.atEnd()) {
    ++line;
    auto m = include.match(QString::fromUtf8(f.readLine()));
    if (m.hasMatch()) out.append({line, m.captured(1)});
  }
  return out;
}

QString relative(const QString& file) {
  return QDir(NETLOOM_SOURCE_DIR).relativeFilePath(file);
}

}  // namespace

class TestLayers : public QObject {
  Q_OBJECT

 private slots:
  void engineIncludesRunOneWay() {
    QStringList wrong;
    int checked = 0;
    for (const QString& file : sources("engine")) {
      const QString folder = relative(file).section('/', 1, 1);
      QVERIFY2(kAllowed.count(folder), qPrintable("engine/" + folder + " is in no layer"));
      for (const auto& [line, path] : engineIncludes(file)) {
        ++checked;
        const QString target = path.section('/', 1, 1);
        if (target != folder && !kAllowed.at(folder).contains(target))
          wrong << QString("%1:%2 includes %3").arg(relative(file)).arg(line).arg(path);
      }
    }
    QVERIFY(checked > 300);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join("\n")));
  }

  void theToolsUseThePublicHeaders() {
    QStringList wrong;
    for (const char* folder : {"editor", "gui", "remote"})
      for (const QString& file : sources(folder))
        for (const auto& [line, path] : engineIncludes(file))
          if (!kPublicFolders.contains(path.section('/', 1, 1)) && !kPublicHeaders.contains(path))
            wrong << QString("%1:%2 includes %3").arg(relative(file)).arg(line).arg(path);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join("\n")));
  }

  void noBuildFileCompilesAnotherFoldersSource() {
    QStringList wrong;
    QDirIterator it(NETLOOM_SOURCE_DIR, {"CMakeLists.txt"}, QDir::Files,
                    QDirIterator::Subdirectories);
    static const QRegularExpression bySourcePath(
        "\\$\\{PROJECT_SOURCE_DIR\\}/[^\\s)]+\\.(cpp|cu)\\b");
    while (it.hasNext()) {
      const QString file = it.next();
      if (relative(file).startsWith("build")) continue;
      QFile f(file);
      QVERIFY(f.open(QIODevice::ReadOnly));
      auto m = bySourcePath.match(QString::fromUtf8(f.readAll()));
      if (m.hasMatch()) wrong << relative(file) + ": " + m.captured(0);
    }
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join("\n")));
  }
};

QTEST_GUILESS_MAIN(TestLayers)
#include "tst_layers.moc"
