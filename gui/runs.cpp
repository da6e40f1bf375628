#include "gui/runs.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <algorithm>
#include <csignal>

#include "engine/io/event_stream.h"
#include "engine/io/output_file.h"
#include "engine/io/project_file.h"
#include "engine/train/trainer.h"

namespace netloom::gui {

namespace {

constexpr int kTrainingNice = 10;

std::string absoluteFrom(const QString& base, const std::string& path) {
  if (path.empty()) return path;
  QString p = QString::fromStdString(path);
  return QFileInfo(p).isAbsolute() ? path : QDir(base).absoluteFilePath(p).toStdString();
}

}  // namespace

proto::Project frozen(proto::Project p, const QString& projectDir) {
  proto::DataDef* d = p.mutable_data();
  if (d->has_idx()) {
    proto::IdxSource* s = d->mutable_idx();
    s->set_train_images(absoluteFrom(projectDir, s->train_images()));
    s->set_train_labels(absoluteFrom(projectDir, s->train_labels()));
    s->set_test_images(absoluteFrom(projectDir, s->test_images()));
    s->set_test_labels(absoluteFrom(projectDir, s->test_labels()));
  }
  if (d->has_csv()) {
    proto::CsvSource* s = d->mutable_csv();
    s->set_train_path(absoluteFrom(projectDir, s->train_path()));
    s->set_test_path(absoluteFrom(projectDir, s->test_path()));
  }
  return p;
}

void recordFailure(const QString& eventsPath, const QString& why) {
  auto r = readEvents(eventsPath.toStdString());
  if (r && !r->events.empty() && (r->events.back().has_failed() || r->events.back().has_finished()))
    return;
  EventWriter w;
  if (!w.open(eventsPath.toStdString(), true)) return;
  proto::TrainEvent e;
  e.set_time(double(QDateTime::currentMSecsSinceEpoch()) / 1000.0);
  e.mutable_failed()->set_message(why.toStdString());
  int64_t steps = 0;
  if (r)
    for (const auto& ev : r->events)
      if (ev.has_step()) steps = std::max<int64_t>(steps, ev.step().step());
  e.mutable_failed()->set_step(steps);
  (void)w.write(e);
}

// RunRecord ------------------------------------------------------------------------

RunRecord::State RunRecord::state() const {
  if (const proto::Finished* f = finished()) return f->stopped() ? State::Stopped : State::Finished;
  if (failed()) return State::Failed;
  return State::Running;
}

QString RunRecord::stateText() const {
  const proto::Finished* f = finished();
  // As `netloom-job list --host` says it of a remote run.
  if (f && f->stopped()) return QObject::tr("stopped at step %1").arg(f->steps());
  if (f)
    return f->test_accuracy() >= 0
               ? QObject::tr("finished, test accuracy %1").arg(f->test_accuracy(), 0, 'f', 4)
               : QObject::tr("finished, loss %1").arg(f->train_loss(), 0, 'g', 4);
  if (const proto::Failed* f = failed())
    return QObject::tr("failed: %1").arg(QString::fromStdString(f->message()));
  return QObject::tr("no end recorded (running, or interrupted)");
}

const proto::RunStarted* RunRecord::started() const {
  for (const auto& e : events)
    if (e.has_run_started()) return &e.run_started();
  return nullptr;
}

const proto::Finished* RunRecord::finished() const {
  return !events.empty() && events.back().has_finished() ? &events.back().finished() : nullptr;
}

const proto::Failed* RunRecord::failed() const {
  return !events.empty() && events.back().has_failed() ? &events.back().failed() : nullptr;
}

RunRecord::Pace RunRecord::pace(int window) const {
  std::vector<const proto::Step*> last;
  for (auto it = events.rbegin(); it != events.rend() && int(last.size()) < window; ++it) {
    if (it->has_run_started()) break;  // a resumed run's earlier part ran at another pace
    if (it->has_step()) last.push_back(&it->step());
  }
  Pace p;
  if (last.empty()) return p;
  std::vector<double> rates;
  for (const proto::Step* s : last) rates.push_back(s->samples_per_sec());
  std::nth_element(rates.begin(), rates.begin() + long(rates.size() / 2), rates.end());
  p.samplesPerSec = rates[rates.size() / 2];
  const proto::Step *newest = last.front(), *oldest = last.back();
  const double seconds = newest->seconds() - oldest->seconds();
  if (newest->step() > oldest->step() && seconds > 0)
    p.stepsPerSec = double(newest->step() - oldest->step()) / seconds;
  return p;
}

int64_t RunRecord::steps() const {
  int64_t n = 0;
  for (const auto& e : events) n += e.has_step();
  return n;
}

bool RunRecord::poll() {
  if (!QFileInfo::exists(eventsPath())) return false;
  auto r = readEvents(eventsPath().toStdString(), offset);
  if (!r || r->events.empty()) return false;
  offset = r->nextOffset;
  for (auto& e : r->events) events.push_back(std::move(e));
  return true;
}

Result<RunRecord> createRun(const QString& runsDir, const proto::Project& project,
                            const QString& projectDir) {
  QString stamp = QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss");
  QDir root(runsDir);
  if (!root.mkpath("."))
    return makeError(runsDir.toStdString() + ": cannot create the runs folder");
  QString name = stamp;
  for (int i = 2; root.exists(name); ++i) name = stamp + "-" + QString::number(i);
  if (!root.mkdir(name))
    return makeError(root.filePath(name).toStdString() + ": cannot create the run folder");
  RunRecord r;
  r.dir = root.absoluteFilePath(name);
  r.name = name;
  r.project = frozen(project, projectDir);
  if (Status s = saveProject((r.dir + "/project.nlproj").toStdString(), r.project); !s)
    return s.error();
  return r;
}

std::vector<RunRecord> listRuns(const QString& runsDir) {
  std::vector<RunRecord> runs;
  QDir root(runsDir);
  for (const QString& name : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
    RunRecord r;
    r.dir = root.absoluteFilePath(name);
    r.name = name;
    auto p = loadProject((r.dir + "/project.nlproj").toStdString());
    if (!p) continue;  // not a run folder
    r.project = *p;
    QFile meta(r.dir + "/meta.json");
    if (meta.open(QIODevice::ReadOnly)) {
      const QJsonObject o = QJsonDocument::fromJson(meta.readAll()).object();
      r.title = o["title"].toString();
      for (const QJsonValue& t : o["tags"].toArray()) r.tags << t.toString();
      r.note = o["note"].toString();
    }
    r.poll();
    runs.push_back(std::move(r));
  }
  return runs;
}

Status saveRunMeta(const RunRecord& run) {
  QJsonObject o;
  if (!run.title.isEmpty()) o["title"] = run.title;
  if (!run.tags.isEmpty()) o["tags"] = QJsonArray::fromStringList(run.tags);
  if (!run.note.isEmpty()) o["note"] = run.note;
  return writeFileAtomic((run.dir + "/meta.json").toStdString(),
                         QJsonDocument(o).toJson().toStdString());
}

Status deleteRunFolder(const RunRecord& run) {
  // Only a run folder: one holding its frozen project.
  if (run.dir.isEmpty() || !QFileInfo::exists(run.dir + "/project.nlproj"))
    return makeError(run.dir.toStdString() + " is not a run folder; nothing was removed");
  if (!QDir(run.dir).removeRecursively())
    return makeError(run.dir.toStdString() + ": could not be removed entirely");
  return {};
}

QString latestCheckpoint(const RunRecord& run) {
  QDir d(run.checkpointsDir());
  QStringList steps = d.entryList({"step-*"}, QDir::Dirs, QDir::Name);
  steps.erase(std::remove_if(steps.begin(), steps.end(),
                             [](const QString& s) { return s.contains(".tmp"); }),
              steps.end());
  return steps.isEmpty() ? QString() : d.absoluteFilePath(steps.last());
}

// InProcessTarget ------------------------------------------------------------------

InProcessTarget::InProcessTarget(QObject* parent) : RunTarget(parent) {}

InProcessTarget::~InProcessTarget() {
  if (m_thread) {
    stop();
    m_thread->wait();
    delete m_thread;
  }
}

Status InProcessTarget::start(const RunRequest& r) {
  if (m_thread) return makeError("a run is in progress");
  auto project = loadProject((r.runDir + "/project.nlproj").toStdString());
  if (!project) return project.error();
  TrainOptions o;
  o.projectDir = r.projectDir.toStdString();
  o.checkpointDir = (r.runDir + "/checkpoints").toStdString();
  o.saveWeights = (r.runDir + "/weights.safetensors").toStdString();
  o.resume = r.resume.toStdString();
  o.maxSteps = r.maxSteps;
  o.threads = r.threads;
  o.stop = &m_stop;
  o.reportNorms = true;
  m_stop = false;
  m_paused = false;
  std::string events = (r.runDir + "/events.pb").toStdString();
  m_thread = QThread::create([this, o, events, p = *project] {
    // The training threads (this one and the kernels' pool it starts) yield to the
    // GUI thread: they get the cores the window does not need, and the window's
    // event loop stays prompt while every core trains.
    setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), kTrainingNice);
    EventWriter writer;
    Status opened = writer.open(events, true);
    auto sink = [&](const proto::TrainEvent& e) {
      if (opened) (void)writer.write(e);
      // Paused: the training thread waits here, between two steps.
      std::unique_lock<std::mutex> lock(m_mutex);
      if (m_paused && !m_stop.load())
        QMetaObject::invokeMethod(this, &InProcessTarget::parked, Qt::QueuedConnection);
      m_wake.wait(lock, [this] { return !m_paused || m_stop.load(); });
    };
    auto result = runTraining(p, o, sink);
    writer.close();
    bool ok = result.ok();
    QString message = ok ? QString() : QString::fromStdString(result.error().message);
    QMetaObject::invokeMethod(
        this,
        [this, ok, message] {
          m_thread->wait();
          m_thread->deleteLater();
          m_thread = nullptr;
          m_paused = false;
          emit ended(ok, message);
        },
        Qt::QueuedConnection);
  });
  m_thread->start();
  return {};
}

void InProcessTarget::pause() {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_thread) m_paused = true;
}

void InProcessTarget::resume() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_paused = false;
  }
  m_wake.notify_all();
}

void InProcessTarget::stop() {
  m_stop = true;
  resume();
}

// ChildProcessTarget ---------------------------------------------------------------

ChildProcessTarget::ChildProcessTarget(QObject* parent) : RunTarget(parent) {}

ChildProcessTarget::~ChildProcessTarget() {
  if (m_process) {
    m_process->disconnect(this);
    stop();
    if (!m_process->waitForFinished(10000)) m_process->kill(), m_process->waitForFinished(2000);
    delete m_process;
  }
}

QString ChildProcessTarget::trainerPath() {
  QString env = qEnvironmentVariable("NETLOOM_TRAIN");
  if (!env.isEmpty()) return env;
  QDir app(QCoreApplication::applicationDirPath());
  for (const char* rel : {"netloom-train", "../engine/netloom-train", "../../engine/netloom-train"})
    if (QFileInfo f(app.filePath(rel)); f.isExecutable()) return f.absoluteFilePath();
  return QStandardPaths::findExecutable("netloom-train");
}

qint64 ChildProcessTarget::processId() const {
  return m_process ? m_process->processId() : 0;
}

Status ChildProcessTarget::start(const RunRequest& r) {
  if (m_process) return makeError("a run is in progress");
  QString exe = trainerPath();
  if (exe.isEmpty()) return makeError("netloom-train was not found beside the IDE or on PATH");
  QStringList args{r.runDir + "/project.nlproj",
                   "--events",
                   r.runDir + "/events.pb",
                   "--checkpoint-dir",
                   r.runDir + "/checkpoints",
                   "--save-weights",
                   r.runDir + "/weights.safetensors",
                   "--quiet",
                   "--norms"};
  if (!r.resume.isEmpty()) args << "--resume" << r.resume;
  if (r.maxSteps > 0) args << "--max-steps" << QString::number(r.maxSteps);
  if (r.threads > 0) args << "--threads" << QString::number(r.threads);
  m_runDir = r.runDir;
  m_paused = m_stopping = false;
  m_process = new QProcess(this);
  m_process->setWorkingDirectory(r.projectDir);
  m_process->setProcessChannelMode(QProcess::SeparateChannels);
  connect(m_process, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    QString err = QString::fromUtf8(m_process->readAllStandardError()).trimmed();
    bool ok = status == QProcess::NormalExit && code == 0;
    QString why;
    if (status == QProcess::CrashExit)
      why = m_stopping ? tr("stopped") : tr("netloom-train was killed (signal %1)").arg(code);
    else if (code != 0)
      why = err.isEmpty() ? tr("netloom-train exited with status %1").arg(code) : err;
    if (!ok) recordFailure(m_runDir + "/events.pb", why);
    m_process->deleteLater();
    m_process = nullptr;
    m_paused = false;
    emit ended(ok, why);
  });
  m_process->start(exe, args);
  if (!m_process->waitForStarted(10000)) {
    QString why = m_process->errorString();
    delete m_process;
    m_process = nullptr;
    return makeError("cannot start " + exe.toStdString() + ": " + why.toStdString());
  }
  return {};
}

void ChildProcessTarget::pause() {
  if (m_process && !m_paused) {
    ::kill(pid_t(m_process->processId()), SIGSTOP);
    m_paused = true;
  }
}

void ChildProcessTarget::resume() {
  if (m_process && m_paused) {
    ::kill(pid_t(m_process->processId()), SIGCONT);
    m_paused = false;
  }
}

void ChildProcessTarget::stop() {
  if (!m_process) return;
  m_stopping = true;
  resume();
  ::kill(pid_t(m_process->processId()), SIGTERM);  // netloom-train ends after the step
}

void ChildProcessTarget::cancel() {
  if (m_process) ::kill(pid_t(m_process->processId()), SIGKILL);
}

}  // namespace netloom::gui
