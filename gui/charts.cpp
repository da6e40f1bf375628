#include "gui/charts.h"

#include <qcustomplot.h>

#include <QBuffer>
#include <QCheckBox>
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

#include "engine/io/output_file.h"

namespace netloom::gui {

namespace {

// One chart per tick: each of the six refreshes about three times a second.
constexpr int kReplotMs = 50;
// The per-layer charts show a legend up to this many curves.
constexpr size_t kMaxLegendRows = 12;
const QColor kRaw(0x9a, 0xb4, 0xd6, 90), kSmooth(0x1f, 0x5f, 0xbf), kVal(0xd0, 0x7a, 0x1f),
    kTest(0x2a, 0x9d, 0x5c), kAccuracy(0x8e, 0x44, 0xad);
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
  return p;
}

QCPGraph* addGraph(QCustomPlot* p, const QColor& c, const QString& name, QCPAxis* y = nullptr) {
  QCPGraph* g = p->addGraph(p->xAxis, y ? y : p->yAxis);
  g->setPen(QPen(c, 1.5));
  g->setName(name);
  g->setAdaptiveSampling(true);
  return g;
}

// The accuracy-like metric of an evaluation: "accuracy" when there is one.
bool accuracyOf(const google::protobuf::Map<std::string, double>& m, double& v) {
  if (m.empty()) return false;
  auto it = m.find("accuracy");
  v = it != m.end() ? it->second : m.begin()->second;
  return true;
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
  std::vector<double> out;
  out.reserve(values.size());
  double last = 0;
  int64_t n = 0;
  for (double v : values) {
    if (!std::isfinite(v)) {
      out.push_back(v);
      continue;
    }
    last = last * weight + (1 - weight) * v;
    ++n;
    double debias = weight > 0 ? 1 - std::pow(weight, double(n)) : 1;
    out.push_back(last / debias);
  }
  return out;
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
  auto* exportButton = new QPushButton(tr("Export…"));
  top->addWidget(exportButton);
  top->addStretch();

  m_loss = makePlot(this, tr("Training loss"), tr("step"), tr("loss"));
  m_epoch = makePlot(this, tr("Evaluation"), tr("epoch"), tr("loss"));
  m_lr = makePlot(this, tr("Learning rate"), tr("step"), tr("lr"));
  m_speed = makePlot(this, tr("Throughput"), tr("step"), tr("samples/s"));
  m_raw = addGraph(m_loss, kRaw, tr("loss"));
  m_smooth = addGraph(m_loss, kSmooth, tr("smoothed"));
  m_epoch->yAxis2->setVisible(true);
  m_epoch->yAxis2->setLabel(tr("accuracy"));
  m_valLoss = addGraph(m_epoch, kVal, tr("validation loss"));
  m_testLoss = addGraph(m_epoch, kTest, tr("test loss"));
  m_accuracy = addGraph(m_epoch, kAccuracy, tr("test accuracy"), m_epoch->yAxis2);
  for (QCPGraph* g : {m_valLoss, m_testLoss, m_accuracy})
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
  m_epoch->legend->setVisible(true);
  m_lrGraph = addGraph(m_lr, kSmooth, tr("lr"));
  m_speedGraph = addGraph(m_speed, kSmooth, tr("samples/s"));
  m_perRankGraph = addGraph(m_speed, kVal, tr("samples/s per rank"));
  m_speed->yAxis2->setLabel(tr("waiting for gradient sums, %"));
  m_commGraph = addGraph(m_speed, kTest, tr("waiting for gradient sums, %"), m_speed->yAxis2);
  m_gradNorms = makePlot(this, tr("Gradient norm per layer"), tr("step"), tr("‖∇w‖"));
  m_weightNorms = makePlot(this, tr("Weight norm per layer"), tr("step"), tr("‖w‖"));
  for (QCustomPlot* p : {m_loss, m_epoch, m_lr, m_speed, m_gradNorms, m_weightNorms}) addReadout(p);
  for (QCustomPlot* p : {m_gradNorms, m_weightNorms}) {
    QFont small = p->legend->font();
    small.setPointSizeF(7);
    p->legend->setFont(small);
    p->legend->setRowSpacing(0);
  }

  auto* grid = new QGridLayout;
  grid->addWidget(m_loss, 0, 0);
  grid->addWidget(m_epoch, 0, 1);
  grid->addWidget(m_lr, 1, 0);
  grid->addWidget(m_speed, 1, 1);
  grid->addWidget(m_gradNorms, 2, 0);
  grid->addWidget(m_weightNorms, 2, 1);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(top);
  lay->addLayout(grid);

  connect(m_smoothing, &QSlider::valueChanged, this,
          [this](int v) { setSmoothing(double(v) / 100.0); });
  connect(m_log, &QCheckBox::toggled, this, &TrainingCharts::setLogScale);
  connect(exportButton, &QPushButton::clicked, this, [this] {
    QString path =
        QFileDialog::getSaveFileName(this, tr("Export the loss chart"), "loss.png",
                                     tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf);;CSV (*.csv)"));
    if (!path.isEmpty()) exportLoss(path);
  });
  m_replot.setInterval(kReplotMs);
  connect(&m_replot, &QTimer::timeout, this, [this] {
    if (m_dirty) {
      m_stale = {m_loss, m_epoch, m_lr, m_speed, m_gradNorms, m_weightNorms};
      m_dirty = false;
    }
    if (m_stale.empty()) return;
    QCustomPlot* next = m_stale.front();
    m_stale.erase(m_stale.begin());
    replotOne(next);
  });
  m_replot.start();
}

void TrainingCharts::addNorms(QCustomPlot* plot, std::map<std::string, QCPGraph*>& graphs,
                              const google::protobuf::Map<std::string, double>& norms,
                              double step) {
  for (const auto& [name, v] : norms) {
    QCPGraph*& g = graphs[name];
    if (!g) {
      QColor c = QColor::fromHsv(int((graphs.size() * 47) % 360), 170, 200);
      g = addGraph(plot, c, QString::fromStdString(name));
      // A legend names the layers while it fits beside the curves; past that, the
      // tooltip under the cursor does.
      plot->legend->setVisible(graphs.size() <= kMaxLegendRows);
    }
    if (!g->data()->isEmpty() && (g->data()->constEnd() - 1)->key >= step)
      g->data()->removeAfter(step - 0.5);  // a resumed run repeats steps
    g->addData(step, v);
  }
}

void TrainingCharts::clear() {
  for (QCPGraph* g : {m_raw, m_smooth, m_valLoss, m_testLoss, m_accuracy, m_lrGraph, m_speedGraph,
                      m_perRankGraph, m_commGraph})
    g->data()->clear();
  m_ranks = 1;
  m_speed->yAxis2->setVisible(false);
  m_speed->legend->setVisible(false);
  m_gradNorms->legend->setVisible(false);
  m_weightNorms->legend->setVisible(false);
  for (auto* graphs : {&m_gradGraphs, &m_weightGraphs}) {
    for (auto& [name, g] : *graphs) g->parentPlot()->removeGraph(g);
    graphs->clear();
  }
  m_steps.clear();
  m_losses.clear();
  m_dirty = true;
}

void TrainingCharts::append(const std::vector<proto::TrainEvent>& events) {
  QVector<double> keys, loss, lr, speed, perRank, comm;
  for (const proto::TrainEvent& e : events) {
    if (e.has_run_started()) m_ranks = std::max(1, e.run_started().ranks());
    if (e.has_step()) {
      const proto::Step& s = e.step();
      if (!m_steps.empty() && double(s.step()) <= m_steps.back()) {
        // A resumed run repeats the steps after its checkpoint: they replace.
        while (!m_steps.empty() && m_steps.back() >= double(s.step()))
          m_steps.pop_back(), m_losses.pop_back();
        m_raw->data()->removeAfter(double(s.step()) - 0.5);
        m_lrGraph->data()->removeAfter(double(s.step()) - 0.5);
        m_speedGraph->data()->removeAfter(double(s.step()) - 0.5);
        m_perRankGraph->data()->removeAfter(double(s.step()) - 0.5);
        m_commGraph->data()->removeAfter(double(s.step()) - 0.5);
        m_raw->addData(keys, loss, true);
        m_lrGraph->addData(keys, lr, true);
        m_speedGraph->addData(keys, speed, true);
        addRankData(keys, perRank, comm);
        keys.clear(), loss.clear(), lr.clear(), speed.clear(), perRank.clear(), comm.clear();
      }
      if (s.grad_norms_size())
        addNorms(m_gradNorms, m_gradGraphs, s.grad_norms(), double(s.step()));
      if (s.weight_norms_size())
        addNorms(m_weightNorms, m_weightGraphs, s.weight_norms(), double(s.step()));
      m_steps.push_back(double(s.step()));
      m_losses.push_back(s.loss());
      keys << double(s.step());
      loss << s.loss();
      lr << s.lr();
      speed << s.samples_per_sec();
      perRank << s.samples_per_sec() / m_ranks;
      comm << 100.0 * s.comm_share();
    } else if (e.has_epoch()) {
      const proto::Epoch& ep = e.epoch();
      double x = ep.epoch(), acc = 0;
      if (ep.has_val()) m_valLoss->addData(x, ep.val_loss());
      if (ep.has_test()) m_testLoss->addData(x, ep.test_loss());
      if (ep.has_test() && accuracyOf(ep.test_metrics(), acc))
        m_accuracy->addData(x, acc);
      else if (ep.has_val() && accuracyOf(ep.val_metrics(), acc))
        m_accuracy->addData(x, acc);
    }
  }
  m_raw->addData(keys, loss, true);
  m_lrGraph->addData(keys, lr, true);
  m_speedGraph->addData(keys, speed, true);
  addRankData(keys, perRank, comm);
  resmooth();
  m_dirty = true;
}

void TrainingCharts::resmooth() {
  std::vector<double> s = smoothed(m_losses, m_weight);
  QVector<double> keys(m_steps.begin(), m_steps.end()), values(s.begin(), s.end());
  m_smooth->setData(keys, values, true);
}

QColor TrainingCharts::runColor(const QString& runName) {
  static const QColor palette[] = {QColor(0xc0, 0x39, 0x2b), QColor(0x16, 0xa0, 0x85),
                                   QColor(0xd3, 0x54, 0x00), QColor(0x8e, 0x44, 0xad),
                                   QColor(0x27, 0xae, 0x60), QColor(0x29, 0x80, 0xb9),
                                   QColor(0xb7, 0x95, 0x0b), QColor(0xe8, 0x43, 0x93)};
  return palette[qHash(runName) % (sizeof palette / sizeof palette[0])];
}

void TrainingCharts::setOverlays(const std::vector<Overlay>& runs) {
  for (QCPGraph* g : m_overlayGraphs) g->parentPlot()->removeGraph(g);
  m_overlayGraphs.clear();
  int k = 0;
  for (const Overlay& r : runs) {
    QColor c = r.color.isValid() ? r.color : kOverlay[k % 4];
    ++k;
    std::vector<double> steps, losses;
    QVector<double> ex, acc;
    for (const auto& e : r.events) {
      if (e.has_step()) steps.push_back(double(e.step().step())), losses.push_back(e.step().loss());
      double a = 0;
      if (e.has_epoch() && e.epoch().has_test() && accuracyOf(e.epoch().test_metrics(), a))
        ex << e.epoch().epoch(), acc << a;
    }
    std::vector<double> s = smoothed(losses, m_weight);
    QCPGraph* g = addGraph(m_loss, c, r.name);
    g->setPen(QPen(c, 1.2, Qt::DashLine));
    g->setData(QVector<double>(steps.begin(), steps.end()), QVector<double>(s.begin(), s.end()));
    QCPGraph* a = addGraph(m_epoch, c, r.name + " " + tr("accuracy"), m_epoch->yAxis2);
    a->setPen(QPen(c, 1.2, Qt::DashLine));
    a->setData(ex, acc);
    m_overlayGraphs.push_back(g);
    m_overlayGraphs.push_back(a);
  }
  m_loss->legend->setVisible(!runs.empty());
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
  m_loss->yAxis->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (on)
    m_loss->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  else
    m_loss->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  m_dirty = true;
}

void TrainingCharts::replotOne(QCustomPlot* p) {
  p->rescaleAxes(true);
  if (p->isVisible()) p->replot();  // a hidden chart is drawn when it is shown
}

void TrainingCharts::replotNow() {
  QElapsedTimer t;
  t.start();
  for (QCustomPlot* p : {m_loss, m_epoch, m_lr, m_speed, m_gradNorms, m_weightNorms}) replotOne(p);
  m_replotMs = double(t.nsecsElapsed()) / 1e6;
  m_dirty = false;
  m_stale.clear();
}

// Only for a run on several ranks: one rank alone has neither curve.
void TrainingCharts::addRankData(const QVector<double>& keys, const QVector<double>& perRank,
                                 const QVector<double>& comm) {
  if (m_ranks < 2) return;
  m_perRankGraph->addData(keys, perRank, true);
  m_commGraph->addData(keys, comm, true);
  m_speed->yAxis2->setVisible(true);
  m_speed->yAxis2->setRange(0, 100);
  m_speed->legend->setVisible(true);
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
    out << "step,loss,smoothed\n";
    std::vector<double> s = smoothed(m_losses, m_weight);
    for (size_t i = 0; i < m_steps.size(); ++i)
      out << qint64(m_steps[i]) << "," << m_losses[i] << "," << s[i] << "\n";
    out.flush();
  } else if (path.endsWith(".pdf", Qt::CaseInsensitive)) {
    return m_loss->savePdf(path);  // QCustomPlot writes PDFs to a file name only
  } else if (path.endsWith(".svg", Qt::CaseInsensitive)) {
    QSvgGenerator svg;
    svg.setOutputDevice(&buffer);
    svg.setSize(m_loss->size());
    svg.setViewBox(m_loss->rect());
    svg.setTitle(tr("Training loss"));
    QCPPainter painter;
    if (!painter.begin(&svg)) return false;
    m_loss->toPainter(&painter, m_loss->width(), m_loss->height());
    if (!painter.end()) return false;
  } else if (!m_loss->toPixmap().save(&buffer, "PNG")) {
    return false;
  }
  return writeFileAtomic(path.toStdString(), bytes.toStdString()).ok();
}

}  // namespace netloom::gui
