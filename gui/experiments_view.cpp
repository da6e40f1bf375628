#include "gui/experiments_view.h"

#include <google/protobuf/text_format.h>
#include <qcustomplot.h>

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTimer>
#include <QUndoStack>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <csignal>

#include "editor/document.h"
#include "engine/io/event_stream.h"
#include "engine/io/project_file.h"
#include "gui/runs.h"
#include "gui/trial_curves.h"
#include "remote/hosts.h"

namespace netloom::gui {
namespace {

enum Column { kTrial, kStatus, kObjective, kEpochs, kRung, kTime, kParams };

// A sortable cell: numbers sort as numbers.
class Cell : public QTableWidgetItem {
 public:
  using QTableWidgetItem::QTableWidgetItem;
  bool operator<(const QTableWidgetItem& o) const override {
    const QVariant a = data(Qt::UserRole), b = o.data(Qt::UserRole);
    if (a.isValid() && b.isValid()) return a.toDouble() < b.toDouble();
    return QTableWidgetItem::operator<(o);
  }
};

QTableWidgetItem* cell(const QString& text, const QVariant& number = {}) {
  auto* item = new Cell(text);
  if (number.isValid()) item->setData(Qt::UserRole, number);
  item->setFlags(item->flags() & ~Qt::ItemIsEditable);
  return item;
}

}  // namespace

ExperimentsView::ExperimentsView(editor::GraphDocument* doc, QWidget* parent)
    : QWidget(parent), m_doc(doc) {
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_run = new QPushButton(tr("Run Sweep"), this);
  m_run->setObjectName("runSweep");
  m_stop = new QPushButton(tr("Stop"), this);
  m_stop->setObjectName("stopSweep");
  m_promote = new QPushButton(tr("Promote"), this);
  m_promote->setObjectName("promoteTrial");
  m_promote->setToolTip(tr("Copy the selected trial's parameters into the project (undoable)"));
  m_stopTrial = new QPushButton(tr("Stop Trial"), this);
  m_stopTrial->setObjectName("stopTrial");
  m_more = new QSpinBox(this);
  m_more->setObjectName("extendBy");
  m_more->setRange(1, 1000);
  m_more->setValue(6);
  m_extend = new QPushButton(tr("Extend"), this);
  m_extend->setObjectName("extendSweep");
  m_extend->setToolTip(tr("Add this many trials to the sweep and run them"));
  m_text = new QPlainTextEdit(this);
  m_text->setObjectName("sweepText");
  m_text->setPlaceholderText(
      tr("params { target: \"train.optimizer.lr\" min: 0.0001 max: 0.1 log: true }\n"
         "params { target: \"nodes.fc1.out_features\" choices: [\"32\", \"64\"] }\n"
         "objective: \"test_accuracy\"  trials: 12  parallel: 3"));
  m_text->setMaximumHeight(110);
  m_apply = new QPushButton(tr("Apply"), this);
  m_apply->setObjectName("applySweep");
  m_where = new QComboBox(this);
  m_where->setObjectName("sweepTarget");
  m_where->setToolTip(tr("Where the trials run: this computer, or saved hosts (SSH or Slurm)"));
  reloadHosts();
  m_filter = new QLineEdit(this);
  m_filter->setObjectName("trialFilter");
  m_filter->setPlaceholderText(tr("Filter trials: status or parameter text"));
  auto* bar = new QHBoxLayout;
  for (QWidget* w : std::initializer_list<QWidget*>{m_where, m_run, m_stop, m_promote, m_stopTrial,
                                                    m_more, m_extend, m_filter})
    bar->addWidget(w);
  auto* definition = new QHBoxLayout;
  definition->addWidget(m_text, 1);
  definition->addWidget(m_apply, 0, Qt::AlignTop);
  m_table = new QTableWidget(this);
  m_table->setObjectName("trials");
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->verticalHeader()->hide();
  m_coordinates = new QCustomPlot(this);
  m_coordinates->setObjectName("coordinates");
  m_coordinates->setMinimumHeight(160);
  m_best = new QCustomPlot(this);
  m_best->setObjectName("bestSoFar");
  m_best->setMinimumHeight(120);
  m_best->xAxis->setLabel(tr("trials ended"));
  m_best->yAxis->setLabel(tr("best so far"));
  m_importance = new QLabel(this);
  m_importance->setObjectName("importance");
  m_importance->setWordWrap(true);
  auto* plots = new QVBoxLayout;
  plots->addWidget(m_coordinates, 2);
  plots->addWidget(m_best, 1);
  m_curves = new TrialCurves(this);
  m_curves->setMinimumHeight(140);
  plots->addWidget(m_curves, 2);
  plots->addWidget(m_importance);
  auto* right = new QWidget(this);
  right->setLayout(plots);
  auto* split = new QSplitter(this);
  split->addWidget(m_table);
  split->addWidget(right);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_summary);
  layout->addLayout(definition);
  layout->addLayout(bar);
  layout->addWidget(split, 1);
  m_watcher = new QFileSystemWatcher(this);
  m_poll = new QTimer(this);
  m_poll->setInterval(500);  // a watcher misses a file replaced atomically on some systems
  connect(m_poll, &QTimer::timeout, this, &ExperimentsView::reload);
  connect(m_watcher, &QFileSystemWatcher::fileChanged, this, &ExperimentsView::reload);
  connect(m_watcher, &QFileSystemWatcher::directoryChanged, this, &ExperimentsView::reload);
  connect(m_run, &QPushButton::clicked, this, &ExperimentsView::runSweep);
  connect(m_stop, &QPushButton::clicked, this, &ExperimentsView::stopSweep);
  connect(m_promote, &QPushButton::clicked, this, [this] {
    if (selectedTrial() >= 0) promote(selectedTrial());
  });
  connect(m_stopTrial, &QPushButton::clicked, this, [this] {
    if (selectedTrial() >= 0) stopTrial(selectedTrial());
  });
  connect(m_extend, &QPushButton::clicked, this, [this] { extend(m_more->value()); });
  connect(m_apply, &QPushButton::clicked, this, [this] { applySweepText(m_text->toPlainText()); });
  connect(m_filter, &QLineEdit::textChanged, this, &ExperimentsView::applyFilters);
  connect(m_table, &QTableWidget::itemSelectionChanged, this, &ExperimentsView::followCurves);
  connect(m_coordinates, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
    m_pressAxis = int(std::lround(m_coordinates->xAxis->pixelToCoord(e->pos().x())));
    m_pressY = m_coordinates->yAxis->pixelToCoord(e->pos().y());
  });
  connect(m_coordinates, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
    const double y = m_coordinates->yAxis->pixelToCoord(e->pos().y());
    if (m_pressAxis < 0 || !m_plan) return;
    if (std::fabs(y - m_pressY) < 0.02) {
      m_brushes.remove(m_pressAxis);
      applyFilters();
      return;
    }
    // In the axis's 0 … 1: brushed as the fraction of the axis's span.
    m_brushes[m_pressAxis] = {std::min(y, m_pressY), std::max(y, m_pressY)};
    applyFilters();
  });
  connect(doc, &editor::GraphDocument::reset, this, &ExperimentsView::onProjectChanged);
  connect(doc, &editor::GraphDocument::changed, this, &ExperimentsView::onProjectChanged);
  onProjectChanged();
}

ExperimentsView::~ExperimentsView() {
  if (m_process) {
    m_process->disconnect(this);
    ::kill(pid_t(m_process->processId()), SIGTERM);  // the sweep's state stays on disk
    m_process->waitForFinished(10000);
  }
}

void ExperimentsView::reloadHosts() {
  const QString kept = m_where->currentData().toString();
  m_where->clear();
  m_where->addItem(tr("This computer"), QString());
  auto hosts = remote::loadHosts(remote::defaultHostsPath());
  QStringList names;
  if (hosts)
    for (const remotepb::Host& h : hosts->hosts()) {
      const QString name = QString::fromStdString(h.name());
      names << name;
      m_where->addItem(tr("%1 (a trial at a time)").arg(name), name);
    }
  if (names.size() > 1) m_where->addItem(tr("All saved hosts"), names.join(','));
  m_where->setCurrentIndex(std::max(0, m_where->findData(kept)));
}

QString ExperimentsView::folder() const {
  if (m_doc->filePath().isEmpty()) return {};
  QFileInfo f(m_doc->filePath());
  return f.absoluteDir().filePath("runs/sweep-" + f.completeBaseName());
}

void ExperimentsView::say(const QString& text) {
  m_summary->setText(text);
}

std::vector<int> ExperimentsView::selectedTrials() const {
  std::vector<int> trials;
  for (const QModelIndex& row : m_table->selectionModel()->selectedRows())
    trials.push_back(m_table->item(row.row(), kTrial)->data(Qt::UserRole).toInt());
  return trials;
}

int ExperimentsView::selectedTrial() const {
  const std::vector<int> trials = selectedTrials();
  return trials.empty() ? -1 : trials.front();
}

bool ExperimentsView::stopTrial(int trial) {
  if (!running()) return false;
  if (Status s = sweep::stopTrial(folder().toStdString(), trial); !s)
    return say(QString::fromStdString(s.message())), false;
  return true;
}

void ExperimentsView::extend(int more) {
  if (!m_doc->toProject().has_sweep() || running()) return;
  proto::Sweep s = m_doc->toProject().sweep();
  const int now = m_plan ? m_plan->trials : std::max(s.trials(), 0);
  s.set_trials(now + more);
  m_doc->setSweep(s, tr("Extend the Sweep by %1 Trials").arg(more));
  runSweep();
}

bool ExperimentsView::applySweepText(const QString& text) {
  proto::Sweep s;
  if (!google::protobuf::TextFormat::ParseFromString(text.toStdString(), &s)) {
    say(tr(
        "The sweep's text does not read as a sweep section (see its syntax in the placeholder)"));
    return false;
  }
  proto::Project p = m_doc->toProject();
  *p.mutable_sweep() = s;
  if (auto plan = sweep::planSweep(p); !plan) {
    say(QString::fromStdString(plan.error().message));
    return false;
  }
  m_doc->setSweep(s, tr("Edit the Sweep"));
  return true;
}

void ExperimentsView::onProjectChanged() {
  const proto::Project project = m_doc->toProject();
  if (!m_text->hasFocus()) {
    std::string text;
    if (project.has_sweep()) google::protobuf::TextFormat::PrintToString(project.sweep(), &text);
    if (QString::fromStdString(text) != m_text->toPlainText())
      m_text->setPlainText(QString::fromStdString(text));
  }
  auto plan = sweep::planSweep(project);
  m_plan.reset();
  if (!plan) {
    say(tr("No sweep to run: %1").arg(QString::fromStdString(plan.error().message)));
    m_run->setEnabled(false);
  } else {
    m_plan = std::move(*plan);
    say(tr("%1 trials, %2 at once; objective %3 (%4)")
            .arg(m_plan->trials)
            .arg(m_plan->parallel)
            .arg(QString::fromStdString(m_plan->objective.spec()))
            .arg(m_plan->maximize ? tr("larger is better") : tr("smaller is better")));
    m_run->setEnabled(!running());
  }
  m_stop->setEnabled(running());
  m_stopTrial->setEnabled(running());
  m_extend->setEnabled(m_plan.has_value() && !running());
  const QString dir = folder();
  if (!m_watcher->directories().isEmpty()) m_watcher->removePaths(m_watcher->directories());
  if (!m_watcher->files().isEmpty()) m_watcher->removePaths(m_watcher->files());
  if (!dir.isEmpty() && QDir(dir).exists()) {
    m_watcher->addPath(dir);
    if (QFile::exists(dir + "/sweep.json")) m_watcher->addPath(dir + "/sweep.json");
  }
  reload();
}

void ExperimentsView::runSweep() {
  if (running() || !m_plan) return;
  const QString dir = folder();
  if (dir.isEmpty()) {
    say(tr("Save the project first: its sweep's trials go beside it"));
    return;
  }
  if (!QDir().mkpath(dir)) {
    say(tr("%1: cannot create the sweep's folder").arg(dir));
    return;
  }
  const QString projectDir = QFileInfo(m_doc->filePath()).absolutePath();
  const QString copy = dir + "/project.nlproj";
  if (Status s = saveProject(copy.toStdString(), frozen(m_doc->toProject(), projectDir)); !s) {
    say(QString::fromStdString(s.message()));
    return;
  }
  const QString exe = ChildProcessTarget::trainerPath();
  if (exe.isEmpty()) {
    say(tr("netloom-train was not found beside the IDE or on PATH"));
    return;
  }
  m_process = new QProcess(this);
  m_process->setWorkingDirectory(projectDir);
  connect(m_process, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    const QString err = QString::fromUtf8(m_process->readAllStandardError()).trimmed();
    const bool ok = status == QProcess::NormalExit && code == 0;
    m_process->deleteLater();
    m_process = nullptr;
    m_poll->stop();
    reload();
    m_run->setEnabled(m_plan.has_value());
    m_stop->setEnabled(false);
    if (!ok) say(err.isEmpty() ? tr("The sweep ended with status %1").arg(code) : err);
    emit sweepEnded(ok, err);
  });
  QStringList args{copy, "--sweep", "--sweep-dir", dir, "--quiet"};
  if (const QString hosts = m_where->currentData().toString(); !hosts.isEmpty())
    args << "--target" << hosts;
  m_process->start(exe, args);
  if (!m_process->waitForStarted(10000)) {
    say(tr("cannot start %1: %2").arg(exe, m_process->errorString()));
    delete m_process;
    m_process = nullptr;
    return;
  }
  m_run->setEnabled(false);
  m_stop->setEnabled(true);
  m_poll->start();
  onProjectChanged();
}

void ExperimentsView::stopSweep() {
  if (m_process) ::kill(pid_t(m_process->processId()), SIGTERM);  // trials end after their step
}

void ExperimentsView::reload() {
  if (!m_plan || folder().isEmpty()) {  // no sweep, or an untitled project: nothing on disk
    m_trials.clear();
  } else {
    auto read = sweep::readSweep(*m_plan, (folder() + "/sweep.json").toStdString());
    if (!read) return;  // a file being replaced: the next change reads it whole
    m_trials = std::move(*read);
  }
  fillTable();
  drawCoordinates();
  drawBest();
  showImportance();
  applyFilters();
  followCurves();
  emit trialsChanged();
}

void ExperimentsView::overlaySelected(std::vector<int> selected) {
  std::sort(selected.begin(), selected.end());
  std::vector<std::pair<int, std::string>> now;
  for (int k : selected)
    for (const auto& t : m_trials)
      if (t.index == k && t.ended()) now.push_back({k, t.status});
  if (now == m_overlaid) return;
  m_overlaid = now;
  std::vector<TrainingCharts::Overlay> runs;
  for (const auto& [k, status] : now) {
    auto events = readEvents(m_trials[size_t(k)].folder + "/events.pb");
    if (!events) continue;
    runs.push_back({tr("trial %1").arg(k), std::move(events->events),
                    TrainingCharts::runColor(QString("trial-%1").arg(k))});
  }
  emit overlaysChanged(runs);
}

void ExperimentsView::followCurves() {
  std::vector<int> want = selectedTrials();
  overlaySelected(want);
  if (want.empty())
    for (const auto& t : m_trials)
      if (t.status == "running") want.push_back(t.index);
  std::sort(want.begin(), want.end());
  if (want == m_followed) return;
  for (int k : m_followed)
    if (!std::binary_search(want.begin(), want.end(), k)) m_curves->unfollow(k);
  for (int k : want)
    if (!std::binary_search(m_followed.begin(), m_followed.end(), k))
      for (const auto& t : m_trials)
        if (t.index == k) m_curves->follow(k, QString::fromStdString(t.folder + "/events.pb"));
  m_followed = want;
}

void ExperimentsView::fillTable() {
  const std::vector<int> selected = selectedTrials();  // kept across the refill
  const QSignalBlocker quiet(m_table);
  m_table->setSortingEnabled(false);
  QStringList headers{tr("Trial"),  tr("Status"), tr("Objective"),
                      tr("Epochs"), tr("Rung"),   tr("Time (s)")};
  if (m_plan)
    for (const sweep::Target& t : m_plan->targets) headers << QString::fromStdString(t.path);
  m_table->setColumnCount(headers.size());
  m_table->setHorizontalHeaderLabels(headers);
  m_table->setRowCount(int(m_trials.size()));
  for (int r = 0; r < int(m_trials.size()); ++r) {
    const sweep::TrialRecord& t = m_trials[size_t(r)];
    m_table->setItem(r, kTrial, cell(QString::number(t.index), t.index));
    QTableWidgetItem* status = cell(QString::fromStdString(t.status));
    if (!t.error.empty()) status->setToolTip(QString::fromStdString(t.error));
    m_table->setItem(r, kStatus, status);
    m_table->setItem(r, kObjective,
                     t.hasObjective ? cell(QString::number(t.objective, 'f', 4), t.objective)
                                    : cell("-", -INFINITY));
    m_table->setItem(r, kEpochs, cell(QString::number(t.epochs), t.epochs));
    m_table->setItem(r, kRung, cell(t.rung < 0 ? "-" : QString::number(t.rung), t.rung));
    m_table->setItem(r, kTime, cell(QString::number(t.seconds, 'f', 1), t.seconds));
    for (size_t k = 0; k < t.values.size(); ++k)
      m_table->setItem(r, kParams + int(k), cell(QString::fromStdString(t.values[k]), t.at[k]));
  }
  m_table->setSortingEnabled(true);
  m_table->clearSelection();
  for (int r = 0; r < m_table->rowCount(); ++r)
    if (std::count(selected.begin(), selected.end(),
                   m_table->item(r, kTrial)->data(Qt::UserRole).toInt()))
      m_table->selectionModel()->select(m_table->model()->index(r, 0),
                                        QItemSelectionModel::Select | QItemSelectionModel::Rows);
}

double ExperimentsView::onAxis(const sweep::TrialRecord& t, int axis) const {
  const auto& params = m_plan->space.params();
  if (axis >= int(params.size())) {  // the objective, over the trials' range
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& u : m_trials)
      if (u.hasObjective) lo = std::min(lo, u.objective), hi = std::max(hi, u.objective);
    return hi > lo ? (t.objective - lo) / (hi - lo) : 0.5;
  }
  const sweep::Param& p = params[size_t(axis)];
  const double v = t.at[size_t(axis)];
  if (p.kind == sweep::Param::Kind::LogUniform)
    return (std::log(v) - std::log(p.lo)) / (std::log(p.hi) - std::log(p.lo));
  return p.hi > p.lo ? (v - p.lo) / (p.hi - p.lo) : 0.5;
}

void ExperimentsView::drawCoordinates() {
  m_coordinates->clearPlottables();
  if (!m_plan) return m_coordinates->replot();
  const int axes = int(m_plan->space.params().size()) + 1;
  QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
  for (int a = 0; a < axes; ++a)
    ticks->addTick(a, a + 1 < axes ? QString::fromStdString(m_plan->targets[size_t(a)].path)
                                   : QString::fromStdString(m_plan->objective.spec()));
  m_coordinates->xAxis->setTicker(ticks);
  m_coordinates->xAxis->setRange(-0.2, axes - 0.8);
  m_coordinates->yAxis->setRange(-0.05, 1.05);
  m_coordinates->yAxis->setLabel(tr("along each axis's range"));
  for (const sweep::TrialRecord& t : m_trials) {
    if (!t.hasObjective) continue;
    auto* line = new QCPCurve(m_coordinates->xAxis, m_coordinates->yAxis);
    line->setName(QString::number(t.index));
    for (int a = 0; a < axes; ++a) line->addData(a, a, onAxis(t, a));
    line->setPen(QPen(t.status == "done" ? QColor(31, 119, 180) : QColor(160, 160, 160)));
  }
  m_coordinates->replot();
}

void ExperimentsView::drawBest() {
  m_best->clearGraphs();
  if (!m_plan) return m_best->replot();
  QCPGraph* g = m_best->addGraph();
  double best = 0;
  int ended = 0;
  for (const sweep::TrialRecord& t : m_trials) {
    if (!t.hasObjective || !t.ended() || t.status == "failed") continue;
    const bool better = ended == 0 || (m_plan->maximize ? t.objective > best : t.objective < best);
    if (better) best = t.objective;
    g->addData(++ended, best);
  }
  g->setLineStyle(QCPGraph::lsStepLeft);
  m_best->rescaleAxes();
  m_best->replot();
}

void ExperimentsView::showImportance() {
  if (!m_plan) return m_importance->clear();
  std::vector<sweep::Observation> done;
  for (const sweep::TrialRecord& t : m_trials)
    if (t.hasObjective && t.status != "failed") done.push_back({t.at, t.objective});
  const std::vector<double> share = sweep::forestImportance(m_plan->space, done);
  QStringList parts;
  for (size_t k = 0; k < share.size(); ++k)
    parts << QString("%1 %2%")
                 .arg(QString::fromStdString(m_plan->targets[k].path))
                 .arg(share[k] * 100, 0, 'f', 0);
  m_importance->setText(done.size() < 4
                            ? tr("Importance: after 4 trials")
                            : tr("Importance (random forest): %1").arg(parts.join(", ")));
}

void ExperimentsView::brush(int axis, double lo, double hi) {
  if (!m_plan) return;
  // Held as 0 … 1 along the axis, like a drag on the plot.
  sweep::TrialRecord probe;
  probe.at.assign(m_plan->space.params().size(), 0);
  auto unit = [&](double v) {
    if (axis < int(probe.at.size())) probe.at[size_t(axis)] = v;
    probe.objective = v;
    return onAxis(probe, axis);
  };
  m_brushes[axis] = {unit(lo) - 1e-9, unit(hi) + 1e-9};
  applyFilters();
}

void ExperimentsView::clearBrushes() {
  m_brushes.clear();
  applyFilters();
}

void ExperimentsView::applyFilters() {
  const QString text = m_filter->text().trimmed();
  for (int r = 0; r < m_table->rowCount(); ++r) {
    const int index = m_table->item(r, kTrial)->data(Qt::UserRole).toInt();
    const sweep::TrialRecord* t = nullptr;
    for (const auto& u : m_trials)
      if (u.index == index) t = &u;
    bool show = t != nullptr;
    if (t && !text.isEmpty()) {
      show = false;
      for (int c = 0; c < m_table->columnCount() && !show; ++c)
        show =
            m_table->item(r, c) && m_table->item(r, c)->text().contains(text, Qt::CaseInsensitive);
    }
    for (auto it = m_brushes.begin(); t && show && it != m_brushes.end(); ++it) {
      if (it.key() >= int(m_plan->space.params().size()) && !t->hasObjective) show = false;
      const double u = show ? onAxis(*t, it.key()) : 0;
      show = show && u >= it.value().first && u <= it.value().second;
    }
    m_table->setRowHidden(r, !show);
  }
}

bool ExperimentsView::promote(int trial) {
  if (!m_plan) return false;
  // Copies: each edit below makes the view read the project and the sweep again.
  const sweep::SweepPlan plan = *m_plan;
  std::optional<sweep::TrialRecord> t;
  for (const auto& u : m_trials)
    if (u.index == trial) t = u;
  if (!t) return false;
  auto made = sweep::trialProject(m_doc->toProject(), plan, t->at);
  if (!made) return say(QString::fromStdString(made.error().message)), false;
  const QString text = tr("Promote trial %1").arg(trial);
  m_doc->undoStack()->beginMacro(text);
  m_doc->setSettings(made->train(), made->data(), text);
  for (const sweep::Target& target : plan.targets) {
    if (target.node.empty()) continue;
    const editor::NodeId id = m_doc->findNode(target.node);
    for (const proto::NodeDef& n : made->model().nodes())
      if (n.name() == target.node && id >= 0)
        m_doc->setAttr(id, target.attr, n.attrs().at(target.attr));
  }
  m_doc->undoStack()->endMacro();
  return true;
}

}  // namespace netloom::gui
