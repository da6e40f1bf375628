// The training charts: every chart of the table is made and laid out, the x-axis
// switches between step, epoch and time (and back, exactly) with the points of the
// current run, its evaluations and an overlaid run, and a resumed run's repeated
// steps replace the old ones whatever the axis, and one evaluation is drawn on sensible
// axes; distributions show the parameter chosen. The tail that feeds them reads a
// stream off the GUI thread and hands each event on once, by frame or at once.
#include <google/protobuf/util/message_differencer.h>
#include <qcustomplot.h>

#include <QComboBox>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/io/event_stream.h"
#include "gui/chart_table.h"
#include "gui/charts.h"
#include "gui/event_tail.h"

using namespace netloom;
using namespace netloom::gui;

namespace {

// A run of `steps` steps over `epochs` epochs, half a second a step, with an
// evaluation at the end of each epoch.
std::vector<proto::TrainEvent> run(int steps, int epochs, int from = 1) {
  std::vector<proto::TrainEvent> out;
  proto::TrainEvent start;
  start.mutable_run_started()->set_total_steps(steps);
  start.mutable_run_started()->set_epochs(epochs);
  if (from == 1) out.push_back(start);
  for (int i = from; i <= steps; ++i) {
    proto::TrainEvent e;
    e.mutable_step()->set_step(i);
    e.mutable_step()->set_epoch(1 + (i - 1) * epochs / steps);
    e.mutable_step()->set_loss(1.0 / i);
    e.mutable_step()->set_seconds(0.5 * i);
    (*e.mutable_step()->mutable_grad_norms())["fc.weight"] = 0.1 * i;
    (*e.mutable_step()->mutable_grad_norms())["fc.bias"] = 0.01 * i;
    (*e.mutable_step()->mutable_weight_norms())["fc.bias"] = 1.0 + 0.01 * i;
    (*e.mutable_step()->mutable_weight_norms())["fc.weight"] = 2.0 + 0.01 * i;
    out.push_back(e);
    if (i % (steps / epochs) == 0) {
      proto::TrainEvent ep;
      ep.mutable_epoch()->set_epoch(i / (steps / epochs));
      ep.mutable_epoch()->set_has_test(true);
      ep.mutable_epoch()->set_test_loss(0.5);
      (*ep.mutable_epoch()->mutable_test_metrics())["accuracy"] = 0.2 * ep.epoch().epoch();
      // As the trainer writes them: the epoch's own length, and the time since the start.
      ep.mutable_epoch()->set_seconds(0.5 * (steps / epochs) + 0.1);
      ep.mutable_epoch()->set_run_seconds(0.5 * i + 0.1);
      out.push_back(ep);
    }
  }
  return out;
}

QCPGraph* graphNamed(QCustomPlot* p, const QString& name) {
  for (int i = 0; i < p->graphCount(); ++i)
    if (p->graph(i)->name() == name) return p->graph(i);
  return nullptr;
}

std::vector<double> keys(QCPGraph* g) {
  std::vector<double> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) out.push_back(it->key);
  return out;
}

}  // namespace

class TestCharts : public QObject {
  Q_OBJECT

 private slots:
  void everyChartOfTheTableIsLaidOut() {
    TrainingCharts charts;
    std::vector<QCustomPlot*> plots = charts.plots();
    QCOMPARE(int(plots.size()), 8);
    auto* grid = qobject_cast<QGridLayout*>(charts.layout()->itemAt(1)->layout());
    QVERIFY(grid);
    for (QCustomPlot* p : plots)  // a distribution sits under its parameter chooser
      QVERIFY(grid->indexOf(p) >= 0 || grid->indexOf(p->parentWidget()) >= 0);
    QCOMPARE(charts.lossPlot(), plots[0]);
    QCOMPARE(charts.gradNormPlot(), plots[4]);
  }

  void theXAxisSwitchesAndComesBackExactly() {
    TrainingCharts charts;
    charts.append(run(100, 4));
    QCPGraph* loss = charts.lossPlot()->graph(0);
    QCPGraph* smooth = graphNamed(charts.lossPlot(), "smoothed");
    QVERIFY(smooth);
    QCPGraph* accuracy = charts.epochPlot()->graph(2);
    QCPGraph* norms = charts.gradNormPlot()->graph(0);
    std::vector<double> steps = keys(loss);
    QCOMPARE(steps.front(), 1.0);
    QCOMPARE(steps.back(), 100.0);
    QCOMPARE(keys(accuracy), (std::vector<double>{25, 50, 75, 100}));

    charts.setXAxis(TrainingCharts::XAxis::Epoch);
    QCOMPARE(charts.lossPlot()->xAxis->label(), QString("epoch"));
    QCOMPARE(keys(loss).front(), 0.04);
    QCOMPARE(keys(loss).back(), 4.0);
    QCOMPARE(keys(smooth).back(), 4.0);
    QCOMPARE(keys(norms).back(), 4.0);
    QCOMPARE(keys(accuracy), (std::vector<double>{1, 2, 3, 4}));
    QCOMPARE(loss->data()->at(99)->value, 0.01);  // values stay with their steps

    charts.setXAxis(TrainingCharts::XAxis::Time);
    QCOMPARE(keys(loss).back(), 50.0);
    QCOMPARE(keys(accuracy).back(), 50.1);
    // The choice box follows, and drives.
    auto* box = charts.findChild<QComboBox*>();
    QCOMPARE(box->currentIndex(), 2);
    box->setCurrentIndex(0);
    QCOMPARE(charts.xAxis(), TrainingCharts::XAxis::Step);
    QCOMPARE(keys(loss), steps);
    QCOMPARE(keys(accuracy), (std::vector<double>{25, 50, 75, 100}));
  }

  // Every curve of every chart, after any sequence of axis choices, lies where the
  // events themselves say: steps at their step, epoch or time; evaluations at the last
  // step before them, their epoch, and the time they ended.
  void everyChoiceMatchesTheDataItself() {
    const std::vector<proto::TrainEvent> events = run(60, 3);
    std::map<TrainingCharts::XAxis, std::vector<double>> stepX, evalX;
    for (const proto::TrainEvent& e : events) {
      if (e.has_step()) {
        stepX[TrainingCharts::XAxis::Step].push_back(double(e.step().step()));
        stepX[TrainingCharts::XAxis::Epoch].push_back(e.step().step() * 3 / 60.0);
        stepX[TrainingCharts::XAxis::Time].push_back(e.step().seconds());
      }
      if (e.has_epoch()) {
        evalX[TrainingCharts::XAxis::Step].push_back(20.0 * e.epoch().epoch());
        evalX[TrainingCharts::XAxis::Epoch].push_back(double(e.epoch().epoch()));
        evalX[TrainingCharts::XAxis::Time].push_back(e.epoch().run_seconds());
      }
    }
    using A = TrainingCharts::XAxis;
    TrainingCharts charts;
    charts.append(std::vector<proto::TrainEvent>(events.begin(), events.begin() + 30));
    for (A axis : {A::Epoch, A::Time, A::Step, A::Time, A::Epoch, A::Step, A::Epoch}) {
      charts.setXAxis(axis);
      if (charts.lossPoints() < 60)
        charts.append(std::vector<proto::TrainEvent>(events.begin() + 30, events.end()));
      const QString label = axis == A::Step ? "step" : axis == A::Epoch ? "epoch" : "time (s)";
      for (QCustomPlot* p : charts.plots()) {
        QCOMPARE(p->xAxis->label(), label);
        for (int i = 0; i < p->graphCount(); ++i) {
          QCPGraph* g = p->graph(i);
          if (g->dataCount() == 0) continue;
          std::vector<double> k = keys(g);
          const bool perEpoch = g->dataCount() == 3;
          const std::vector<double>& want = perEpoch ? evalX[axis] : stepX[axis];
          if (g->dataCount() == 60) {
            for (size_t j = 0; j < want.size(); ++j) QCOMPARE(k[j], want[j]);
          } else if (perEpoch) {
            QCOMPARE(k, want);
          } else {  // norms every few steps: each on a step's own place
            for (double x : k)
              QVERIFY2(std::count(want.begin(), want.end(), x), qPrintable(g->name()));
          }
        }
      }
    }
  }

  // A parameter has one colour on the gradient and the weight charts, and the legends
  // lie outside the curves' area.
  void parametersKeepTheirColourAndLegendsStayOffTheData() {
    TrainingCharts charts;
    charts.resize(900, 700);
    charts.show();
    charts.append(run(40, 2));
    charts.replotNow();
    auto colourOf = [](QCustomPlot* p, const QString& name) {
      for (int i = 0; i < p->graphCount(); ++i)
        if (p->graph(i)->name() == name) return p->graph(i)->pen().color();
      return QColor();
    };
    for (const char* name : {"fc.weight", "fc.bias"}) {
      QColor grad = colourOf(charts.gradNormPlot(), name);
      QVERIFY(grad.isValid());
      QCOMPARE(colourOf(charts.weightNormPlot(), name), grad);
    }
    QVERIFY(colourOf(charts.gradNormPlot(), "fc.weight") !=
            colourOf(charts.gradNormPlot(), "fc.bias"));
    for (QCustomPlot* p : charts.plots()) {
      if (!p->legend->visible()) continue;
      p->replot();
      QVERIFY2(!p->legend->outerRect().intersects(p->axisRect()->rect()),
               qPrintable(p->objectName()));
    }
  }

  void aResumedRunReplacesItsStepsOnAnyAxis() {
    TrainingCharts charts;
    charts.setXAxis(TrainingCharts::XAxis::Epoch);
    charts.append(run(100, 4));
    charts.append(run(100, 4, 61));  // resumed from the checkpoint at step 60
    QCOMPARE(charts.lossPoints(), 100);
    std::vector<double> k = keys(charts.lossPlot()->graph(0));
    QVERIFY(std::is_sorted(k.begin(), k.end()));
    QCOMPARE(int(std::unique(k.begin(), k.end()) - k.begin()), 100);
  }

  // One evaluation: the axes span a unit around it, never below zero, not
  // QCustomPlot's arbitrary range around a single point.
  void oneEvaluationGetsSensibleAxes() {
    TrainingCharts charts;
    charts.setXAxis(TrainingCharts::XAxis::Epoch);
    charts.append(run(25, 1));
    charts.replotNow();
    QCPRange x = charts.epochPlot()->xAxis->range();
    QCOMPARE(x.lower, 0.5);
    QCOMPARE(x.upper, 1.5);
    QCPRange acc = charts.epochPlot()->yAxis2->range();
    QCOMPARE(acc.lower, 0.0);
    QCOMPARE(acc.upper, 1.0);
    QVERIFY(charts.plots()[3]->yAxis2->range().upper >= 0);
  }

  void percentilesAreReadOffAHistogram() {
    proto::Histogram h;
    h.set_min(-1);
    h.set_max(3);
    for (int b = 0; b < 4; ++b) h.add_counts(25);  // even: the percentiles are linear
    Percentiles p = histogramPercentiles(h);
    for (size_t k = 0; k < p.size(); ++k)
      QVERIFY(std::abs(p[k] - (-1.0 + 4 * kPercentiles[k])) < 1e-9);
    h.clear_counts();
    for (double c : {0, 10, 0, 0}) h.add_counts(c);  // all in [0, 1)
    p = histogramPercentiles(h);
    QCOMPARE(p[0], -1.0);
    QCOMPARE(p[4], 0.5);
    QCOMPARE(p[8], 3.0);
  }

  // Histograms of two parameters at three steps: the chooser names both, the bands
  // show the one chosen, and follow the x-axis.
  void distributionsShowTheChosenParameter() {
    TrainingCharts charts;
    std::vector<proto::TrainEvent> events = run(30, 3);
    for (auto& e : events) {
      if (!e.has_step() || (e.step().step() != 1 && e.step().step() % 10)) continue;
      for (const char* name : {"fc.weight", "fc.bias"}) {
        proto::Histogram& h = (*e.mutable_step()->mutable_weight_histograms())[name];
        double centre = name[3] == 'w' ? double(e.step().step()) : -5.0;
        h.set_min(centre - 1);
        h.set_max(centre + 1);
        for (int b = 0; b < 4; ++b) h.add_counts(1);
      }
    }
    charts.append(events);
    QCustomPlot* plot = charts.distributionPlot(false);
    auto* layers = charts.findChild<QComboBox*>("weightDistributionLayer");
    QVERIFY(layers);
    QCOMPARE(layers->count(), 2);
    QCOMPARE(plot->graphCount(), 9);
    layers->setCurrentText("fc.weight");
    QCPGraph* median = plot->graph(4);
    QCOMPARE(keys(median), (std::vector<double>{1, 10, 20, 30}));
    QCOMPARE(median->data()->at(2)->value, 20.0);
    QCOMPARE(plot->graph(0)->data()->at(2)->value, 19.0);  // the minimum
    layers->setCurrentText("fc.bias");
    QCOMPARE(median->data()->at(2)->value, -5.0);
    charts.setXAxis(TrainingCharts::XAxis::Epoch);
    QCOMPARE(keys(median).back(), 3.0);
    QCOMPARE(charts.distributionPlot(true)->graph(4)->dataCount(), 0);  // no gradients sent
    charts.clear();
    QCOMPARE(layers->count(), 0);
    QCOMPARE(median->dataCount(), 0);
  }

  void overlaysFollowTheAxis() {
    TrainingCharts charts;
    charts.append(run(100, 4));
    int own = charts.lossPlot()->graphCount();
    charts.setOverlays({{"other", run(40, 2), QColor()}});
    QCOMPARE(charts.lossPlot()->graphCount(), own + 1);
    QCOMPARE(keys(charts.lossPlot()->graph(own)).back(), 40.0);
    charts.setXAxis(TrainingCharts::XAxis::Epoch);
    QCOMPARE(charts.lossPlot()->graphCount(), own + 1);
    QCOMPARE(keys(charts.lossPlot()->graph(own)).back(), 2.0);
  }

  // fp16's loss scaling: the steps skipped so far on the loss chart's right axis, the
  // scale (log₂) on the learning rate's; neither where a run has no loss scaling.
  void fp16sScaleAndSkipsAreOnTheRightAxes() {
    TrainingCharts charts;
    QCustomPlot* loss = charts.plots()[kLossChart];
    QCustomPlot* rate = charts.plots()[kRateChart];
    QCPGraph* skipped = graphNamed(loss, "steps skipped (fp16)");
    QCPGraph* scale = graphNamed(rate, "log₂ loss scale");
    QVERIFY(skipped && scale);
    QCOMPARE(skipped->valueAxis(), loss->yAxis2);
    QCOMPARE(scale->valueAxis(), rate->yAxis2);
    charts.append(run(20, 2));
    QCOMPARE(skipped->dataCount(), 0);
    QCOMPARE(scale->dataCount(), 0);
    charts.clear();
    std::vector<proto::TrainEvent> scaled = run(20, 2);
    double used = 65536;
    int64_t skips = 0;
    for (proto::TrainEvent& e : scaled) {
      if (!e.has_step()) continue;
      e.mutable_step()->set_loss_scale(used);
      skips += e.step().step() <= 3 ? 1 : 0;  // the first three overflow
      e.mutable_step()->set_skipped_steps(skips);
      if (e.step().step() <= 3) used /= 2;
    }
    charts.append(scaled);
    QCOMPARE(skipped->dataCount(), 20);
    QCOMPARE(scale->dataCount(), 20);
    QCOMPARE(skipped->data()->at(19)->value, 3.0);
    QCOMPARE(scale->data()->at(0)->value, 16.0);
    QCOMPARE(scale->data()->at(19)->value, 13.0);
  }

  void aTailHandsOnEachEventOnceByFrameOrAtOnce() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("events.pb").toStdString();
    const std::vector<proto::TrainEvent> events = run(40, 2);
    QVERIFY(events.size() > 31);
    EventWriter writer;
    QVERIFY(writer.open(path).ok());
    auto write = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) QVERIFY(writer.write(events[i]).ok());
    };
    // Ten events are held already: the tail starts past them.
    write(0, 10);
    const int64_t held = int64_t(QFileInfo(QString::fromStdString(path)).size());
    write(10, 20);
    EventTail tail(16);
    std::vector<proto::TrainEvent> got;
    int64_t next = 0;
    connect(&tail, &EventTail::frame, this, [&](const std::vector<EventTail::Batch>& batches) {
      for (const EventTail::Batch& b : batches) {
        QCOMPARE(b.stream, 7);
        got.insert(got.end(), b.events.begin(), b.events.end());
        next = b.nextOffset;
      }
    });
    tail.follow(7, QString::fromStdString(path), held);
    QVERIFY(QTest::qWaitFor([&] { return got.size() >= 10; }));
    QCOMPARE(got.size(), size_t(10));
    // Written, and taken at once, before any frame: whatever the reader had read of
    // them comes too, in order.
    write(20, 30);
    EventTail::Batch now = tail.drain(7);
    QCOMPARE(now.events.size(), size_t(10));
    got.insert(got.end(), now.events.begin(), now.events.end());
    QCOMPARE(now.nextOffset, int64_t(QFileInfo(QString::fromStdString(path)).size()));
    // The next frame brings the next event, not those again.
    write(30, 31);
    QVERIFY(QTest::qWaitFor([&] { return got.size() >= 21; }));
    QCOMPARE(got.size(), size_t(21));
    QCOMPARE(next, int64_t(QFileInfo(QString::fromStdString(path)).size()));
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(google::protobuf::util::MessageDifferencer::Equals(got[i], events[10 + i]),
               qPrintable(QString("event %1").arg(10 + i)));
    QCOMPARE(tail.drain(7).events.size(), size_t(0));
    tail.unfollow(7);
    QVERIFY(tail.streams().empty());
  }
};

QTEST_MAIN(TestCharts)
#include "tst_charts.moc"
