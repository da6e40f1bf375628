#include "gui/trial_curves.h"

#include <qcustomplot.h>

#include <QVBoxLayout>

namespace netloom::gui {

namespace {
// Ten distinct hues, then round again.
QColor hue(int k) {
  return QColor::fromHsv((k * 36) % 360, 200, 200);
}
}  // namespace

TrialCurves::TrialCurves(QWidget* parent, int frameMs)
    : QWidget(parent), m_plot(new QCustomPlot(this)), m_tail(frameMs) {
  m_plot->setObjectName("trialCurves");
  m_plot->xAxis->setLabel(tr("step"));
  m_plot->yAxis->setLabel(tr("loss"));
  m_plot->legend->setVisible(true);
  m_plot->setNotAntialiasedElements(QCP::aeAll);  // many points, drawn each frame
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_plot);
  connect(&m_tail, &EventTail::frame, this, &TrialCurves::onFrame);
}

QCPGraph* TrialCurves::curve(int trial) {
  auto it = m_curves.find(trial);
  if (it != m_curves.end()) return it->second;
  QCPGraph* g = m_plot->addGraph();
  g->setName(tr("trial %1").arg(trial));
  g->setPen(QPen(hue(trial)));
  g->setAdaptiveSampling(true);
  return m_curves[trial] = g;
}

void TrialCurves::follow(int trial, const QString& eventsPath) {
  curve(trial)->data()->clear();
  m_tail.follow(trial, eventsPath);
}

void TrialCurves::unfollow(int trial) {
  m_tail.unfollow(trial);
  if (auto it = m_curves.find(trial); it != m_curves.end()) {
    m_plot->removeGraph(it->second);
    m_curves.erase(it);
  }
  m_plot->replot();
}

void TrialCurves::clear() {
  m_tail.clear();
  m_plot->clearGraphs();
  m_curves.clear();
  m_plot->replot();
}

int TrialCurves::points(int trial) const {
  auto it = m_curves.find(trial);
  return it == m_curves.end() ? 0 : it->second->dataCount();
}

void TrialCurves::onFrame(const std::vector<EventTail::Batch>& batches) {
  for (const EventTail::Batch& b : batches) {
    QCPGraph* g = curve(b.stream);
    QVector<double> keys, values;
    for (const proto::TrainEvent& e : b.events)
      if (e.has_step()) {
        keys.push_back(double(e.step().step()));
        values.push_back(e.step().loss());
      }
    g->addData(keys, values, true);  // steps come in order
  }
  m_plot->rescaleAxes();
  m_plot->replot(QCustomPlot::rpImmediateRefresh);
  emit shown(batches);
}

}  // namespace netloom::gui
