// The Generate panel of a language-model project: a prompt, the sampling settings,
// and the text as it is sampled, token by token, from a run's weights (its final
// weights, or while it trains its latest checkpoint). Sampling runs on a thread of
// its own, so training and the IDE go on meanwhile.
#pragma once

#include <QWidget>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace netloom::gui {

// What to sample from: the run's frozen project, the folder its relative paths
// resolve against, and its weights (a safetensors file or a checkpoint folder).
struct GenerateSource {
  proto::Project project;
  QString projectDir;
  QString weights;
  QString runName;
};

class GeneratePanel : public QWidget {
  Q_OBJECT

 public:
  explicit GeneratePanel(QWidget* parent = nullptr);
  ~GeneratePanel() override;

  // Asked at each Generate for the run to sample from; an error says why there is
  // none (no run yet, no checkpoint yet, not a language model).
  using SourceFn = std::function<Result<GenerateSource>()>;
  void setSourceProvider(SourceFn source) { m_source = std::move(source); }

  // Starts sampling (the button's click); false, with the reason in status(), where
  // it cannot.
  bool generate();
  void stop();  // ends after the token in progress
  bool running() const { return m_thread.joinable() && !m_done; }

  QLineEdit* prompt() const { return m_prompt; }
  QSpinBox* maxTokens() const { return m_maxTokens; }
  QDoubleSpinBox* temperature() const { return m_temperature; }
  QSpinBox* topK() const { return m_topK; }
  QSpinBox* seed() const { return m_seed; }
  QPushButton* button() const { return m_button; }
  QPlainTextEdit* output() const { return m_output; }
  QLabel* status() const { return m_status; }
  const QString& weightsUsed() const { return m_weights; }  // by the latest Generate

 signals:
  void pieceShown(const QString& piece);  // the prompt first, then each sampled token
  void finished(bool ok);

 private:
  void appendPiece(const QString& piece, bool sampled);
  void done(const QString& error);
  void join();

  QLineEdit* m_prompt;
  QSpinBox *m_maxTokens, *m_topK, *m_seed;
  QDoubleSpinBox* m_temperature;
  QPushButton* m_button;
  QPlainTextEdit* m_output;
  QLabel* m_status;
  SourceFn m_source;
  std::thread m_thread;
  std::atomic<bool> m_stop{false};
  bool m_done = true;
  bool m_promptShown = false;
  QString m_runName, m_weights;
};

}  // namespace netloom::gui
