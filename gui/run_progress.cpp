#include "gui/run_progress.h"

#include <algorithm>

#include "editor/panels.h"
#include "engine/util/memory_budget.h"

namespace netloom::gui {

RunProgress::RunProgress() : m_label(new QLabel), m_bar(new QProgressBar) {
  m_bar->setMaximumWidth(220);
  m_bar->setTextVisible(true);
  m_bar->hide();
}

void RunProgress::busy(const QString& text) {
  m_bar->setRange(0, 0);
  m_bar->show();
  m_label->setText(text);
}

void RunProgress::showTransfer(const QString& run, const QString& what, qint64 done, qint64 total) {
  m_label->setText(
      tr("Run %1: uploading %2: %3 of %4")
          .arg(run, what, editor::humanBytes(double(done)), editor::humanBytes(double(total))));
  // In thousandths, so files past 2 GiB fit the bar's int.
  m_bar->setFormat(tr("uploading %p%"));
  m_bar->setRange(0, 1000);
  m_bar->setValue(total > 0 ? int(done * 1000 / total) : 1000);
  if (done >= total) m_bar->setRange(0, 0);  // sent: busy until the run's first step
}

void RunProgress::showSteps(const RunRecord& run) {
  const proto::RunStarted* rs = run.started();
  const proto::Step* last = nullptr;
  for (auto it = run.events.rbegin(); it != run.events.rend() && !last; ++it)
    if (it->has_step()) last = &it->step();
  if (!rs || !last) return;
  int64_t total = std::max<int64_t>(1, rs->total_steps());
  m_bar->setRange(0, int(std::min<int64_t>(total, INT32_MAX)));
  m_bar->setValue(int(std::min<int64_t>(last->step(), total)));
  m_bar->setFormat(tr("epoch %1 · step %2/%3").arg(last->epoch()).arg(last->step()).arg(total));
  // The pace of the last steps, in the run's own clock: smoothed, and the same
  // after a reattach as before it.
  const RunRecord::Pace pace = run.pace();
  int64_t eta =
      pace.stepsPerSec > 0 ? int64_t(double(total - last->step()) / pace.stepsPerSec) : -1;
  QString etaText =
      eta < 0 ? QString("…") : QString("%1:%2").arg(eta / 60).arg(eta % 60, 2, 10, QChar('0'));
  // Memory in use on the run's device, as its last report said.
  QString memory;
  for (auto it = run.events.rbegin(); it != run.events.rend(); ++it)
    if (it->has_step() && it->step().device_memory_used() > 0) {
      memory = tr(" · %1 memory %2 of %3")
                   .arg(QString::fromStdString(rs->device()),
                        QString::fromStdString(formatBytes(it->step().device_memory_used())),
                        QString::fromStdString(formatBytes(rs->device_memory_total())));
      break;
    }
  m_label->setText(tr("%1 · %2 samples/s · ETA %3%4")
                       .arg(run.name)
                       .arg(pace.samplesPerSec, 0, 'f', 0)
                       .arg(etaText, memory));
}

}  // namespace netloom::gui
