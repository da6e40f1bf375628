// What the parts of a training run share: its setup, where it stands, the step's
// context, and the summary it builds. The fit owns it; the step pipeline, the
// checkpoint policy and the run reporter read and move it forward.
#pragma once

#include <cstdint>

#include "engine/runtime/program.h"
#include "engine/train/checkpoint.h"
#include "engine/train/eval_pass.h"
#include "engine/train/run_setup.h"
#include "engine/train/trainer.h"
#include "kernels/core/communicator.h"

namespace netloom {

struct RunState {
  const TrainOptions& opts;
  Setup s;
  RunPosition pos;                  // where the run stands, as a checkpoint records it
  StepContext ctx;                  // the step being issued
  int64_t perEpoch = 0, total = 0;  // steps in an epoch, in the run
  TrainSummary sum;
  Totals totals;  // of the epoch in progress
  // The steps after the warm-up (TrainOptions::warmupSteps): their time and samples.
  double steadySeconds = 0;
  int64_t steadySamples = 0;
  // Data parallelism: the other ranks (null alone), and whether any rank was asked
  // to stop, as the last drain agreed (all ranks stop at the same step).
  Communicator* comm = nullptr;
  bool stopAgreed = false;

  explicit RunState(const TrainOptions& o) : opts(o) {}
  bool stopRequested() const { return comm ? stopAgreed : opts.stop && opts.stop->load(); }
  int ranks() const { return comm ? comm->size() : 1; }
  // The ranks that read a share of each batch: each pipeline reads one, as a whole.
  Communicator* readers() const { return s.trainOpts.stageComm ? s.trainOpts.dataComm : comm; }
  int shares() const { return readers() ? readers()->size() : 1; }
  bool writes() const { return !comm || comm->rank() == 0; }  // checkpoints, weights
  // The store as one rank would hold it, to write: tensor parallelism's parts, ZeRO's
  // state shards, a pipeline's stages gathered (every rank takes part). Null where it
  // is so already.
  std::unique_ptr<ParamStore> gathered(const ParamStore& store) const {
    if (Communicator* stages = s.trainOpts.stageComm) return store.gatherStages(*stages);
    Communicator* parts = s.trainOpts.tensorComm;
    Communicator* shards = s.trainOpts.zero > 0 ? s.trainOpts.comm : nullptr;
    return parts || shards ? store.gatherWhole(parts, shards) : nullptr;
  }
};

}  // namespace netloom
