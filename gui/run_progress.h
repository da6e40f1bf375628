// A run's place in the status bar: a line of text (the pace, the time left and the
// memory in use, or what just happened) and a bar for the steps or an upload.
#pragma once

#include <QCoreApplication>
#include <QLabel>
#include <QProgressBar>

#include "gui/runs.h"

namespace netloom::gui {

class RunProgress {
  Q_DECLARE_TR_FUNCTIONS(RunProgress)

 public:
  RunProgress();  // the widgets belong to whoever shows them (the window's status bar)

  QLabel* label() const { return m_label; }
  QProgressBar* bar() const { return m_bar; }

  void say(const QString& text) { m_label->setText(text); }
  QString text() const { return m_label->text(); }
  void clear() { m_label->clear(); }
  // A run starts or is followed again: a busy bar until its first step.
  void busy(const QString& text);
  void hideBar() { m_bar->hide(); }
  // Where a running run is: its step of the total, samples/s, time left and memory.
  void showSteps(const RunRecord& run);
  // An upload to the run's host: a real bar, and the bytes in the text.
  void showTransfer(const QString& run, const QString& what, qint64 done, qint64 total);

 private:
  QLabel* m_label;
  QProgressBar* m_bar;
};

}  // namespace netloom::gui
