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
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/parallel/communicator.h"
#include "engine/train/trainer.h"
#include "kernels/core/communicator.h"

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

// `netloom-train --thread-ranks N`: a data-parallel job of N ranks that are threads of
// this process, summing in shared memory. The caller trains rank 0 on its own thread
// (with rank0() as its communicator, printing and writing as a single run would);
// start() trains ranks 1.. each on a thread of its own, which report nothing but
// their errors.
// Tensor or pipeline parallelism's groups for this rank (opts.comm), where the run
// asks for them (--tensor-parallel or --pipeline-stages, else the project's
// train.distributed): made into `held` and set in `opts`. Nothing where the run has one rank or no
// tensor groups; a size that does not divide the ranks is left for the run to refuse.
void makeTensorGroups(const proto::Project& project, TrainOptions& opts, TensorGroups& held);

class ThreadRankJob {
 public:
  ThreadRankJob(int ranks, double timeoutSeconds);
  ~ThreadRankJob();
  Communicator* rank0() { return m_comms[0].get(); }
  // Ranks 1.. train `project` with `opts` (rank 0's), each with its own communicator.
  void start(const proto::Project& project, const TrainOptions& opts);
  // After rank 0's run has ended: rank 0 leaves, and the others, which end with it,
  // are waited for. Their errors, one line each ("rank 1: ..."), or empty; with
  // `rank0Failed`, an error that says only that rank 0 left is not repeated.
  std::string finish(bool rank0Failed);

 private:
  std::vector<std::unique_ptr<Communicator>> m_comms;
  std::vector<TensorGroups> m_groups;  // per rank, over its communicator
  std::vector<std::thread> m_threads;
  std::vector<std::string> m_errors;  // per rank
};

}  // namespace netloom
