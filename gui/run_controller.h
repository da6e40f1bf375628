// The training side of the main window: starts runs of the document's project on
// a RunTarget (in process, a child process, a host), tails the run's event stream
// into the charts and the status bar, and keeps the Runs list in step. What each
// target does is the target's; the list is a RunHistory, the status a RunProgress.
#pragma once

#include <QListWidget>
#include <QObject>
#include <QTimer>
#include <memory>
#include <optional>
#include <vector>

#include "gui/charts.h"
#include "gui/event_tail.h"
#include "gui/run_history.h"
#include "gui/run_progress.h"
#include "gui/runs.h"
#include "remote/remote.pb.h"

namespace netloom::remote {
struct HostKey;
}  // namespace netloom::remote

namespace netloom::editor {
class GraphDocument;
}

namespace netloom::gui {

class TrainingCharts;
class RemoteTarget;

class RunController : public QObject {
  Q_OBJECT

 public:
  explicit RunController(editor::GraphDocument* doc, QObject* parent = nullptr);
  ~RunController() override;

  // Widgets the window places in docks and the status bar.
  TrainingCharts* charts() const { return m_charts; }
  QListWidget* history() const { return m_history->list(); }
  QProgressBar* progress() const { return m_progress.bar(); }
  QLabel* status() const { return m_progress.label(); }
  RunHistory* runHistory() const { return m_history; }

  void setChildProcess(bool on) { m_child = on; }
  bool childProcess() const { return m_child; }
  // Where the next run goes: a saved host, or this computer (nullopt).
  void setRemoteHost(const std::optional<remotepb::Host>& host) { m_remoteHost = host; }
  // A run of `perHost` ranks on each of these hosts (two ranks or more in all, parallel
  // as the project says); empty: none.
  void setRankHosts(std::vector<remotepb::Host> hosts, int perHost = 1) {
    m_rankHosts = std::move(hosts);
    m_ranksPerHost = std::max(1, perHost);
  }
  const std::vector<remotepb::Host>& rankHosts() const { return m_rankHosts; }
  int ranksPerHost() const { return m_ranksPerHost; }
  // Ranks in all of a run on several hosts (0: none).
  int hostRanks() const {
    const int n = int(m_rankHosts.size()) * m_ranksPerHost;
    return n > 1 ? n : 0;
  }
  // Where runs train on their computer ("cpu", "cuda:0"), over the project's
  // train.device; empty: the project's.
  void setDevice(const std::string& device) { m_device = device; }
  // Data-parallel ranks on this computer (train.distributed.ranks): above one, a run
  // trains in netloom-train processes, whatever the process setting.
  void setRanks(int ranks) { m_ranks = std::max(1, ranks); }
  int ranks() const { return m_ranks; }
  // Whether those ranks are threads of one process (CPU ranks only).
  void setThreadRanks(bool threads) { m_threadRanks = threads; }
  bool threadRanks() const { return m_threadRanks; }
  const std::string& device() const { return m_device; }
  const std::optional<remotepb::Host>& remoteHost() const { return m_remoteHost; }
  bool remoteRun() const;  // the active run is on a host
  // Prompts a remote run needs, asked on the GUI thread.
  std::function<bool(const remote::HostKey&)> acceptHostKey;
  std::function<QString(const QString& keyFile)> askPassphrase;

  // Validates and starts a run of the document's project; the reason when it
  // cannot. `resumeFrom`: continue that run from its latest checkpoint instead.
  Status start(const RunRecord* resumeFrom = nullptr);
  void pause();
  void resume();
  void stop();
  // Stops a run in progress and waits (up to `ms`) for it to end.
  bool stopAndWait(int ms = 60000);
  // Cancels the run at once (SIGKILL to a remote job or a child; ends an
  // in-process run after the step).
  void cancel();
  // Stops following a remote run and leaves it running on its host: what closing
  // the IDE does. Reattached when the project is opened again.
  void detach();
  // Follows the newest remote run of the project that has not ended (or the one
  // in `runDir`), if any and nothing runs now; true when it did.
  bool reattach(const QString& runDir = {});
  // Removes an ended remote run's job folder on its host (the local run folder,
  // with what was fetched, stays).
  Status deleteRemoteJob(const RunRecord& run);
  // The checkpoints a remote run in progress has written so far, into its run
  // folder (for Evaluate).
  Status fetchRemoteCheckpoints();
  bool running() const;
  bool paused() const;
  RunTarget* target() const;

  const RunRecord* current() const { return m_current ? &*m_current : nullptr; }
  const std::vector<RunRecord>& runs() const { return m_history->runs(); }
  QString runsDir() const;  // empty for an untitled project
  void reloadHistory();
  // Another project was opened: the charts, status, problems and run list become its
  // own, the charts showing its latest run. A local run still going keeps them (the
  // window stops one before it replaces the project).
  void switchProject();
  // Checked runs in the history, overlaid on the charts.
  std::vector<const RunRecord*> checkedRuns() const { return m_history->checked(); }

  // Brings the current run up to date now: what its stream holds and no frame has
  // delivered yet, to the charts, then the progress. Frames do this as events come.
  void poll();
  // Runs drawn over the charts besides the checked ones (a sweep's selected trials).
  void setExtraOverlays(std::vector<TrainingCharts::Overlay> runs);

 signals:
  void message(const QString& text);
  void runEnded(bool ok, const QString& message);
  void problemsChanged(const QStringList& problems);  // failures to show in Problems
  // Events of the current run reached the charts (`count` new ones, the last in
  // current()->events).
  void eventsAppended(int count);

 private:
  void onEnded(bool ok, const QString& why);
  // A target for `host` that asks this controller's questions (host key, passphrase).
  std::unique_ptr<RemoteTarget> hostTarget(const remotepb::Host& host) const;
  // The next run's target, `m_remote` wired to this controller.
  RemoteTarget* makeRemote(const remotepb::Host& host);
  RunTarget* localTarget();  // in process, or netloom-train processes
  // Why no run can start now (one runs, the project is untitled, the graph or the
  // data has problems); ok when one can.
  Status readyToStart(bool resume) const;
  // The project a new run freezes: the document's, with the window's target settings.
  proto::Project projectToRun();
  void begin(const QString& what);
  // The current run's stream, followed from what it holds (a new one for each run).
  void followCurrent();
  void stopFollowing();
  // Events of the current run, read off the GUI thread, to the run and its charts.
  void take(std::vector<proto::TrainEvent> fresh, int64_t nextOffset);
  void updateProgress();
  void updateOverlays();
  std::vector<TrainingCharts::Overlay> m_extraOverlays;

  editor::GraphDocument* m_doc;
  TrainingCharts* m_charts;
  RunHistory* m_history;
  RunProgress m_progress;
  QStringList m_warnings;  // the current run's warnings, shown in Problems
  std::unique_ptr<InProcessTarget> m_inProcess;
  std::unique_ptr<ChildProcessTarget> m_childProcess;
  std::unique_ptr<RemoteTarget> m_remote;
  std::optional<remotepb::Host> m_remoteHost;
  std::string m_device;
  int m_ranks = 1;
  bool m_threadRanks = false;
  std::vector<remotepb::Host> m_rankHosts;
  int m_ranksPerHost = 1;
  RunTarget* m_active = nullptr;
  bool m_child = false;
  std::optional<RunRecord> m_current;
  // The current run's events are read and decoded on the tail's thread, and reach
  // the charts once a frame; the progress figures are updated as often.
  EventTail m_tail;
  int m_stream = 0;   // the current run's stream in m_tail; 0 when none is followed
  int m_streams = 0;  // streams followed so far: each run's has a number of its own
  QTimer m_poll;
};

}  // namespace netloom::gui
