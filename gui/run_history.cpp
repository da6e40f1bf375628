#include "gui/run_history.h"

#include <QFileInfo>
#include <QSignalBlocker>
#include <algorithm>
#include <set>

#include "gui/remote_target.h"

namespace netloom::gui {

RunHistory::RunHistory(QObject* parent) : QObject(parent), m_list(new QListWidget) {
  connect(m_list, &QListWidget::itemChanged, this, &RunHistory::checksChanged);
}

QString RunHistory::dirFor(const QString& projectPath) {
  if (projectPath.isEmpty()) return {};
  const QFileInfo file(projectPath);
  return file.absolutePath() + "/runs/" + file.completeBaseName();
}

void RunHistory::reload(const QString& runsDir, const std::string& projectName,
                        const Active& active) {
  m_runs = runsDir.isEmpty() ? std::vector<RunRecord>{} : listRuns(runsDir);
  if (!runsDir.isEmpty()) {
    for (RunRecord& r : listRuns(QFileInfo(runsDir).path()))
      if (r.project.name() == projectName) m_runs.push_back(std::move(r));
    std::stable_sort(m_runs.begin(), m_runs.end(),
                     [](const RunRecord& a, const RunRecord& b) { return a.name < b.name; });
  }
  fill(active);
}

// The list again, keeping what was checked and selected.
void RunHistory::fill(const Active& active) {
  QSignalBlocker block(m_list);
  std::set<QString> checked;
  for (int i = 0; i < m_list->count(); ++i)
    if (m_list->item(i)->checkState() == Qt::Checked)
      checked.insert(m_list->item(i)->data(Qt::UserRole).toString());
  const QString selected =
      m_list->currentItem() ? m_list->currentItem()->data(Qt::UserRole).toString() : QString();
  m_list->clear();
  for (const RunRecord& r : m_runs) {
    const bool isActive = !active.dir.isEmpty() && active.dir == r.dir;
    QString state =
        isActive ? active.state : r.stateText() + tr(" · %n step(s)", "", int(r.steps()));
    if (auto job = remoteJobOf(r.dir))
      state += tr(" · on %1 (job %2)")
                   .arg(QString::fromStdString(job->host().name().empty() ? job->host().address()
                                                                          : job->host().name()),
                        QString::fromStdString(job->id()));
    QString tags;
    for (const QString& t : r.tags) tags += " #" + t;
    auto* it = new QListWidgetItem(r.label() + tags + " — " + state, m_list);
    it->setData(Qt::UserRole, r.dir);
    it->setFlags(it->flags() | Qt::ItemIsUserCheckable);
    it->setCheckState(checked.count(r.dir) ? Qt::Checked : Qt::Unchecked);
    it->setToolTip(r.note.isEmpty() ? r.dir : r.dir + "\n\n" + r.note);
    // The run's colour on every chart, as a mark in the list.
    if (!isActive) it->setForeground(TrainingCharts::runColor(r.name));
    if (r.dir == selected) m_list->setCurrentItem(it);
  }
}

void RunHistory::clear() {
  m_list->clear();
}

std::vector<const RunRecord*> RunHistory::checked() const {
  std::vector<const RunRecord*> out;
  for (int i = 0; i < m_list->count(); ++i) {
    if (m_list->item(i)->checkState() != Qt::Checked) continue;
    QString dir = m_list->item(i)->data(Qt::UserRole).toString();
    for (const RunRecord& r : m_runs)
      if (r.dir == dir) out.push_back(&r);
  }
  return out;
}

const RunRecord* RunHistory::selected() const {
  QListWidgetItem* it = m_list->currentItem();
  auto checkedRuns = checked();
  const QString dir = it                        ? it->data(Qt::UserRole).toString()
                      : checkedRuns.size() == 1 ? checkedRuns[0]->dir
                                                : QString();
  for (const RunRecord& r : m_runs)
    if (r.dir == dir) return &r;
  return nullptr;
}

std::vector<TrainingCharts::Overlay> RunHistory::overlays(const QString& except) const {
  std::vector<TrainingCharts::Overlay> out;
  for (const RunRecord* r : checked())
    if (r->dir != except) out.push_back({r->label(), r->events, TrainingCharts::runColor(r->name)});
  return out;
}

}  // namespace netloom::gui
