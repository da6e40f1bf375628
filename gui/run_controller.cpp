#include "gui/run_controller.h"

#include <QEventLoop>
#include <QFileInfo>
#include <QTimer>
#include <algorithm>

#include "editor/document.h"
#include "engine/data/dataset.h"
#include "engine/train/heads.h"
#include "gui/charts.h"
#include "gui/remote_target.h"

namespace netloom::gui {

namespace {
// The progress figures are updated once a frame.
constexpr int kPollMs = 16;
}  // namespace

RunController::RunController(editor::GraphDocument* doc, QObject* parent)
    : QObject(parent), m_doc(doc), m_charts(new TrainingCharts), m_history(new RunHistory(this)) {
  m_poll.setInterval(kPollMs);
  connect(&m_poll, &QTimer::timeout, this, &RunController::updateProgress);
  connect(&m_tail, &EventTail::frame, this, [this](const std::vector<EventTail::Batch>& batches) {
    for (const EventTail::Batch& b : batches)
      if (b.stream == m_stream && m_stream != 0) take(b.events, b.nextOffset);
  });
  connect(m_history, &RunHistory::checksChanged, this, [this] { updateOverlays(); });
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

std::unique_ptr<RemoteTarget> RunController::hostTarget(const remotepb::Host& host) const {
  std::unique_ptr<RemoteTarget> t = makeHostTarget(host);
  t->acceptHostKey = acceptHostKey;
  t->askPassphrase = askPassphrase;
  return t;
}

RemoteTarget* RunController::makeRemote(const remotepb::Host& host) {
  m_remote = hostTarget(host);
  connect(m_remote.get(), &RunTarget::ended, this, &RunController::onEnded);
  // A remote record is read as soon as it is mirrored, not at the reader's next look.
  connect(m_remote.get(), &RunTarget::progressed, &m_tail, &EventTail::wake);
  connect(m_remote.get(), &RunTarget::stateChanged, this, &RunController::reloadHistory);
  // News goes to the window's message line, once; uploads to the run's status and
  // its bar.
  connect(m_remote.get(), &RunTarget::notice, this, &RunController::message);
  connect(m_remote.get(), &RunTarget::transfer, this,
          [this](const QString& what, qint64 done, qint64 total) {
            m_progress.showTransfer(m_current ? m_current->name : QString(), what, done, total);
          });
  return m_remote.get();
}

RunTarget* RunController::localTarget() {
  if (m_child || m_ranks > 1 || m_current->project.train().distributed().ranks() > 1) {
    if (!m_childProcess) {
      m_childProcess = std::make_unique<ChildProcessTarget>();
      connect(m_childProcess.get(), &RunTarget::ended, this, &RunController::onEnded);
    }
    return m_childProcess.get();
  }
  if (!m_inProcess) {
    m_inProcess = std::make_unique<InProcessTarget>();
    connect(m_inProcess.get(), &RunTarget::ended, this, &RunController::onEnded);
  }
  return m_inProcess.get();
}

void RunController::begin(const QString& what) {
  m_warnings.clear();
  emit problemsChanged({});
  m_progress.busy(what);
  followCurrent();
  m_poll.start();
  reloadHistory();
}

Status RunController::deleteRemoteJob(const RunRecord& run) {
  auto job = remoteJobOf(run.dir);
  if (!job) return makeError("run " + run.name.toStdString() + " did not run on a host");
  if (m_current && m_current->dir == run.dir && running())
    return makeError("run " + run.name.toStdString() +
                     " is still running: stop or cancel it first");
  if (Status s = hostTarget(job->host())->deleteJob(*job); !s) return s;
  emit message(tr("Deleted job %1 on its host").arg(QString::fromStdString(job->id())));
  return {};
}

Status RunController::fetchRemoteCheckpoints() {
  if (!m_current || !remoteRun()) return makeError("no remote run is in progress");
  return m_remote->fetchCheckpoints(*m_current);
}

void RunController::cancel() {
  if (!running()) return;
  m_active->cancel();
  m_progress.say(tr("Run %1 cancelled").arg(m_current ? m_current->name : QString()));
}

void RunController::detach() {
  if (!remoteRun()) return;
  m_poll.stop();
  m_active->detach();
  m_active = nullptr;
  m_remote.reset();
  poll();  // what was mirrored before the follower let go
  stopFollowing();
  m_progress.hideBar();
}

bool RunController::reattach(const QString& runDir) {
  if (running()) return false;
  reloadHistory();
  std::optional<FollowableRun> found = followableRun(runs(), runDir);
  if (!found) return false;
  m_current = *found->run;
  RemoteTarget* t = makeRemote(found->job.host());
  if (Status s = t->attach(m_current->dir, found->job); !s) return false;
  m_active = t;
  m_charts->clear();
  m_charts->append(m_current->events);
  begin(tr("Run %1: reattached to job %2 %3")
            .arg(m_current->name, QString::fromStdString(found->job.id()), t->kind()));
  return true;
}

QString RunController::runsDir() const {
  return RunHistory::dirFor(m_doc->filePath());
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

Status RunController::readyToStart(bool resume) const {
  if (running()) return makeError("a run is in progress: stop it first");
  if (runsDir().isEmpty())
    return makeError("save the project first: its runs are kept beside it, in runs/<project>/");
  if (!m_doc->analysis().ok())
    return makeError("the graph has " + std::to_string(m_doc->analysis().problems.size()) +
                     " problem(s), listed under Problems; the run was not started");
  // A run on this computer needs its data here (a host may have its own copy).
  const QString projectDir = QFileInfo(m_doc->filePath()).absolutePath();
  if (!m_remoteHost && !resume)
    if (auto missing = dataProblems(m_doc->data(), projectDir.toStdString()); !missing.empty())
      return makeError(missing.front() + (missing.size() > 1 ? " (and more, under Problems)" : "") +
                       "; the run was not started");
  return {};
}

proto::Project RunController::projectToRun() {
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
  if (m_remoteHost && hostRanks() > 1)
    project.mutable_train()->mutable_distributed()->set_ranks(hostRanks());
  return project;
}

Status RunController::start(const RunRecord* resumeFrom) {
  if (Status s = readyToStart(resumeFrom != nullptr); !s) return s;
  RunRequest req;
  req.projectDir = QFileInfo(m_doc->filePath()).absolutePath();
  if (resumeFrom) {
    QString ckpt = latestCheckpoint(*resumeFrom);
    if (ckpt.isEmpty())
      return makeError("run " + resumeFrom->name.toStdString() + " has no checkpoint to resume");
    m_current = *resumeFrom;
    req.resume = ckpt;
  } else {
    auto run = createRun(runsDir(), projectToRun(), req.projectDir);
    if (!run) return run.error();
    m_current = std::move(*run);
  }
  req.runDir = m_current->dir;
  if (m_remoteHost && !resumeFrom) {
    RemoteTarget* remote = makeRemote(*m_remoteHost);
    if (hostRanks() > 1)
      remote->setRankHosts(m_rankHosts, m_ranksPerHost);
    else
      remote->setRankHosts({});
    m_active = remote;
  } else {
    m_active = localTarget();
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
    m_progress.say(tr("Run %1 runs %2, which offers no pause: Stop it (it keeps a "
                      "checkpoint), then Resume from Checkpoint")
                       .arg(m_current->name, m_active->kind()));
    return;
  }
  // Ranks wait for each other with a timeout: one held for long would fail the job.
  if (m_current->project.train().distributed().ranks() > 1) {
    m_progress.say(tr("Run %1 trains on several ranks and cannot pause: Stop it, then "
                      "Resume from Checkpoint")
                       .arg(m_current->name));
    return;
  }
  m_active->pause();
  // The figures stay as they were; nothing runs to change them.
  m_progress.say(tr("%1 — paused")
                     .arg(m_progress.text().isEmpty() ? tr("Run %1").arg(m_current->name)
                                                      : m_progress.text()));
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
  m_progress.say(tr("Run %1 stopping after this step…").arg(m_current->name));
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

void RunController::stopFollowing() {
  if (m_stream != 0) m_tail.unfollow(m_stream);
  m_stream = 0;
}

void RunController::followCurrent() {
  stopFollowing();
  m_stream = ++m_streams;
  m_tail.follow(m_stream, m_current->eventsPath(), m_current->offset);
}

void RunController::poll() {
  if (!m_current) return;
  if (m_stream != 0) {
    EventTail::Batch held = m_tail.drain(m_stream);
    if (!held.events.empty()) take(std::move(held.events), held.nextOffset);
  }
  updateProgress();
}

void RunController::take(std::vector<proto::TrainEvent> fresh, int64_t nextOffset) {
  if (!m_current || fresh.empty()) return;
  m_current->offset = nextOffset;
  m_charts->append(fresh);
  // Settings the engine accepted but questions (lr 0) stay in Problems for the run.
  bool warned = false;
  for (const proto::TrainEvent& e : fresh)
    if (e.has_log() && e.log().level() == proto::Log::WARNING) {
      m_warnings
          << tr("run %1: warning: %2").arg(m_current->name, QString::fromStdString(e.log().text()));
      warned = true;
    }
  const int count = int(fresh.size());
  m_current->events.insert(m_current->events.end(), std::make_move_iterator(fresh.begin()),
                           std::make_move_iterator(fresh.end()));
  if (warned) emit problemsChanged(m_warnings);
  emit eventsAppended(count);
}

void RunController::updateProgress() {
  // Paused, nothing moves: the figures stay as pause() left them.
  if (!running() || paused()) return;
  m_progress.showSteps(*m_current);
}

void RunController::onEnded(bool ok, const QString& why) {
  m_poll.stop();
  poll();           // everything the run wrote, at once
  stopFollowing();  // and no more looks at a stream that has ended
  m_progress.hideBar();
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
  m_progress.say(text);
  reloadHistory();
  emit message(text);
  emit runEnded(ok, text);
}

void RunController::reloadHistory() {
  RunHistory::Active active;
  if (running() && m_current) {
    const QString scheduled = m_active->schedulerState();
    active = {m_current->dir, paused()              ? tr("paused")
                              : scheduled.isEmpty() ? tr("running")
                                                    : scheduled};
  }
  const QString dir = runsDir();
  m_history->reload(dir, dir.isEmpty() ? std::string() : m_doc->toProject().name(), active);
  updateOverlays();
}

void RunController::switchProject() {
  // A local run belongs to the project it started from: the window stops it first.
  if (running() && !remoteRun()) return;
  detach();
  m_poll.stop();
  m_active = nullptr;
  stopFollowing();
  m_current.reset();
  m_warnings.clear();
  emit problemsChanged({});
  m_progress.hideBar();
  m_history->clear();  // no check mark of the old project's runs carries over
  m_charts->clear();
  reloadHistory();
  if (runs().empty()) {
    m_progress.clear();
    return;
  }
  const RunRecord& latest = runs().back();
  m_charts->append(latest.events);
  m_progress.say(tr("Last run %1: %2").arg(latest.label(), latest.stateText()));
}

void RunController::updateOverlays() {
  auto runs = m_history->overlays(m_current ? m_current->dir : QString());
  runs.insert(runs.end(), m_extraOverlays.begin(), m_extraOverlays.end());
  m_charts->setOverlays(runs);
}

void RunController::setExtraOverlays(std::vector<TrainingCharts::Overlay> runs) {
  m_extraOverlays = std::move(runs);
  updateOverlays();
}

}  // namespace netloom::gui
