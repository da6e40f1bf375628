// `netloom-train --ranks N`: a data-parallel job of N local ranks. This process
// starts N workers of netloom-train, each told its rank, the job's size, the
// rendezvous folder and its share of the cores. Rank 0 prints the progress and
// writes the summary and weights; its events reach the job's stream through this
// process, the other ranks log to files. When a rank fails, the others are stopped
// (SIGTERM, then SIGKILL after the timeout) and the job's Failed event names the
// rank that failed first, its host and its last log lines. Nothing is left behind:
// the workers die with this process, and the rendezvous folder is removed.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace netloom {

struct RankJob {
  int ranks = 2;
  std::vector<std::string> args;  // netloom-train's arguments, without --ranks
  std::string events;             // the job's event stream (--events), or empty
  bool appendEvents = false;      // --resume: the stream goes on
  std::string logDir;             // where ranks 1.. write their logs
  int threadsPerRank = 1;
  double timeoutSeconds = 60;  // for a rank to answer, and for the others to stop
};

// Runs the job to its end: netloom-train's exit status (0, 1 failed, 2 refused).
int runRanks(const RankJob& job, const std::atomic<bool>& stop);

}  // namespace netloom
