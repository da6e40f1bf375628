// Live event streams into the IDE's charts, at a sweep's rate: STREAMS writers (threads)
// append Step events to as many event files, RATE events a second in all, each event
// stamped with the time it was written; the Experiments dock's trial chart
// (TrialCurves: decoding off the GUI thread, one append and one replot a frame)
// follows every stream. Prints:
//  - event-to-chart latency: from an event's write to the end of the replot that
//    drew it (p50, p99, worst), over every event;
//  - the GUI event loop's latency: how late a 5 ms timer on the GUI thread fires
//    (p50, p99, worst);
//  - the events drawn per second, against the rate asked.
// Goals: event-to-chart p99 < 100 ms at 20,000 events/s over 8 streams; GUI loop p99
// < 16 ms.
// Usage: bench_stream_latency [SECONDS] [STREAMS] [RATE]
#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/io/event_stream.h"
#include "gui/trial_curves.h"
#include "lateness.h"
#include "percentile.h"
#include "qcustomplot.h"

using namespace netloom;
using namespace netloom::gui;
using netloom::bench::Lateness;
using netloom::bench::percentile;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The writers' end: set once, and every writer waiting for its next burst wakes at once.
class Stop {
 public:
  void set() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_set = true;
    }
    m_changed.notify_all();
  }
  // Waits until the next burst is due (`ms` from now) or the end is set; true at the end.
  bool waitNext(int ms) {
    std::unique_lock<std::mutex> lock(m_mutex);
    return m_changed.wait_for(lock, std::chrono::milliseconds(ms), [this] { return m_set; });
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  bool m_set = false;
};

// One stream: `rate` Step events a second, in a burst every millisecond (the rate asked
// is the point of the benchmark, so the writer keeps time), until `stop`.
void writeStream(const std::string& path, double rate, Stop& stop) {
  EventWriter w;
  if (!w.open(path)) return;
  const double began = now();
  int64_t step = 0;
  do {
    const int64_t due = int64_t((now() - began) * rate);
    for (; step < due; ++step) {
      proto::TrainEvent e;
      e.set_time(now());
      e.mutable_step()->set_step(step + 1);
      e.mutable_step()->set_loss(2.0 / double(1 + step % 1000) + 0.01 * double(step % 7));
      w.write(e);
    }
  } while (!stop.waitNext(1));
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  const int streams = argc > 2 ? std::atoi(argv[2]) : 8;
  const double rate = argc > 3 ? std::atof(argv[3]) : 20000;
  QTemporaryDir dir;
  TrialCurves curves;
  curves.resize(900, 400);
  curves.show();
  std::vector<double> latency;
  int64_t drawn = 0;
  QObject::connect(&curves, &TrialCurves::shown, [&](const std::vector<EventTail::Batch>& batches) {
    const double t = now();
    for (const auto& b : batches)
      for (const auto& e : b.events) latency.push_back(t - e.time());
    for (const auto& b : batches) drawn += int64_t(b.events.size());
  });
  Stop stop;
  std::vector<std::thread> writers;
  for (int k = 0; k < streams; ++k) {
    const QString path = dir.filePath(QString("trial-%1.pb").arg(k));
    curves.follow(k, path);
    writers.emplace_back(writeStream, path.toStdString(), rate / streams, std::ref(stop));
  }
  // The GUI loop: a 5 ms timer, and how late each tick comes.
  Lateness tick(5);
  tick.start();
  QTimer::singleShot(int(seconds * 1000), &app, [&] {
    stop.set();
    app.quit();
  });
  app.exec();
  for (auto& w : writers) w.join();
  const std::vector<double>& loop = tick.late();
  std::printf("%d streams, %.0f events/s asked, %.1f s: %.0f events/s drawn\n", streams, rate,
              seconds, double(drawn) / seconds);
  std::printf("event-to-chart latency (ms): p50 %.1f  p99 %.1f  worst %.1f   (goal: p99 < 100)\n",
              percentile(latency, 0.5) * 1e3, percentile(latency, 0.99) * 1e3,
              percentile(latency, 1.0) * 1e3);
  std::printf("GUI event loop, late by (ms): p50 %.1f  p99 %.1f  worst %.1f   (goal: p99 < 16)\n",
              percentile(loop, 0.5), percentile(loop, 0.99), percentile(loop, 1.0));
  return 0;
}
