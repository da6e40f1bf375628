// Running a sweep on this computer: trials in parallel, each a training run of its
// own project (the parameters set) in a thread, the cores shared out among them. The
// scheduler fills a free slot as soon as a trial ends or is pruned at one of ASHA's
// rungs; a failed trial is recorded with its error and the sweep goes on. Every
// change is written to <folder>/sweep.json at once (atomically), each trial's events
// to <folder>/trial-NNN/events.pb; started again on the same folder, a sweep keeps
// the trials that ended and runs the rest.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "engine/io/json.h"
#include "engine/sweep/definition.h"
#include "engine/train/trainer.h"

namespace netloom::sweep {

struct TrialRecord {
  int index = 0;
  Point at;
  std::vector<std::string> values;  // the parameters as text, in the plan's order
  std::string status = "queued";    // queued, running, done, pruned, stopped (by hand), failed
  double objective = 0;             // the metric at the trial's last epoch
  bool hasObjective = false;
  int epochs = 0;  // epochs run
  int rung = -1;   // the last ASHA rung it reached
  double seconds = 0;
  std::string error;   // a failed trial's
  std::string folder;  // its events and log
  std::string where;   // where it ran: "this computer", a host's name
  std::string job;     // the remote job it is, followed again when the sweep goes on
  bool ended() const {
    return status == "done" || status == "pruned" || status == "stopped" || status == "failed";
  }
};

// What a launcher is given to run one trial.
struct TrialRun {
  int slot = 0;                              // 0 … capacity()−1, one trial at a time each
  const std::atomic<bool>* stop = nullptr;   // set: end the run after its step
  const std::atomic<bool>* leave = nullptr;  // set: the sweep goes away; a remote job runs
                                             // on, to be followed again (a local run stops)
  std::string job;  // a job this trial started before, to follow again instead of starting one
  std::function<void(const std::string&)> started;        // the job just started, to be saved
  std::function<void(const proto::TrainEvent&)> onEvent;  // each event, as it comes
};

// Where trials run: `capacity()` at once. run() trains a trial's project to its end
// (or until it is stopped or left), handing each event to `r.onEvent`; the error, or
// empty.
class TrialLauncher {
 public:
  virtual ~TrialLauncher() = default;
  virtual int capacity() const = 0;
  virtual std::string where(int slot) const = 0;
  virtual std::string run(const proto::Project& project, const TrialRun& r) = 0;
};

// This computer: `parallel` trials in threads, `cores` shared among them (0: every
// core), each with `base`'s options; with `devices` (cuda:0, cuda:1, …) each slot
// trains on its own.
std::unique_ptr<TrialLauncher> localTrials(int parallel, int cores, const TrainOptions& base,
                                           std::vector<std::string> devices = {});

struct SweepOptions {
  std::string folder;  // sweep.json and the trials' folders
  int parallel = 0;    // trials at once; 0: the plan's
  int cores = 0;       // shared among the trials; 0: every core
  TrainOptions base;   // each trial's, but for its threads and stop flag
  std::function<void(const TrialRecord&)> onTrial;  // each change of a trial's status
  const std::atomic<bool>* stop = nullptr;          // set: no trial starts, running ones end
  // Where the trials run; null: this computer (localTrials over the options above).
  TrialLauncher* launcher = nullptr;
};

struct SweepResult {
  std::vector<TrialRecord> trials;
  int best = -1;  // the index of the trial with the best objective; -1: none has one
};

Result<SweepResult> runSweep(const proto::Project& project, const SweepPlan& plan,
                             const SweepOptions& options);

// The trials a sweep.json holds, as far as they fit `plan`'s space; none where there is
// no such file; an error for a file that is not JSON (one being written: read again).
Result<std::vector<TrialRecord>> readSweep(const SweepPlan& plan, const std::string& path);

// Asks the sweep running in `folder` (another process, perhaps) to stop trial `index`
// after its current step; it ends "stopped", keeping its events.
Status stopTrial(const std::string& folder, int index);

// A trial as a line of the table a sweep prints as trials end, and its header:
// "    7  done      0.9783    30     1.2 s  this computer  train.optimizer.lr=0.0031 …".
std::string trialRow(const SweepPlan& plan, const TrialRecord& t);
std::string trialHeader();

// {"objective": …, "trials": [{"index", "params", "status", "objective", "epochs",
// "rung", "seconds", "error", "folder"}], "best": …}
Json sweepJson(const SweepPlan& plan, const SweepResult& result);

}  // namespace netloom::sweep
