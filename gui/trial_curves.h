// The loss of several runs as they train (a sweep's trials), a curve each, live:
// their event streams followed off the GUI thread (EventTail), the points of every
// stream appended and the chart replotted once a frame.
#pragma once

#include <QColor>
#include <QWidget>
#include <map>
#include <vector>

#include "gui/event_tail.h"

class QCustomPlot;
class QCPGraph;

namespace netloom::gui {

class TrialCurves : public QWidget {
  Q_OBJECT

 public:
  explicit TrialCurves(QWidget* parent = nullptr, int frameMs = 16);

  // Follows `eventsPath` from its first event as curve `trial`; again for a trial
  // already followed starts its curve over.
  void follow(int trial, const QString& eventsPath);
  void unfollow(int trial);
  void clear();
  QCustomPlot* plot() const { return m_plot; }
  int points(int trial) const;  // on its curve so far

 signals:
  // After a frame's replot: the events it drew.
  void shown(const std::vector<netloom::gui::EventTail::Batch>& batches);

 private:
  void onFrame(const std::vector<EventTail::Batch>& batches);
  QCPGraph* curve(int trial);

  QCustomPlot* m_plot;
  EventTail m_tail;
  std::map<int, QCPGraph*> m_curves;
};

}  // namespace netloom::gui
