// How late the calling thread's event loop runs: a precise timer of `intervalMs` whose
// every tick notes how much later than due it fired (the GUI thread's responsiveness,
// as the benchmarks measure it). `onTick`, where given, is told each tick's lateness.
#pragma once

#include <QElapsedTimer>
#include <QTimer>
#include <algorithm>
#include <functional>
#include <vector>

namespace netloom::bench {

class Lateness {
 public:
  explicit Lateness(int intervalMs, std::function<void(double lateMs)> onTick = {})
      : m_interval(intervalMs), m_onTick(std::move(onTick)) {
    m_tick.setTimerType(Qt::PreciseTimer);
    m_tick.setInterval(intervalMs);
    QObject::connect(&m_tick, &QTimer::timeout, [this] {
      const double now = double(m_clock.nsecsElapsed()) / 1e6;
      m_late.push_back(std::max(0.0, now - m_due));
      if (m_onTick) m_onTick(m_late.back());
      m_due = now + m_interval;
    });
  }
  void start() {
    m_clock.start();
    m_due = m_interval;
    m_tick.start();
  }
  void stop() { m_tick.stop(); }
  const std::vector<double>& late() const { return m_late; }  // in ms, tick by tick

 private:
  double m_interval;
  std::function<void(double)> m_onTick;
  QTimer m_tick;
  QElapsedTimer m_clock;
  double m_due = 0;
  std::vector<double> m_late;
};

}  // namespace netloom::bench
