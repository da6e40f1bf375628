// The run's events, as the sink receives them: each stamped with the time, the
// RunStarted that opens a run, the Step, Epoch, Checkpoint and Log events while it
// trains, and Finished or Failed at its end. Inside the trainer; not an API.
#pragma once

#include <chrono>
#include <string>

#include "engine/train/run_state.h"

namespace netloom {

double wallClockSeconds();

class RunReporter {
 public:
  explicit RunReporter(const EventSink& sink) : m_sink(sink) {}

  // Ends the run with a Failed event at `step`; the error keeps its kind (a refusal
  // stays one).
  Error fail(Error error, int64_t step) const;
  void log(proto::Log::Level level, const std::string& text) const;
  // RunStarted, with what the run is about to do, then the setup's warnings and what
  // data parallelism and a resumed position mean for it.
  void started(const RunState& r, const Program& main) const;
  // A step's event; the device's memory in use goes with at most one a second.
  void step(proto::Step step, const Device& device, bool lastOfWindow);
  // An epoch's event, its time counted from `started`.
  void epoch(proto::Epoch epoch, std::chrono::steady_clock::time_point started) const;
  void checkpoint(const std::string& path, int64_t step) const;
  void finished(const TrainSummary& sum) const;
  double runSeconds() const { return wallClockSeconds() - m_wallStart; }

 private:
  void send(proto::TrainEvent& e) const;

  const EventSink& m_sink;
  double m_wallStart = wallClockSeconds();
  std::chrono::steady_clock::time_point m_memoryReported =
      std::chrono::steady_clock::now() - std::chrono::seconds(1);
};

}  // namespace netloom
