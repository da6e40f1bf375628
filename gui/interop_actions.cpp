#include "gui/interop_actions.h"

#include <google/protobuf/util/message_differencer.h>

#include <QAction>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>

#include "engine/interop/onnx.h"
#include "engine/interop/pytorch_export.h"
#include "gui/image_data_dialog.h"
#include "gui/main_window.h"
#include "gui/project_files.h"
#include "gui/run_controller.h"

namespace netloom::gui {

InteropActions::InteropActions(MainWindow* window, QMenu* file, QMenu* data)
    : QObject(window), m_window(window) {
  auto add = [this](QMenu* menu, const QString& name, const QString& text, auto fn) {
    QAction* a = menu->addAction(text);
    a->setObjectName(name);
    connect(a, &QAction::triggered, this, fn);
    return a;
  };
  add(file, "importOnnx", tr("&Import ONNX…"), [this] {
    const QString in = ask("onnx-in", projectDir());
    if (in.isEmpty()) return;
    const QFileInfo info(in);
    const QString out =
        ask("project-out", info.absolutePath() + "/" + info.completeBaseName() + ".nlproj");
    if (!out.isEmpty()) importOnnx(in, out);
  });
  QMenu* exports = file->addMenu(tr("E&xport"));
  auto onnx = [this](bool fold) {
    const QString base = QFileInfo(m_window->document()->filePath()).completeBaseName();
    const QString out =
        ask("onnx-out", projectDir() + "/" + (base.isEmpty() ? "model" : base) + ".onnx");
    if (!out.isEmpty()) exportOnnx(out, fold);
  };
  add(exports, "exportOnnx", tr("&ONNX…"), [onnx] { onnx(false); });
  add(exports, "exportOnnxFolded", tr("ONNX, BatchNorm &Folded…"), [onnx] { onnx(true); });
  add(exports, "exportPytorch", tr("&PyTorch…"), [this] {
    const QString dir = ask("pytorch-dir", projectDir());
    if (!dir.isEmpty()) exportPytorch(dir);
  });
  add(data, "useImageFolder", tr("Use Image &Folder…"), [this] {
    ImageDataDialog dialog(m_window->document(), ImageDataDialog::Kind::Folder, m_window);
    dialog.exec();
  });
  add(data, "useImageList", tr("Use Image &List…"), [this] {
    ImageDataDialog dialog(m_window->document(), ImageDataDialog::Kind::List, m_window);
    dialog.exec();
  });
}

QString InteropActions::ask(const QString& kind, const QString& suggestion) {
  if (m_prompt) return m_prompt(kind, suggestion);
  if (kind == "onnx-in")
    return QFileDialog::getOpenFileName(m_window, tr("Import ONNX model"), suggestion,
                                        tr("ONNX models (*.onnx)"));
  if (kind == "onnx-out")
    return QFileDialog::getSaveFileName(m_window, tr("Export as ONNX"), suggestion,
                                        tr("ONNX models (*.onnx)"));
  if (kind == "project-out")
    return QFileDialog::getSaveFileName(m_window, tr("Save the imported project as"), suggestion,
                                        tr("NetLoom projects (*.nlproj)"));
  return QFileDialog::getExistingDirectory(m_window, tr("Export PyTorch code into"), suggestion);
}

QString InteropActions::projectDir() const {
  const QString path = m_window->document()->filePath();
  return path.isEmpty() ? QDir::currentPath() : QFileInfo(path).absolutePath();
}

QString InteropActions::weightsForExport(QString& said) const {
  const auto& runs = m_window->runs()->runs();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (!QFileInfo::exists(it->weightsPath())) continue;
    if (!google::protobuf::util::MessageDifferencer::Equals(
            it->project.model(), m_window->document()->toProject().model()))
      continue;
    said = tr("the weights of run %1").arg(it->label());
    return it->weightsPath();
  }
  said = tr("the initial weights (no run of this model has finished)");
  return {};
}

void InteropActions::report(const Status& s, const QString& done) {
  m_window->showMessage(s ? done : QString::fromStdString(s.message()), s ? 6000 : 12000);
}

Status InteropActions::exportOnnx(const QString& path, bool foldBatchNorm) {
  QString said;
  OnnxExportOptions options;
  options.initWeights = weightsForExport(said).toStdString();
  options.foldBatchNorm = foldBatchNorm;
  Status s = netloom::exportOnnx(m_window->document()->toProject(), projectDir().toStdString(),
                                 path.toStdString(), options);
  report(s, tr("Exported %1 as ONNX with %2").arg(path, said));
  return s;
}

Status InteropActions::exportPytorch(const QString& dir) {
  Status s = netloom::exportPytorch(m_window->document()->toProject(), projectDir().toStdString(),
                                    dir.toStdString());
  report(s, tr("Wrote model.py, train.py and README.md to %1").arg(dir));
  return s;
}

Status InteropActions::importOnnx(const QString& onnxPath, const QString& projectPath) {
  if (!m_window->files()->leaveProject()) return makeError("the open project was kept");
  Status s = netloom::importOnnx(onnxPath.toStdString(), projectPath.toStdString());
  if (s && !m_window->openFile(projectPath)) return makeError("the imported project did not open");
  report(s, tr("Imported %1 as %2").arg(onnxPath, projectPath));
  return s;
}

}  // namespace netloom::gui
