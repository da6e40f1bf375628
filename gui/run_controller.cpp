#include "gui/run_controller.h"

#include <google/protobuf/text_format.h>
#include <signal.h>

#include <QCoreApplication>
#include <QEventLoop>
#include <QFileInfo>
#include <QLabel>
#include <QProgressBar>
#include <QTimer>
#include <algorithm>
#include <map>
#include <set>

#include "editor/document.h"
#include "editor/panels.h"
#include "engine/data/dataset.h"
#include "engine/train/heads.h"
#include "engine/util/memory_budget.h"
#include "gui/charts.h"
#include "gui/remote_target.h"
#include "remote/hosts.h"
#include "remote/jobs.h"

namespace netloom::gui {

namespace {

constexpr int kPollMs = 100;

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

void flatten(const Message& m, const std::string& prefix, std::map<std::string, std::string>& out) {
  const auto* refl = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    std::string key = prefix + f->name();
    int n = f->is_repeated() ? refl->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      std::string k = f->is_repeated() ? key + "[" + std::to_string(i) + "]" : key;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        flatten(f->is_repeated() ? refl->GetRepeatedMessage(m, f, i) : refl->GetMessage(m, f),
                k + ".", out);
      } else {
        std::string v;
        google::protobuf::TextFormat::PrintFieldValueToString(m, f, f->is_repeated() ? i : -1, &v);
        out[k] = v;
      }
    }
  }
}

std::map<std::string, std::string> settingsOf(const proto::Project& p) {
  std::map<std::string, std::string> out;
  flatten(p.train(), "train.", out);
  flatten(p.data(), "data.", out);
  for (const proto::NodeDef& n : p.model().nodes()) {
    std::string k = "model." + n.name();
    out[k + ".op"] = n.op();
    std::string ins;
    for (const std::string& in : n.inputs()) ins += (ins.empty() ? "" : ", ") + in;
    if (!ins.empty()) out[k + ".inputs"] = ins;
    for (const auto& [key, v] : n.attrs()) out[k + "." + key] = attrText(v);
  }
  return out;
}

// How a run ended, as the comparison's first rows.
void resultsOf(const RunRecord& r, std::map<std::string, std::string>& out) {
  auto num = [](double v) { return QString::number(v, 'g', 5).toStdString(); };
  out["result.state"] = r.stateText().section(',', 0, 0).section(':', 0, 0).toStdString();
  out["result.steps"] = std::to_string(r.steps());
  if (const proto::Finished* f = r.finished()) {
    out["result.train_loss"] = num(f->train_loss());
    if (f->test_accuracy() >= 0) out["result.test_accuracy"] = num(f->test_accuracy());
    if (f->test_loss() > 0) out["result.test_loss"] = num(f->test_loss());
  }
}

}  // namespace

std::string attrText(const proto::AttrValue& v) {
  auto list = [](const auto& values) {
    std::string s = "[";
    for (int i = 0; i < values.size(); ++i)
      s += (i ? ", " : "") + QString::number(double(values[i]), 'g', 8).toStdString();
    return s + "]";
  };
  switch (v.value_case()) {
    case proto::AttrValue::kI: return std::to_string(v.i());
    case proto::AttrValue::kF: return QString::number(v.f(), 'g', 8).toStdString();
    case proto::AttrValue::kS: return v.s();
    case proto::AttrValue::kB: return v.b() ? "true" : "false";
    case proto::AttrValue::kInts: return list(v.ints().values());
    case proto::AttrValue::kFloats: return list(v.floats().values());
    case proto::AttrValue::VALUE_NOT_SET: break;
  }
  return {};
}

namespace {}  // namespace

QString settingLabel(const std::string& key) {
  static const std::map<std::string, const char*> results = {
      {"result.state", QT_TR_NOOP("How it ended")},
      {"result.steps", QT_TR_NOOP("Steps")},
      {"result.train_loss", QT_TR_NOOP("Training loss")},
      {"result.test_loss", QT_TR_NOOP("Test loss")},
      {"result.test_accuracy", QT_TR_NOOP("Test accuracy")}};
  if (auto it = results.find(key); it != results.end()) return RunController::tr(it->second);
  QString text = QString::fromStdString(key);
  for (auto [from, to] :
       {std::pair{"train.", "Training."}, {"data.", "Data."}, {"model.", "Model."}})
    if (text.startsWith(from)) text = to + text.mid(QString(from).size());
  return text.replace('.', " › ").replace('_', ' ');
}

SettingsDiff compareSettings(const std::vector<const RunRecord*>& runs) {
  std::vector<std::map<std::string, std::string>> all;
  std::set<std::string> keys;
  for (const RunRecord* r : runs) {
    all.push_back(settingsOf(r->project));
    for (const auto& [k, v] : all.back()) keys.insert(k);
  }
  SettingsDiff d;
  // How each run ended first, whether or not they differ, as HParams shows metrics.
  std::vector<std::map<std::string, std::string>> results(runs.size());
  std::set<std::string> resultKeys;
  for (size_t i = 0; i < runs.size(); ++i) {
    resultsOf(*runs[i], results[i]);
    for (const auto& [k, v] : results[i]) resultKeys.insert(k);
  }
  for (const char* k : {"result.state", "result.steps", "result.train_loss", "result.test_loss",
                        "result.test_accuracy"}) {
    if (!resultKeys.count(k)) continue;
    d.results.push_back(k);
    std::vector<std::string> row;
    for (const auto& r : results) row.push_back(r.count(k) ? r.at(k) : std::string());
    d.resultValues.push_back(std::move(row));
  }
  for (const std::string& k : keys) {
    std::vector<std::string> row;
    for (const auto& s : all) {
      auto it = s.find(k);
      row.push_back(it == s.end() ? std::string() : it->second);
    }
    if (std::adjacent_find(row.begin(), row.end(), std::not_equal_to<>()) == row.end()) continue;
    d.keys.push_back(k);
    d.values.push_back(std::move(row));
  }
  return d;
}

RunController::RunController(editor::GraphDocument* doc, QObject* parent)
    : QObject(parent),
      m_doc(doc),
      m_charts(new TrainingCharts),
      m_history(new QListWidget),
      m_progress(new QProgressBar),
      m_status(new QLabel) {
  m_progress->setMaximumWidth(220);
  m_progress->setTextVisible(true);
  m_progress->hide();
  m_poll.setInterval(kPollMs);
  connect(&m_poll, &QTimer::timeout, this, &RunController::poll);
  connect(m_history, &QListWidget::itemChanged, this, [this] { updateOverlays(); });
}

// The widgets belong to whoever shows them (the window's docks).
RunController::~RunController() {
  if (remoteRun())
    detach();
  else
    stopAndWait(30000);
}

bool RunController::remoteRun() const {
  return m_active && m_active->canDetach() && m_active->running();
}

RemoteTarget* RunController::makeRemote(const remotepb::Host& host) {
  m_remote = makeHostTarget(host);
  m_remote->acceptHostKey = acceptHostKey;
  m_remote->askPassphrase = askPassphrase;
  connect(m_remote.get(), &RunTarget::ended, this, &RunController::onEnded);
  // A remote record is shown as soon as it is mirrored, not at the next tick;
  // bursts coalesce into one poll.
  connect(m_remote.get(), &RunTarget::progressed, this, [this] {
    if (m_pollQueued) return;
    m_pollQueued = true;
    QMetaObject::invokeMethod(
        this,
        [this] {
          m_pollQueued = false;
          poll();
        },
        Qt::QueuedConnection);
  });
  connect(m_remote.get(), &RunTarget::stateChanged, this, &RunController::reloadHistory);
  // News goes to the window's message line, once; uploads to the run's status and
  // its bar.
  connect(m_remote.get(), &RunTarget::notice, this, &RunController::message);
  connect(m_remote.get(), &RunTarget::transfer, this, &RunController::showTransfer);
  return m_remote.get();
}

void RunController::showTransfer(const QString& what, qint64 done, qint64 total) {
  m_status->setText(tr("Run %1: uploading %2: %3 of %4")
                        .arg(m_current ? m_current->name : QString(), what,
                             editor::humanBytes(double(done)), editor::humanBytes(double(total))));
  // In thousandths, so files past 2 GiB fit the bar's int.
  m_progress->setFormat(tr("uploading %p%"));
  m_progress->setRange(0, 1000);
  m_progress->setValue(total > 0 ? int(done * 1000 / total) : 1000);
  if (done >= total) m_progress->setRange(0, 0);  // sent: busy until the run's first step
}

void RunController::begin(const QString& what) {
  m_warnings.clear();
  emit problemsChanged({});
  m_progress->setRange(0, 0);
  m_progress->show();
  m_status->setText(what);
  m_poll.start();
  reloadHistory();
}

Status RunController::deleteRemoteJob(const RunRecord& run) {
  auto job = remoteJobOf(run.dir);
  if (!job) return makeError("run " + run.name.toStdString() + " did not run on a host");
  if (m_current && m_current->dir == run.dir && running())
    return makeError("run " + run.name.toStdString() +
                     " is still running: stop or cancel it first");
  auto session = openSession(job->host());
  if (!session) return session.error();
  if (Status s = remote::deleteJob(**session, *job); !s) return s;
  emit message(tr("Deleted job %1 on its host").arg(QString::fromStdString(job->id())));
  return {};
}

Result<std::unique_ptr<remote::SshSession>> RunController::openSession(const remotepb::Host& host) {
  return remote::openSession(
      remote::hostSpec(host), acceptHostKey, [this](const std::string& keyFile) {
        return askPassphrase ? askPassphrase(QString::fromStdString(keyFile)).toStdString()
                             : std::string();
      });
}

Status RunController::fetchRemoteCheckpoints() {
  if (!m_current || !remoteRun()) return makeError("no remote run is in progress");
  auto job = remoteJobOf(m_current->dir);
  if (!job) return makeError("run " + m_current->name.toStdString() + " has no job record");
  auto session = openSession(job->host());
  if (!session) return session.error();
  return remote::fetchJob(**session, *job, m_current->dir.toStdString(), true);
}

void RunController::cancel() {
  if (!running()) return;
  m_active->cancel();
  m_status->setText(tr("Run %1 cancelled").arg(m_current ? m_current->name : QString()));
}

void RunController::detach() {
  if (!remoteRun()) return;
  m_poll.stop();
  m_active->detach();
  m_active = nullptr;
  m_remote.reset();
  m_progress->hide();
}

bool RunController::reattach(const QString& runDir) {
  if (running()) return false;
  reloadHistory();
  for (auto it = m_runs.rbegin(); it != m_runs.rend(); ++it) {
    if (it->state() != RunRecord::State::Running || (!runDir.isEmpty() && it->dir != runDir))
      continue;
    auto job = remoteJobOf(it->dir);
    if (!job) continue;
    m_current = *it;
    RemoteTarget* t = makeRemote(job->host());
    if (Status s = t->attach(m_current->dir, *job); !s) return false;
    m_active = t;
    m_charts->clear();
    m_charts->append(m_current->events);
    begin(tr("Run %1: reattached to job %2 %3")
              .arg(m_current->name, QString::fromStdString(job->id()), t->kind()));
    return true;
  }
  return false;
}

QString RunController::runsDir() const {
  if (m_doc->filePath().isEmpty()) return {};
  // Each project's own: two projects in one folder never see each other's runs.
  const QFileInfo file(m_doc->filePath());
  return file.absolutePath() + "/runs/" + file.completeBaseName();
}

RunTarget* RunController::target() const {
  return m_active;
}

bool RunController::running() const {
  return m_active && m_active->running();
}

bool RunController::paused() const {
  return m_active && m_active->paused();
}

Status RunController::start(const RunRecord* resumeFrom) {
  if (running()) return makeError("a run is in progress: stop it first");
  if (runsDir().isEmpty())
    return makeError("save the project first: its runs are kept beside it, in runs/<project>/");
  if (!m_doc->analysis().ok()) {
    QStringList problems;
    for (const ModelProblem& p : m_doc->analysis().problems)
      problems << QString::fromStdString(p.message);
    return makeError("the graph has " + std::to_string(problems.size()) +
                     " problem(s), listed under Problems; the run was not started");
  }
  QString projectDir = QFileInfo(m_doc->filePath()).absolutePath();
  // A run on this computer needs its data here (a host may have its own copy).
  if (!m_remoteHost && !resumeFrom)
    if (auto missing = dataProblems(m_doc->data(), projectDir.toStdString()); !missing.empty())
      return makeError(missing.front() + (missing.size() > 1 ? " (and more, under Problems)" : "") +
                       "; the run was not started");
  RunRequest req;
  req.projectDir = projectDir;
  if (resumeFrom) {
    QString ckpt = latestCheckpoint(*resumeFrom);
    if (ckpt.isEmpty())
      return makeError("run " + resumeFrom->name.toStdString() + " has no checkpoint to resume");
    m_current = *resumeFrom;
    req.resume = ckpt;
  } else {
    // A run names what it minimises: the model's only loss node, where the project
    // leaves train.loss unset, is written there (an undoable edit the form shows).
    if (m_doc->train().loss().empty())
      if (auto loss = lossNode(m_doc->toProject())) {
        proto::TrainDef train = m_doc->train();
        train.set_loss(*loss);
        m_doc->setSettings(train, m_doc->data(), tr("Set the loss node"));
      }
    proto::Project project = m_doc->toProject();
    if (!m_device.empty()) project.mutable_train()->set_device(m_device);
    if (m_ranks > 1) {
      project.mutable_train()->mutable_distributed()->set_ranks(m_ranks);
      project.mutable_train()->mutable_distributed()->set_threads(m_threadRanks);
    }
    if (m_remoteHost && m_rankHosts.size() > 1)
      project.mutable_train()->mutable_distributed()->set_ranks(int(m_rankHosts.size()));
    auto run = createRun(runsDir(), project, projectDir);
    if (!run) return run.error();
    m_current = std::move(*run);
  }
  req.runDir = m_current->dir;
  if (m_remoteHost && !resumeFrom) {
    RemoteTarget* remote = makeRemote(*m_remoteHost);
    remote->setRankHosts(m_rankHosts.size() > 1 ? m_rankHosts : std::vector<remotepb::Host>{});
    m_active = remote;
  } else if (m_child || m_ranks > 1 || m_current->project.train().distributed().ranks() > 1) {
    if (!m_childProcess) {
      m_childProcess = std::make_unique<ChildProcessTarget>();
      connect(m_childProcess.get(), &RunTarget::ended, this, &RunController::onEnded);
    }
    m_active = m_childProcess.get();
  } else {
    if (!m_inProcess) {
      m_inProcess = std::make_unique<InProcessTarget>();
      connect(m_inProcess.get(), &RunTarget::ended, this, &RunController::onEnded);
    }
    m_active = m_inProcess.get();
  }
  m_charts->clear();
  if (resumeFrom) m_charts->append(m_current->events);
  if (Status s = m_active->start(req); !s) return s;
  begin(tr("Run %1 starting (%2)…").arg(m_current->name, m_active->kind()));
  return {};
}

void RunController::pause() {
  if (!running()) return;
  if (!m_active->canPause()) {
    m_status->setText(tr("Run %1 runs %2, which offers no pause: Stop it (it keeps a "
                         "checkpoint), then Resume from Checkpoint")
                          .arg(m_current->name, m_active->kind()));
    return;
  }
  // Ranks wait for each other with a timeout: one held for long would fail the job.
  if (m_current->project.train().distributed().ranks() > 1) {
    m_status->setText(tr("Run %1 trains on several ranks and cannot pause: Stop it, then "
                         "Resume from Checkpoint")
                          .arg(m_current->name));
    return;
  }
  m_active->pause();
  // The figures stay as they were; nothing runs to change them.
  m_status->setText(
      tr("%1 — paused")
          .arg(m_status->text().isEmpty() ? tr("Run %1").arg(m_current->name) : m_status->text()));
  reloadHistory();
}

void RunController::resume() {
  if (!running()) return;
  m_active->resume();
  reloadHistory();
}

void RunController::stop() {
  if (!running()) return;
  m_active->stop();
  m_status->setText(tr("Run %1 stopping after this step…").arg(m_current->name));
}

bool RunController::stopAndWait(int ms) {
  if (!running()) return true;
  stop();
  // The target says when it has ended (runEnded, after it let go of its thread or
  // process); the timer only bounds the wait.
  QEventLoop loop;
  connect(this, &RunController::runEnded, &loop, &QEventLoop::quit);
  QTimer::singleShot(ms, &loop, &QEventLoop::quit);
  if (running()) loop.exec();
  return !running();
}

void RunController::poll() {
  if (!m_current) return;
  size_t before = m_current->events.size();
  if (m_current->poll()) {
    std::vector<proto::TrainEvent> fresh(m_current->events.begin() + long(before),
                                         m_current->events.end());
    m_charts->append(fresh);
    // Settings the engine accepted but questions (lr 0) stay in Problems for the run.
    bool warned = false;
    for (const proto::TrainEvent& e : fresh)
      if (e.has_log() && e.log().level() == proto::Log::WARNING) {
        m_warnings << tr("run %1: warning: %2")
                          .arg(m_current->name, QString::fromStdString(e.log().text()));
        warned = true;
      }
    if (warned) emit problemsChanged(m_warnings);
    emit eventsAppended(int(fresh.size()));
  }
  updateProgress();
}

void RunController::updateProgress() {
  const proto::RunStarted* rs = m_current->started();
  const proto::Step* last = nullptr;
  for (auto it = m_current->events.rbegin(); it != m_current->events.rend() && !last; ++it)
    if (it->has_step()) last = &it->step();
  if (!rs || !last || !running()) return;
  // Paused, nothing moves: the figures stay as pause() left them.
  if (paused()) return;
  int64_t total = std::max<int64_t>(1, rs->total_steps());
  m_progress->setRange(0, int(std::min<int64_t>(total, INT32_MAX)));
  m_progress->setValue(int(std::min<int64_t>(last->step(), total)));
  m_progress->setFormat(
      tr("epoch %1 · step %2/%3").arg(last->epoch()).arg(last->step()).arg(total));
  // The pace of the last steps, in the run's own clock: smoothed, and the same
  // after a reattach as before it.
  const RunRecord::Pace pace = m_current->pace();
  int64_t eta =
      pace.stepsPerSec > 0 ? int64_t(double(total - last->step()) / pace.stepsPerSec) : -1;
  QString etaText =
      eta < 0 ? QString("…") : QString("%1:%2").arg(eta / 60).arg(eta % 60, 2, 10, QChar('0'));
  // Memory in use on the run's device, as its last report said.
  QString memory;
  for (auto it = m_current->events.rbegin(); it != m_current->events.rend(); ++it)
    if (it->has_step() && it->step().device_memory_used() > 0) {
      memory = tr(" · %1 memory %2 of %3")
                   .arg(QString::fromStdString(rs->device()),
                        QString::fromStdString(formatBytes(it->step().device_memory_used())),
                        QString::fromStdString(formatBytes(rs->device_memory_total())));
      break;
    }
  m_status->setText(tr("%1 · %2 samples/s · ETA %3%4")
                        .arg(m_current->name)
                        .arg(pace.samplesPerSec, 0, 'f', 0)
                        .arg(etaText, memory));
}

void RunController::onEnded(bool ok, const QString& why) {
  m_poll.stop();
  poll();
  m_progress->hide();
  QString text;
  if (const proto::Failed* f = m_current ? m_current->failed() : nullptr) {
    text = tr("Run %1 failed: %2").arg(m_current->name, QString::fromStdString(f->message()));
    emit problemsChanged(
        m_warnings +
        QStringList{tr("run %1: %2").arg(m_current->name, QString::fromStdString(f->message()))});
    ok = false;
  } else if (!ok) {
    text = tr("Run %1 failed: %2").arg(m_current ? m_current->name : QString(), why);
    emit problemsChanged(m_warnings + QStringList{text});
  } else {
    text = m_current ? tr("Run %1 %2").arg(m_current->name, m_current->stateText())
                     : tr("The run ended");
  }
  m_status->setText(text);
  reloadHistory();
  emit message(text);
  emit runEnded(ok, text);
}

void RunController::reloadHistory() {
  m_runs = runsDir().isEmpty() ? std::vector<RunRecord>{} : listRuns(runsDir());
  if (!runsDir().isEmpty()) {
    // Runs from before each project had a folder of its own, directly in runs/:
    // those whose frozen project has this one's name.
    const std::string name = m_doc->toProject().name();
    for (RunRecord& r : listRuns(QFileInfo(runsDir()).path()))
      if (r.project.name() == name) m_runs.push_back(std::move(r));
    std::stable_sort(m_runs.begin(), m_runs.end(),
                     [](const RunRecord& a, const RunRecord& b) { return a.name < b.name; });
  }
  QSignalBlocker block(m_history);
  std::set<QString> checked;
  for (int i = 0; i < m_history->count(); ++i)
    if (m_history->item(i)->checkState() == Qt::Checked)
      checked.insert(m_history->item(i)->data(Qt::UserRole).toString());
  const QString selected = m_history->currentItem()
                               ? m_history->currentItem()->data(Qt::UserRole).toString()
                               : QString();
  m_history->clear();
  for (const RunRecord& r : m_runs) {
    bool active = running() && m_current && m_current->dir == r.dir;
    QString scheduled = active ? m_active->schedulerState() : QString();
    QString state = active ? (paused()              ? tr("paused")
                              : scheduled.isEmpty() ? tr("running")
                                                    : scheduled)
                           : r.stateText() + tr(" · %n step(s)", "", int(r.steps()));
    if (auto job = remoteJobOf(r.dir))
      state += tr(" · on %1 (job %2)")
                   .arg(QString::fromStdString(job->host().name().empty() ? job->host().address()
                                                                          : job->host().name()),
                        QString::fromStdString(job->id()));
    QString tags;
    for (const QString& t : r.tags) tags += " #" + t;
    auto* it = new QListWidgetItem(r.label() + tags + " — " + state, m_history);
    it->setData(Qt::UserRole, r.dir);
    it->setFlags(it->flags() | Qt::ItemIsUserCheckable);
    it->setCheckState(checked.count(r.dir) ? Qt::Checked : Qt::Unchecked);
    it->setToolTip(r.note.isEmpty() ? r.dir : r.dir + "\n\n" + r.note);
    // The run's colour on every chart, as a mark in the list.
    if (!active) it->setForeground(TrainingCharts::runColor(r.name));
    if (r.dir == selected) m_history->setCurrentItem(it);
  }
  updateOverlays();
}

void RunController::switchProject() {
  // A local run belongs to the project it started from: the window stops it first.
  if (running() && !remoteRun()) return;
  detach();
  m_poll.stop();
  m_active = nullptr;
  m_current.reset();
  m_warnings.clear();
  emit problemsChanged({});
  m_progress->hide();
  m_history->clear();  // no check mark of the old project's runs carries over
  m_charts->clear();
  reloadHistory();
  if (m_runs.empty()) {
    m_status->clear();
    return;
  }
  const RunRecord& latest = m_runs.back();
  m_charts->append(latest.events);
  m_status->setText(tr("Last run %1: %2").arg(latest.label(), latest.stateText()));
}

std::vector<const RunRecord*> RunController::checkedRuns() const {
  std::vector<const RunRecord*> out;
  for (int i = 0; i < m_history->count(); ++i) {
    if (m_history->item(i)->checkState() != Qt::Checked) continue;
    QString dir = m_history->item(i)->data(Qt::UserRole).toString();
    for (const RunRecord& r : m_runs)
      if (r.dir == dir) out.push_back(&r);
  }
  return out;
}

void RunController::updateOverlays() {
  std::vector<TrainingCharts::Overlay> overlays;
  for (const RunRecord* r : checkedRuns())
    if (!m_current || r->dir != m_current->dir)
      overlays.push_back({r->label(), r->events, TrainingCharts::runColor(r->name)});
  m_charts->setOverlays(overlays);
}

}  // namespace netloom::gui
