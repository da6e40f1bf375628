// The training steps in flight: each issued on its bound batch (checked for
// non-finite values every few steps, on the host or on the device), its loss and
// metrics recorded on the device, and read back in order by drain(), which reports
// each step and, in a job of ranks, sums them over the global batch. Inside the
// trainer; not an API.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/runtime/feeder.h"
#include "engine/runtime/profile.h"
#include "engine/train/run_reporter.h"
#include "engine/train/run_state.h"

namespace netloom {

class StepPipeline {
 public:
  StepPipeline(RunState& run, RunReporter& reporter, const ParamStore& store, const Program& main);

  // An epoch begins with this loader: the one a failed step's batch is loaded again
  // from.
  void beginEpoch(const BatchLoader::Options& loader);
  // Issues a step on `b` (bound already) at the run's context.
  Status issue(Program& prog, const Batch& b);
  // Reads back the issued steps' scalars and reports each step, in order; why the
  // run cannot go on, or empty.
  std::string drain();

  bool empty() const { return m_issued.empty(); }
  // Whether the issued steps must be read now: the ring is full, or the last one
  // reports norms (read before the next step changes the weights).
  bool mustDrain() const { return m_ring->full() || (!empty() && m_issued.back().norms); }
  // Whether the device runs apart from the host (a GPU): the next batch then crosses
  // while a step runs.
  bool apart() const { return m_apart; }
  // The next step's time starts now.
  void restartWindow() { m_windowStart = std::chrono::steady_clock::now(); }
  std::vector<ProfiledProgram> takeProfiles();

 private:
  struct Issued {
    Program* prog;
    int64_t step, size;
    int epoch;
    double lr;
    bool norms;          // the Step event carries gradient and weight norms
    int64_t batchIndex;  // in its epoch, from 0: the batch a replay loads again
    int64_t globalSize;  // the step's batch across all ranks
  };
  // Sums the scalars of the issued steps over the ranks, and agrees on stopping.
  void sumOverRanks(std::vector<float>& values, size_t width);
  // A step the device found non-finite, run again on its batch to name why.
  std::string replayFailed(const Issued& it) const;

  RunState& m_run;
  RunReporter& m_reporter;
  const ParamStore& m_store;
  bool m_scaled;  // fp16's loss scaling: each step also records its scale and skips
  // The loss, each metric, under loss scaling the scale used and the steps skipped so
  // far, and the step's guard (checked on the device) of a step, read back every few
  // steps on a device the host cannot address (each read waits for the device), every
  // step on the CPU.
  std::unique_ptr<ScalarRing> m_ring;
  size_t m_width;  // scalars a step records, as above
  std::vector<Issued> m_issued;
  std::map<const Program*, ProfiledProgram> m_profiles;
  BatchLoader::Options m_epochLoader;
  bool m_apart = false;
  std::set<std::string> m_recordingProblems;  // said already
  std::chrono::steady_clock::time_point m_windowStart = std::chrono::steady_clock::now();
  double m_waitedBefore = 0;  // CommStats::waitedSeconds at the last drain
};

}  // namespace netloom
