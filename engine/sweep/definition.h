// A project's sweep (proto::Sweep) read for running: its parameters resolved against
// the project (a TrainDef field, or a node's attribute), their space, the objective
// and the strategy; and a trial's project, the parameters set in a copy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/proto/project.pb.h"
#include "engine/sweep/search.h"
#include "engine/train/metric_watch.h"
#include "engine/util/status.h"

namespace netloom::sweep {

// Where a parameter's value goes.
struct Target {
  std::string path;  // as written: "train.optimizer.lr", "nodes.fc1.out_features"
  enum class Kind { Int, Float, Bool, Text, Enum } kind = Kind::Float;
  std::vector<std::string> fields;  // train.…: the field names below TrainDef
  std::string node, attr;           // nodes.…
  std::string instance;             // instances.<node>: how many of it, chained
};

struct SweepPlan {
  Space space;
  std::vector<Target> targets;  // one per parameter, in order
  MetricWatch objective;
  bool maximize = false;
  proto::SweepStrategy strategy = proto::TPE_ASHA;
  int trials = 20;  // a grid's: its size
  int parallel = 1;
  double maxSeconds = 0;  // 0: no limit
  uint64_t seed = 0;
  int eta = 3, minEpochs = 1, epochs = 1;  // epochs: each trial's whole run
  int gridSteps = 4;

  // `at` with each whole-number target's value rounded: what the trial runs with.
  Point settle(Point at) const;
  // The strategy the plan names (ASHA's rungs are the scheduler's).
  std::unique_ptr<Strategy> strategyFor() const;
  bool prunes() const { return strategy == proto::TPE_ASHA; }
};

// Refuses, naming the field ("sweep.params[2] (train.optimizer.lrr): …"): no sweep, an
// unknown target, an empty or log-through-0 range, a choice of the wrong type, a
// fractional range for a whole-number target, an objective no epoch reports.
Result<SweepPlan> planSweep(const proto::Project& project);

// The project with the point's values set: the trial's project.
Result<proto::Project> trialProject(const proto::Project& project, const SweepPlan& plan,
                                    const Point& at);

}  // namespace netloom::sweep
