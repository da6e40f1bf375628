// Runs from the IDE: where they live, how they are started, and what they said.
//
// Every run has a folder under the project's `runs/`: a frozen copy of the project
// (project.nlproj), the event stream (events.pb, the one source of truth for
// charts and history, appended as the run goes), its checkpoints and its final
// weights. A RunTarget starts the training and controls it; whatever the target,
// the IDE learns what happens by tailing the run's event stream, so an in-process
// run, a child process and (later) a remote job all look the same.
#pragma once

#include <QObject>
#include <QProcess>
#include <QString>
#include <QThread>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/proto/events.pb.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom::gui {

// One run folder: its files and what its events say.
struct RunRecord {
  QString dir;
  QString name;  // the folder's name, e.g. "20261203-141503"
  // What the user calls it, its tags and a note (meta.json in its folder); all optional.
  QString title;
  QStringList tags;
  QString note;
  QString label() const { return title.isEmpty() ? name : title; }
  proto::Project project;
  std::vector<proto::TrainEvent> events;
  int64_t offset = 0;  // bytes of events.pb read so far

  enum class State { Running, Finished, Failed, Stopped };
  State state() const;
  QString stateText() const;  // "finished, loss 0.1", "stopped at step 120", "failed: <why>", ...
  const proto::RunStarted* started() const;
  const proto::Finished* finished() const;
  const proto::Failed* failed() const;
  int64_t steps() const;  // Step events seen
  // The run's pace over its last steps, from the stream alone (so the same after a
  // reattach, and still while paused): steps per second of the run's own clock, and
  // the median of the steps' samples/s (one slow or fast step does not swing it).
  struct Pace {
    double stepsPerSec = 0, samplesPerSec = 0;
  };
  Pace pace(int window = 64) const;
  QString eventsPath() const { return dir + "/events.pb"; }
  QString checkpointsDir() const { return dir + "/checkpoints"; }
  QString weightsPath() const { return dir + "/weights.safetensors"; }

  // Reads events appended since the last call; true when there were new ones.
  bool poll();
};

// A copy of the project that trains from another folder: its data paths made absolute
// against `projectDir`.
proto::Project frozen(proto::Project p, const QString& projectDir);

// Makes a new run folder under `runsDir` with a frozen copy of the project, its
// relative data paths made absolute against `projectDir`.
Result<RunRecord> createRun(const QString& runsDir, const proto::Project& project,
                            const QString& projectDir);
// Every run folder under `runsDir`, oldest first, with its events read.
std::vector<RunRecord> listRuns(const QString& runsDir);
// Writes a run's title, tags and note (meta.json, atomically).
Status saveRunMeta(const RunRecord& run);
// Removes a run's folder and everything in it.
Status deleteRunFolder(const RunRecord& run);
// The latest checkpoint of a run, or empty.
QString latestCheckpoint(const RunRecord& run);
// Appends a Failed event saying why to a run's stream, unless the stream already
// ends the run: a run that died, or never started, says so in its history.
void recordFailure(const QString& eventsPath, const QString& why);

// What a target needs to start a run.
struct RunRequest {
  QString runDir;      // the RunRecord's folder
  QString projectDir;  // relative data paths resolve against it
  QString resume;      // a checkpoint folder to continue from, or empty
  int64_t maxSteps = 0;
  int threads = 0;
};

class RunTarget : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;
  virtual QString kind() const = 0;  // "in-process", "local process", "on gpu-box"
  virtual Status start(const RunRequest& r) = 0;
  // What the target offers beyond start, stop and cancel: holding a run between two
  // steps, and leaving it running where it is when the IDE lets go of it.
  virtual bool canPause() const { return true; }
  virtual bool canDetach() const { return false; }
  virtual void pause() = 0;
  virtual void resume() = 0;
  virtual void stop() = 0;    // ends after the current step, with a checkpoint
  virtual void cancel() = 0;  // ends at once (an in-process run: after the step)
  // Stops following a run that keeps going on its host (canDetach()).
  virtual void detach() {}
  virtual bool running() const = 0;
  virtual bool paused() const = 0;
  // Where a scheduler has the run ("pending (Priority)", "requeued"); empty: none.
  virtual QString schedulerState() const { return {}; }

 signals:
  // schedulerState() changed.
  void stateChanged();
  // News for the status bar while a run starts or is followed ("Connecting …").
  void notice(const QString& text);
  // A file on its way to the host: `done` of `total` bytes of `what`.
  void transfer(const QString& what, qint64 done, qint64 total);
  // The run ended: cleanly (its last event is Finished, or it was stopped), or not,
  // with the reason. Events are already in the stream.
  void ended(bool ok, const QString& message);
  // New events are in the stream (a target that knows when, says so; the IDE
  // also polls on a timer).
  void progressed();
};

// The embedded engine on a worker thread; the default.
class InProcessTarget : public RunTarget {
  Q_OBJECT

 public:
  explicit InProcessTarget(QObject* parent = nullptr);
  ~InProcessTarget() override;
  QString kind() const override { return tr("in-process"); }
  Status start(const RunRequest& r) override;
  void pause() override;
  void resume() override;
  void stop() override;
  void cancel() override { stop(); }  // a step cannot be cut short
  bool running() const override { return m_thread != nullptr; }
  bool paused() const override { return m_paused; }

 signals:
  // A pause took effect: the training thread waits between two steps, and every
  // event it wrote is in the stream.
  void parked();

 private:
  QThread* m_thread = nullptr;
  std::atomic<bool> m_stop{false};
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_paused = false;
};

// `netloom-train` as a child process writing the run's event stream, so a crash in
// a run cannot take the IDE down.
class ChildProcessTarget : public RunTarget {
  Q_OBJECT

 public:
  explicit ChildProcessTarget(QObject* parent = nullptr);
  ~ChildProcessTarget() override;
  QString kind() const override { return tr("local process"); }
  Status start(const RunRequest& r) override;
  void pause() override;
  void resume() override;
  void stop() override;
  void cancel() override;  // SIGKILL
  bool running() const override { return m_process != nullptr; }
  bool paused() const override { return m_paused; }
  qint64 processId() const;
  // Where netloom-train is: beside the IDE's executable, else on PATH.
  static QString trainerPath();

 private:
  QProcess* m_process = nullptr;
  QString m_runDir;
  bool m_paused = false;
  bool m_stopping = false;
};

}  // namespace netloom::gui
