#include "gui/charts.h"

#include <qcustomplot.h>

#include <QBuffer>
#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QGridLayout>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSvgGenerator>
#include <QTextStream>
#include <QVBoxLayout>
#include <cmath>

#include "engine/graph/graph.h"
#include "engine/io/output_file.h"
#include "gui/chart_table.h"

namespace netloom::gui {

namespace {

// Charts are redrawn once a frame at most, within a budget that leaves the frame to
// the rest of the window.
constexpr int kReplotMs = 16;
constexpr int kFrameBudgetMs = 8;
// The per-layer charts show a legend up to this many curves.
constexpr size_t kMaxLegendRows = 12;
const QColor kOverlay[] = {QColor(0xc0, 0x39, 0x2b), QColor(0x16, 0xa0, 0x85),
                           QColor(0x7f, 0x8c, 0x8d), QColor(0xd3, 0x54, 0x00)};

QCustomPlot* makePlot(QWidget* parent, const QString& title, const QString& x, const QString& y) {
  auto* p = new QCustomPlot(parent);
  p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  p->plotLayout()->insertRow(0);
  p->plotLayout()->addElement(0, 0, new QCPTextElement(p, title));
  p->xAxis->setLabel(x);
  p->yAxis->setLabel(y);
  p->setMinimumHeight(160);
  p->setNoAntialiasingOnDrag(true);
  // Long curves are drawn as polylines without antialiasing: a replot of a chart
  // with thousands of visible segments then costs a few milliseconds, not tens.
  p->setPlottingHint(QCP::phFastPolylines, true);
  p->setNotAntialiasedElements(QCP::aePlottables);
  // The legend sits in a row of its own under the axes, never over the curves.
  p->axisRect()->insetLayout()->take(p->legend);
  p->plotLayout()->addElement(2, 0, p->legend);
  p->plotLayout()->setRowStretchFactor(2, 0.001);
  p->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  p->legend->setWrap(4);
  p->legend->setBorderPen(Qt::NoPen);
  p->legend->setMargins(QMargins(2, 0, 2, 0));
  return p;
}

// A parameter's colour, the same on every chart and in every run: chosen by its name.
QColor parameterColor(const std::string& name) {
  const uint64_t h = nameHash(name);
  return QColor::fromHsv(int(h % 360), 150 + int((h >> 16) % 80), 150 + int((h >> 32) % 70));
}

QCPGraph* addGraph(QCustomPlot* p, const QColor& c, const QString& name, QCPAxis* y = nullptr) {
  QCPGraph* g = p->addGraph(p->xAxis, y ? y : p->yAxis);
  g->setPen(QPen(c, 1.5));
  g->setName(name);
  g->setAdaptiveSampling(true);
  return g;
}

// Shows the value under the cursor in the plot's tooltip.
void addReadout(QCustomPlot* p) {
  QObject::connect(p, &QCustomPlot::mouseMove, p, [p](QMouseEvent* e) {
    double x = p->xAxis->pixelToCoord(e->pos().x());
    QStringList lines;
    for (int i = 0; i < p->graphCount(); ++i) {
      QCPGraph* g = p->graph(i);
      if (g->data()->isEmpty() || !g->visible()) continue;
      auto it = g->data()->findBegin(x);
      if (it == g->data()->constEnd()) continue;
      lines << QString("%1 @ %2: %3").arg(g->name()).arg(it->key).arg(it->value, 0, 'g', 5);
    }
    p->setToolTip(lines.join("\n"));
  });
}

}  // namespace

std::vector<double> smoothed(const std::vector<double>& values, double weight) {
  Smoother s{weight};
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(s.next(v));
  return out;
}

struct TrainingCharts::Chart {
  const ChartDesc* desc;
  QCustomPlot* plot;
  std::vector<QCPGraph*> curves;  // one per desc->curves entry
  std::map<std::string, QCPGraph*> family;
  // A distribution chart: the parameter shown, its percentiles' curves (the bands
  // fill between them), and every parameter's percentiles over the run.
  QComboBox* layers = nullptr;
  std::vector<QCPGraph*> bands;
  std::map<std::string, std::vector<std::pair<Key, Percentiles>>> spread;
};

Percentiles histogramPercentiles(const proto::Histogram& h) {
  Percentiles out{};
  double total = 0;
  for (double c : h.counts()) total += c;
  const double width = h.counts_size() ? (h.max() - h.min()) / h.counts_size() : 0;
  for (size_t k = 0; k < kPercentiles.size(); ++k) {
    const double q = kPercentiles[k];
    if (total <= 0 || q <= 0) {
      out[k] = h.min();
      continue;
    }
    if (q >= 1) {
      out[k] = h.max();
      continue;
    }
    // Within the bin where the count passes q of the total, values spread evenly.
    double target = q * total, before = 0;
    int b = 0;
    while (b + 1 < h.counts_size() && before + h.counts(b) < target) before += h.counts(b++);
    double inside = h.counts(b) > 0 ? (target - before) / h.counts(b) : 0;
    out[k] = h.min() + (double(b) + std::clamp(inside, 0.0, 1.0)) * width;
  }
  return out;
}

double TrainingCharts::Key::on(XAxis axis) const {
  return axis == XAxis::Step ? step : axis == XAxis::Epoch ? epoch : seconds;
}

TrainingCharts::TrainingCharts(QWidget* parent) : QWidget(parent) {
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Smoothing")));
  m_smoothing = new QSlider(Qt::Horizontal);
  m_smoothing->setRange(0, 99);
  m_smoothing->setValue(int(m_weight * 100));
  m_smoothing->setMaximumWidth(160);
  top->addWidget(m_smoothing);
  m_log = new QCheckBox(tr("Log scale"));
  top->addWidget(m_log);
  top->addWidget(new QLabel(tr("x-axis")));
  m_axisChoice = new QComboBox;
  m_axisChoice->addItems({tr("Step"), tr("Epoch"), tr("Time")});
  top->addWidget(m_axisChoice);
  auto* exportButton = new QPushButton(tr("Export…"));
  top->addWidget(exportButton);
  top->addStretch();

  auto* grid = new QGridLayout;
  for (const ChartDesc& d : chartTable()) {
    auto c = std::make_unique<Chart>();
    c->desc = &d;
    c->plot = makePlot(this, tr(d.title), tr("step"), tr(d.y));
    for (const CurveDesc& curve : d.curves) {
      QCPGraph* g =
          addGraph(c->plot, curve.color, tr(curve.name), curve.right ? c->plot->yAxis2 : nullptr);
      if (curve.epoch) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
      c->curves.push_back(g);
    }
    if (d.y2) c->plot->yAxis2->setLabel(tr(d.y2));
    c->plot->legend->setVisible(d.legend);
    if (d.family) {
      QFont small = c->plot->legend->font();
      small.setPointSizeF(7);
      c->plot->legend->setFont(small);
      c->plot->legend->setRowSpacing(0);
    }
    addReadout(c->plot);
    QWidget* cell = c->plot;
    if (d.distributions) cell = makeDistribution(*c);
    int index = int(m_charts.size());
    grid->addWidget(cell, index / 2, index % 2);
    m_charts.push_back(std::move(c));
  }
  // The charts the window itself reads or draws more on.
  m_raw = chart(kLossChart).curves[0];
  m_smooth = addGraph(chart(kLossChart).plot, kSmooth, tr("smoothed"));
  m_accuracy = chart(kEvaluationChart).curves[2];
  m_perRankGraph = chart(kThroughputChart).curves[1];
  m_commGraph = chart(kThroughputChart).curves[2];
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(top);
  lay->addLayout(grid);

  connect(m_smoothing, &QSlider::valueChanged, this,
          [this](int v) { setSmoothing(double(v) / 100.0); });
  connect(m_log, &QCheckBox::toggled, this, &TrainingCharts::setLogScale);
  connect(m_axisChoice, &QComboBox::currentIndexChanged, this,
          [this](int i) { setXAxis(XAxis(i)); });
  connect(exportButton, &QPushButton::clicked, this, [this] {
    QString path =
        QFileDialog::getSaveFileName(this, tr("Export the loss chart"), "loss.png",
                                     tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf);;CSV (*.csv)"));
    if (!path.isEmpty()) exportLoss(path);
  });
  m_replot.setInterval(kReplotMs);
  connect(&m_replot, &QTimer::timeout, this, [this] {
    if (m_dirty) {
      m_stale = plots();
      m_dirty = false;
    }
    // The charts that changed, once a frame, while the frame's budget lasts; the rest
    // in the next frame.
    QElapsedTimer spent;
    spent.start();
    while (!m_stale.empty() && spent.elapsed() < kFrameBudgetMs) {
      QCustomPlot* next = m_stale.front();
      m_stale.erase(m_stale.begin());
      replotOne(next);
    }
  });
  m_replot.start();
}

TrainingCharts::~TrainingCharts() = default;

TrainingCharts::Chart& TrainingCharts::chart(int index) const {
  return *m_charts[index];
}

std::vector<QCustomPlot*> TrainingCharts::plots() const {
  std::vector<QCustomPlot*> out;
  for (const auto& c : m_charts) out.push_back(c->plot);
  return out;
}

QCustomPlot* TrainingCharts::lossPlot() const {
  return chart(kLossChart).plot;
}
QCustomPlot* TrainingCharts::epochPlot() const {
  return chart(kEvaluationChart).plot;
}
QCustomPlot* TrainingCharts::gradNormPlot() const {
  return chart(kGradChart).plot;
}
QCustomPlot* TrainingCharts::weightNormPlot() const {
  return chart(kWeightChart).plot;
}
QCustomPlot* TrainingCharts::distributionPlot(bool gradients) const {
  return chart(gradients ? kGradDistChart : kWeightDistChart).plot;
}

TrainingCharts::Key TrainingCharts::stepKey(const proto::Step& s) const {
  Key k;
  k.step = double(s.step());
  k.epoch = m_totalSteps > 0 && m_epochs > 0 ? k.step * m_epochs / double(m_totalSteps)
                                             : double(s.epoch());
  k.seconds = s.seconds();
  return k;
}

TrainingCharts::Key TrainingCharts::epochKey(const proto::Epoch& ep) const {
  // An evaluation lies after the last step before it, at the time it ended.
  const Key* last = m_stepKeys.empty() ? nullptr : &m_stepKeys.back();
  const double seconds = ep.run_seconds() > 0 ? ep.run_seconds() : last ? last->seconds : 0.0;
  return Key{last ? last->step : 0.0, double(ep.epoch()), seconds};
}

void TrainingCharts::addFamily(Chart& c, const google::protobuf::Map<std::string, double>& values,
                               double x) {
  for (const auto& [name, v] : values) {
    QCPGraph*& g = c.family[name];
    if (!g) {
      g = addGraph(c.plot, parameterColor(name), QString::fromStdString(name));
      // A legend names the layers while it fits beside the curves; past that, the
      // tooltip under the cursor does.
      c.plot->legend->setVisible(c.family.size() <= kMaxLegendRows);
    }
    g->addData(x, v);
  }
}

// A parameter chooser over the plot; the percentiles' curves, the bands between
// them shaded the darker the nearer the median, as TensorBoard draws them.
QWidget* TrainingCharts::makeDistribution(Chart& c) {
  auto* cell = new QWidget(this);
  auto* lay = new QVBoxLayout(cell);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(1);
  c.layers = new QComboBox(cell);
  c.layers->setObjectName(c.desc->distributions == &proto::Step::grad_histograms
                              ? "gradDistributionLayer"
                              : "weightDistributionLayer");
  c.layers->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  c.layers->setToolTip(tr("The parameter whose values are shown"));
  lay->addWidget(c.layers);
  lay->addWidget(c.plot, 1);
  const QColor base = kSmooth;
  for (size_t k = 0; k < kPercentiles.size(); ++k) {
    QCPGraph* g = addGraph(c.plot, base, QString("p%1").arg(kPercentiles[k] * 100, 0, 'f', 0));
    g->setPen(k == kPercentiles.size() / 2 ? QPen(base.darker(130), 1.5) : QPen(Qt::NoPen));
    c.bands.push_back(g);
  }
  for (size_t k = 0; k < kPercentiles.size() / 2; ++k) {
    QColor fill = base;
    fill.setAlpha(40 + 35 * int(k));
    c.bands[k]->setBrush(fill);
    c.bands[k]->setChannelFillGraph(c.bands[kPercentiles.size() - 1 - k]);
  }
  connect(c.layers, &QComboBox::currentTextChanged, this, [this, &c] {
    showDistribution(c);
    m_dirty = true;
  });
  return cell;
}

void TrainingCharts::showDistribution(Chart& c) {
  for (QCPGraph* g : c.bands) g->data()->clear();
  auto it = c.spread.find(c.layers->currentText().toStdString());
  if (it == c.spread.end()) return;
  for (size_t k = 0; k < c.bands.size(); ++k) {
    QVector<double> x, y;
    for (const auto& [key, p] : it->second) x << key.on(m_xAxis), y << p[k];
    c.bands[k]->setData(x, y, true);
  }
}

void TrainingCharts::addDistributions(
    Chart& c, const google::protobuf::Map<std::string, proto::Histogram>& values, const Key& key) {
  const std::string shown = c.layers->currentText().toStdString();
  for (const auto& [name, h] : values) {
    auto& points = c.spread[name];
    points.push_back({key, histogramPercentiles(h)});
    if (c.layers->findText(QString::fromStdString(name)) < 0)
      c.layers->addItem(QString::fromStdString(name));  // the first becomes current
    else if (name == shown)
      for (size_t k = 0; k < c.bands.size(); ++k)
        c.bands[k]->addData(key.on(m_xAxis), points.back().second[k]);
  }
}

void TrainingCharts::clear() {
  for (const auto& c : m_charts) {
    for (auto& [name, g] : c->family) c->plot->removeGraph(g);
    c->family.clear();
    c->plot->legend->setVisible(c->desc->legend);
    if (c->desc->y2) c->plot->yAxis2->setVisible(false);
    if (c->layers) c->layers->clear();
  }
  clearPoints();
}

void TrainingCharts::clearPoints() {
  for (const auto& c : m_charts) {
    for (QCPGraph* g : c->curves) g->data()->clear();
    for (auto& [name, g] : c->family) g->data()->clear();
    c->spread.clear();
    for (QCPGraph* g : c->bands) g->data()->clear();
  }
  m_smooth->data()->clear();
  m_smoother = Smoother{m_weight};
  m_smoothed = 0;
  m_ranks = 1;
  m_totalSteps = 0;
  m_epochs = 0;
  m_stepKeys.clear();
  m_epochKeys.clear();
  m_losses.clear();
  m_events.clear();
  m_dirty = true;
}

void TrainingCharts::append(const std::vector<proto::TrainEvent>& events) {
  m_events.insert(m_events.end(), events.begin(), events.end());
  bool rolledBack = false;
  for (const proto::TrainEvent& e : events) {
    if (e.has_run_started()) {
      m_ranks = std::max(1, e.run_started().ranks());
      m_totalSteps = e.run_started().total_steps();
      m_epochs = e.run_started().epochs();
    }
    if (e.has_step()) {
      const proto::Step& s = e.step();
      Key key = stepKey(s);
      double x = key.on(m_xAxis);
      if (!m_stepKeys.empty() && key.step <= m_stepKeys.back().step) {
        // A resumed run repeats the steps after its checkpoint: they replace.
        rolledBack = true;
        double from = m_stepKeys.back().on(m_xAxis);
        while (!m_stepKeys.empty() && m_stepKeys.back().step >= key.step)
          from = m_stepKeys.back().on(m_xAxis), m_stepKeys.pop_back(), m_losses.pop_back();
        for (const auto& c : m_charts) {
          for (size_t i = 0; i < c->curves.size(); ++i)
            if (c->desc->curves[i].step) c->curves[i]->data()->removeAfter(from - 1e-9);
          for (auto& [name, g] : c->family) g->data()->removeAfter(from - 1e-9);
          for (auto& [name, points] : c->spread)
            while (!points.empty() && points.back().first.step >= key.step) points.pop_back();
          if (c->layers) showDistribution(*c);
        }
      }
      m_stepKeys.push_back(key);
      m_losses.push_back(s.loss());
      for (const auto& c : m_charts) {
        const ChartDesc& d = *c->desc;
        for (size_t i = 0; i < d.curves.size(); ++i) {
          double y = 0;
          if (!d.curves[i].step || !d.curves[i].step(s, m_ranks, y)) continue;
          c->curves[i]->addData(x, y);
          if (d.curves[i].right && !c->plot->yAxis2->visible()) {
            c->plot->yAxis2->setVisible(true);
            if (d.y2Max > 0) c->plot->yAxis2->setRange(0, d.y2Max);
            c->plot->legend->setVisible(true);
          }
        }
        if (d.family && (s.*d.family)().size()) addFamily(*c, (s.*d.family)(), x);
        if (d.distributions && (s.*d.distributions)().size())
          addDistributions(*c, (s.*d.distributions)(), key);
      }
    } else if (e.has_epoch()) {
      const proto::Epoch& ep = e.epoch();
      Key key = epochKey(ep);
      m_epochKeys.push_back(key);
      for (const auto& c : m_charts)
        for (size_t i = 0; i < c->desc->curves.size(); ++i) {
          double y = 0;
          if (c->desc->curves[i].epoch && c->desc->curves[i].epoch(ep, y)) {
            c->curves[i]->addData(key.on(m_xAxis), y);
            if (c->desc->curves[i].right) c->plot->yAxis2->setVisible(true);
          }
        }
    }
  }
  rolledBack || m_smoothed > m_losses.size() ? resmooth() : smoothMore();
  m_dirty = true;
}

void TrainingCharts::resmooth() {
  m_smooth->data()->clear();
  m_smoother = Smoother{m_weight};
  m_smoothed = 0;
  smoothMore();
}

// From where it stopped: a live run's append costs its own steps, not the whole run's
// again.
void TrainingCharts::smoothMore() {
  QVector<double> keys, values;
  keys.reserve(int(m_losses.size() - m_smoothed));
  values.reserve(keys.capacity());
  for (size_t i = m_smoothed; i < m_losses.size(); ++i) {
    keys << m_stepKeys[i].on(m_xAxis);
    values << m_smoother.next(m_losses[i]);
  }
  m_smoothed = m_losses.size();
  m_smooth->addData(keys, values, true);
}

void TrainingCharts::setXAxis(XAxis axis) {
  if (m_axisChoice->currentIndex() != int(axis)) m_axisChoice->setCurrentIndex(int(axis));
  if (axis == m_xAxis) return;
  m_xAxis = axis;
  const QString label = axis == XAxis::Step    ? tr("step")
                        : axis == XAxis::Epoch ? tr("epoch")
                                               : tr("time (s)");
  for (const auto& c : m_charts) c->plot->xAxis->setLabel(label);
  // Every point is placed again from the events themselves, not from where it lay on
  // the old axis: no key of one axis is ever read as another's. The curves, their
  // colours and the parameter chosen stay.
  std::vector<proto::TrainEvent> events = std::move(m_events);
  clearPoints();
  append(events);
  for (const auto& c : m_charts)
    if (c->layers) showDistribution(*c);
  setOverlays(std::vector<Overlay>(m_overlays));
  m_dirty = true;
}

QColor TrainingCharts::runColor(const QString& runName) {
  static const QColor palette[] = {QColor(0xc0, 0x39, 0x2b), QColor(0x16, 0xa0, 0x85),
                                   QColor(0xd3, 0x54, 0x00), QColor(0x8e, 0x44, 0xad),
                                   QColor(0x27, 0xae, 0x60), QColor(0x29, 0x80, 0xb9),
                                   QColor(0xb7, 0x95, 0x0b), QColor(0xe8, 0x43, 0x93)};
  return palette[qHash(runName) % (sizeof palette / sizeof palette[0])];
}

void TrainingCharts::setOverlays(const std::vector<Overlay>& runs) {
  m_overlays = runs;
  for (QCPGraph* g : m_overlayGraphs) g->parentPlot()->removeGraph(g);
  m_overlayGraphs.clear();
  int k = 0;
  for (const Overlay& r : runs) {
    QColor c = r.color.isValid() ? r.color : kOverlay[k % 4];
    ++k;
    // Where the run's own steps and evaluations lie on the x-axis chosen.
    int64_t total = 0;
    int epochs = 0;
    double lastStep = 0, lastSeconds = 0;
    std::vector<double> losses;
    QVector<double> steps, ex, acc;
    for (const auto& e : r.events) {
      if (e.has_run_started())
        total = e.run_started().total_steps(), epochs = e.run_started().epochs();
      if (e.has_step()) {
        const proto::Step& s = e.step();
        lastStep = double(s.step());
        lastSeconds = s.seconds();
        Key key{lastStep,
                total > 0 && epochs > 0 ? lastStep * epochs / double(total) : double(s.epoch()),
                s.seconds()};
        steps << key.on(m_xAxis);
        losses.push_back(s.loss());
      }
      double a = 0;
      if (e.has_epoch() && e.epoch().has_test() && accuracyOf(e.epoch().test_metrics(), a)) {
        const double t = e.epoch().run_seconds() > 0 ? e.epoch().run_seconds() : lastSeconds;
        Key key{lastStep, double(e.epoch().epoch()), t};
        ex << key.on(m_xAxis), acc << a;
      }
    }
    std::vector<double> s = smoothed(losses, m_weight);
    QCPGraph* g = addGraph(lossPlot(), c, r.name);
    g->setPen(QPen(c, 1.2, Qt::DashLine));
    g->setData(steps, QVector<double>(s.begin(), s.end()));
    QCPGraph* a = addGraph(epochPlot(), c, r.name + " " + tr("accuracy"), epochPlot()->yAxis2);
    a->setPen(QPen(c, 1.2, Qt::DashLine));
    a->setData(ex, acc);
    m_overlayGraphs.push_back(g);
    m_overlayGraphs.push_back(a);
  }
  lossPlot()->legend->setVisible(!runs.empty());
  m_dirty = true;
}

void TrainingCharts::setSmoothing(double weight) {
  m_weight = std::clamp(weight, 0.0, 0.99);
  if (m_smoothing->value() != int(std::lround(m_weight * 100)))
    m_smoothing->setValue(int(std::lround(m_weight * 100)));
  resmooth();
  m_dirty = true;
}

void TrainingCharts::setLogScale(bool on) {
  if (m_log->isChecked() != on) m_log->setChecked(on);
  QCPAxis* y = lossPlot()->yAxis;
  y->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (on)
    y->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  else
    y->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  m_dirty = true;
}

namespace {

// An axis over one value (one evaluation, a constant learning rate) spans a unit
// around it, not below zero for values that cannot be, rather than QCustomPlot's
// arbitrary range (it centres its previous span on the value: −1.5 to 3.5).
void widenDegenerate(QCustomPlot* p, QCPAxis* axis) {
  bool found = false;
  QCPRange data;
  for (int i = 0; i < p->graphCount(); ++i) {
    QCPGraph* g = p->graph(i);
    if (!g->visible() || g->data()->isEmpty()) continue;
    bool ok = false;
    QCPRange r;
    if (g->keyAxis() == axis) r = g->getKeyRange(ok);
    if (g->valueAxis() == axis) r = g->getValueRange(ok);
    if (!ok) continue;
    data = found ? QCPRange(std::min(data.lower, r.lower), std::max(data.upper, r.upper)) : r;
    found = true;
  }
  if (!found || data.size() > 1e-12 * std::max(1.0, std::abs(data.center()))) return;
  double c = data.center(), half = std::max(0.5, std::abs(c) * 0.1);
  double lower = c >= 0 ? std::max(0.0, c - half) : c - half;
  axis->setRange(lower, lower + 2 * half);
}

}  // namespace

void TrainingCharts::replotOne(QCustomPlot* p) {
  p->rescaleAxes(true);
  for (QCPAxis* axis : {p->xAxis, p->yAxis, p->yAxis2}) widenDegenerate(p, axis);
  for (const auto& c : m_charts)
    if (c->plot == p && c->desc->y2Max > 0) p->yAxis2->setRange(0, c->desc->y2Max);
  if (p->isVisible()) p->replot();  // a hidden chart is drawn when it is shown
}

void TrainingCharts::replotNow() {
  QElapsedTimer t;
  t.start();
  for (QCustomPlot* p : plots()) replotOne(p);
  m_replotMs = double(t.nsecsElapsed()) / 1e6;
  m_dirty = false;
  m_stale.clear();
}

int TrainingCharts::perRankPoints() const {
  return m_perRankGraph->dataCount();
}
int TrainingCharts::commPoints() const {
  return m_commGraph->dataCount();
}

int TrainingCharts::lossPoints() const {
  return m_raw->dataCount();
}

int TrainingCharts::epochPoints() const {
  return m_accuracy->dataCount();
}

bool TrainingCharts::exportLoss(const QString& path) const {
  // Made in memory, then written as every output is (engine/io/output_file.h): never
  // over a device or a link's name, and never half a file.
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (path.endsWith(".csv", Qt::CaseInsensitive)) {
    QTextStream out(&buffer);
    out << "step,epoch,seconds,loss,smoothed\n";
    std::vector<double> s = smoothed(m_losses, m_weight);
    for (size_t i = 0; i < m_stepKeys.size(); ++i)
      out << qint64(m_stepKeys[i].step) << "," << m_stepKeys[i].epoch << ","
          << m_stepKeys[i].seconds << "," << m_losses[i] << "," << s[i] << "\n";
    out.flush();
  } else if (path.endsWith(".pdf", Qt::CaseInsensitive)) {
    return lossPlot()->savePdf(path);  // QCustomPlot writes PDFs to a file name only
  } else if (path.endsWith(".svg", Qt::CaseInsensitive)) {
    QSvgGenerator svg;
    svg.setOutputDevice(&buffer);
    svg.setSize(lossPlot()->size());
    svg.setViewBox(lossPlot()->rect());
    svg.setTitle(tr("Training loss"));
    QCPPainter painter;
    if (!painter.begin(&svg)) return false;
    lossPlot()->toPainter(&painter, lossPlot()->width(), lossPlot()->height());
    if (!painter.end()) return false;
  } else if (!lossPlot()->toPixmap().save(&buffer, "PNG")) {
    return false;
  }
  return writeFileAtomic(path.toStdString(), bytes.toStdString()).ok();
}

}  // namespace netloom::gui
