#include "editor/library.h"

#include <QDir>
#include <QFile>

#include "engine/io/project_file.h"

namespace netloom::editor {

const std::vector<proto::ModelDef>& libraryBlocks() {
  static const std::vector<proto::ModelDef> blocks = [] {
    std::vector<proto::ModelDef> out;
    QDir dir(QStringLiteral(":/blocks"));
    for (const QString& f : dir.entryList({QStringLiteral("*.nlblock")}, QDir::Files, QDir::Name)) {
      QFile file(dir.filePath(f));
      if (!file.open(QIODevice::ReadOnly)) continue;
      auto block = parseBlock(file.readAll().toStdString(), f.toStdString());
      if (block)
        out.push_back(std::move(*block));
      else
        qWarning("block library: %s", block.error().message.c_str());
    }
    return out;
  }();
  return blocks;
}

const proto::ModelDef* libraryBlock(const std::string& name) {
  for (const proto::ModelDef& b : libraryBlocks())
    if (b.name() == name) return &b;
  return nullptr;
}

}  // namespace netloom::editor
