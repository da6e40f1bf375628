// Live training charts (QCustomPlot), each described by one entry of a table in
// charts.cpp: the training loss per step with TensorBoard's smoothing, the evaluation
// loss and accuracy per epoch, the learning rate and the throughput, and each
// parameter's gradient and weight norm. The x-axis is the step, the epoch or the
// time since the run started, switchable at any moment. Points arrive in step order
// and are appended sorted; QCustomPlot's adaptive sampling draws a million of them as
// a few thousand; the plots replot from a throttled timer, never once per event.
// Other runs can be overlaid.
#pragma once

#include <QColor>
#include <QString>
#include <QTimer>
#include <QWidget>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/proto/events.pb.h"

class QCustomPlot;
class QCPGraph;
class QCheckBox;
class QComboBox;
class QSlider;

namespace netloom::gui {

// TensorBoard's smoothing: an exponential moving average with its start debiased.
std::vector<double> smoothed(const std::vector<double>& values, double weight);

// The same, one value at a time: a live run's smoothed loss extended as steps arrive.
struct Smoother {
  double weight = 0.6;
  double last = 0;
  int64_t count = 0;  // finite values taken
  double next(double v) {
    if (!std::isfinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    ++count;
    const double debias = weight > 0 ? 1 - std::pow(weight, double(count)) : 1;
    return last / debias;
  }
};

// The percentiles a distribution chart draws (TensorBoard's: the minimum, ±1.5, ±1
// and ±0.5 standard deviations of a normal, the median, the maximum), read off a
// histogram whose values spread evenly within each bin.
constexpr std::array<double, 9> kPercentiles = {0,      0.0668, 0.1587, 0.3085, 0.5,
                                                0.6915, 0.8413, 0.9332, 1};
using Percentiles = std::array<double, 9>;
Percentiles histogramPercentiles(const proto::Histogram& h);

class TrainingCharts : public QWidget {
  Q_OBJECT

 public:
  explicit TrainingCharts(QWidget* parent = nullptr);
  ~TrainingCharts() override;

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
  // What every chart's x-axis counts: steps, epochs (fractions of one between their
  // ends) or seconds since the run started.
  enum class XAxis { Step, Epoch, Time };
  void setXAxis(XAxis axis);
  XAxis xAxis() const { return m_xAxis; }
  // Replots every chart that changed (the timer replots one per tick, in turn, so
  // the window never waits for all of them at once).
  void replotNow();

  int lossPoints() const;   // points on the current run's loss curve
  int epochPoints() const;  // points on its accuracy curve
  // A data-parallel run's: each rank's samples/s, and the share of time spent
  // waiting for gradient sums (on the throughput chart's right axis, in %).
  int perRankPoints() const;
  int commPoints() const;
  QCustomPlot* lossPlot() const;
  QCustomPlot* gradNormPlot() const;
  QCustomPlot* weightNormPlot() const;
  QCustomPlot* epochPlot() const;
  // A parameter's values over time (its choice box names the parameters reported).
  QCustomPlot* distributionPlot(bool gradients) const;
  std::vector<QCustomPlot*> plots() const;  // in the table's order
  // Writes the loss chart as PNG, SVG, PDF (by extension) or its data as CSV.
  bool exportLoss(const QString& path) const;
  // Milliseconds the last replotNow took, for the responsiveness benchmark.
  double lastReplotMs() const { return m_replotMs; }

 private:
  struct Chart;  // a chart of the table, made
  // Where one step or one evaluation lies on each x-axis.
  struct Key {
    double step = 0, epoch = 0, seconds = 0;
    double on(XAxis axis) const;
  };
  Key stepKey(const proto::Step& s) const;
  Key epochKey(const proto::Epoch& e) const;
  void resmooth();     // the smoothed loss drawn again from the first step
  void smoothMore();   // and extended by the steps since
  void clearPoints();  // every curve's points and the run's keys; the curves stay
  // One curve per parameter, made as its first value arrives.
  void addFamily(Chart& chart, const google::protobuf::Map<std::string, double>& values, double x);
  QWidget* makeDistribution(Chart& chart);
  void showDistribution(Chart& chart);  // the chosen parameter's, on the current axis
  void addDistributions(Chart& chart,
                        const google::protobuf::Map<std::string, proto::Histogram>& values,
                        const Key& key);
  void replotOne(QCustomPlot* p);
  Chart& chart(int index) const;

  std::vector<std::unique_ptr<Chart>> m_charts;
  QCPGraph *m_raw = nullptr, *m_smooth = nullptr, *m_accuracy = nullptr;
  QCPGraph *m_perRankGraph = nullptr, *m_commGraph = nullptr;
  // The current run's: its ranks and length (from RunStarted), where each of its
  // steps and evaluations lie, and its losses, for smoothing.
  int m_ranks = 1;
  int64_t m_totalSteps = 0;
  int m_epochs = 0;
  std::vector<Key> m_stepKeys, m_epochKeys;
  std::vector<double> m_losses;
  std::vector<proto::TrainEvent> m_events;  // the current run's, to place again on a new axis
  QSlider* m_smoothing;
  QCheckBox* m_log;
  QComboBox* m_axisChoice;
  XAxis m_xAxis = XAxis::Step;
  double m_weight = 0.6;
  Smoother m_smoother;    // the smoothed loss so far
  size_t m_smoothed = 0;  // steps in it
  std::vector<Overlay> m_overlays;
  std::vector<QCPGraph*> m_overlayGraphs;

  QTimer m_replot;
  bool m_dirty = false;
  std::vector<QCustomPlot*> m_stale;  // charts waiting for the timer, oldest first
  double m_replotMs = 0;
};

}  // namespace netloom::gui
