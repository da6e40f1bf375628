// The IDE's ways in and out: File ▸ Import ONNX…, File ▸ Export ▸ ONNX… and
// PyTorch…, Data ▸ Use Image Folder… and Use Image List…. The engine does the work
// (engine/interop, engine/data); this asks where, and says what happened.
#pragma once

#include <QObject>
#include <functional>

#include "engine/util/status.h"

class QMenu;

namespace netloom::gui {

class MainWindow;

class InteropActions : public QObject {
  Q_OBJECT

 public:
  // Adds its actions to `file` (an Import and an Export entry) and `data`.
  InteropActions(MainWindow* window, QMenu* file, QMenu* data);

  // Answers the file dialogs: `kind` is "onnx-out", "onnx-in", "project-out" or
  // "pytorch-dir"; an empty answer cancels. Tests replace the dialogs with this.
  using PathPrompt = std::function<QString(const QString& kind, const QString& suggestion)>;
  void setPathPrompt(PathPrompt p) { m_prompt = std::move(p); }

  // What the actions do once they know where. Exports take the weights of the latest
  // run of this very model, else the project's initial weights, and say which.
  Status exportOnnx(const QString& path, bool foldBatchNorm = false);
  Status exportPytorch(const QString& dir);
  // Imports, then opens the new project (asking first to save the open one).
  Status importOnnx(const QString& onnxPath, const QString& projectPath);

 private:
  QString ask(const QString& kind, const QString& suggestion);
  QString projectDir() const;
  QString weightsForExport(QString& said) const;
  void report(const Status& s, const QString& done);

  MainWindow* m_window;
  PathPrompt m_prompt;
};

}  // namespace netloom::gui
