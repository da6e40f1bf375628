// Live training charts (QCustomPlot): the training loss per step with TensorBoard's
// smoothing, the evaluation loss and accuracy per epoch, the learning rate and the
// throughput, and each parameter's gradient and weight norm. Points arrive in step order and are
// appended sorted; QCustomPlot's adaptive sampling draws a million of them as a few thousand; the
// plots replot from a throttled timer, never once per event. Other runs can be overlaid.
#pragma once

#include <QColor>
#include <QTimer>
#include <QWidget>
#include <map>
#include <string>
#include <vector>

#include "engine/proto/events.pb.h"

class QCustomPlot;
class QCPGraph;
class QCheckBox;
class QSlider;

namespace netloom::gui {

// TensorBoard's smoothing: an exponential moving average with its start debiased.
std::vector<double> smoothed(const std::vector<double>& values, double weight);

class TrainingCharts : public QWidget {
  Q_OBJECT

 public:
  explicit TrainingCharts(QWidget* parent = nullptr);

  // Starts over for a new current run.
  void clear();
  // Adds the current run's events, in stream order.
  void append(const std::vector<proto::TrainEvent>& events);
  // Curves of other runs shown under the current one (their smoothed loss and
  // per-epoch accuracy), by name; replaces the previous overlay.
  struct Overlay {
    QString name;
    std::vector<proto::TrainEvent> events;
    QColor color;  // the run's own (runColor); invalid: the next of a few
  };
  // A run's colour, the same on every chart and in the Runs list: chosen by its
  // folder's name, so checking other runs does not repaint it.
  static QColor runColor(const QString& runName);
  void setOverlays(const std::vector<Overlay>& runs);

  void setSmoothing(double weight);  // 0 (raw) .. 0.99
  void setLogScale(bool on);
  // Replots every chart that changed (the timer replots one per tick, in turn, so
  // the window never waits for all four at once).
  void replotNow();

  int lossPoints() const;   // points on the current run's loss curve
  int epochPoints() const;  // points on its accuracy curve
  // A data-parallel run's: each rank's samples/s, and the share of time spent
  // waiting for gradient sums (on the throughput chart's right axis, in %).
  int perRankPoints() const;
  int commPoints() const;
  QCustomPlot* lossPlot() const { return m_loss; }
  QCustomPlot* gradNormPlot() const { return m_gradNorms; }
  QCustomPlot* weightNormPlot() const { return m_weightNorms; }
  QCustomPlot* epochPlot() const { return m_epoch; }
  // Writes the loss chart as PNG, SVG, PDF (by extension) or its data as CSV.
  bool exportLoss(const QString& path) const;
  // Milliseconds the last replotNow took, for the responsiveness benchmark.
  double lastReplotMs() const { return m_replotMs; }

 private:
  void resmooth();

  // One curve per parameter, made as its first norm arrives.
  void addNorms(QCustomPlot* plot, std::map<std::string, QCPGraph*>& graphs,
                const google::protobuf::Map<std::string, double>& norms, double step);

  QCustomPlot *m_loss, *m_epoch, *m_lr, *m_speed, *m_gradNorms, *m_weightNorms;
  std::map<std::string, QCPGraph*> m_gradGraphs, m_weightGraphs;
  QCPGraph *m_raw, *m_smooth, *m_valLoss, *m_testLoss, *m_accuracy, *m_lrGraph, *m_speedGraph;
  QCPGraph *m_perRankGraph, *m_commGraph;
  int m_ranks = 1;  // the current run's, from RunStarted
  void addRankData(const QVector<double>& keys, const QVector<double>& perRank,
                   const QVector<double>& comm);
  QSlider* m_smoothing;
  QCheckBox* m_log;
  std::vector<double> m_steps, m_losses;
  double m_weight = 0.6;
  std::vector<QCPGraph*> m_overlayGraphs;
  void replotOne(QCustomPlot* p);

  QTimer m_replot;
  bool m_dirty = false;
  std::vector<QCustomPlot*> m_stale;  // charts waiting for the timer, oldest first
  double m_replotMs = 0;
};

}  // namespace netloom::gui
