#include "engine/cli/sweep_command.h"

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "engine/io/output_file.h"
#include "engine/sweep/runner.h"
#include "kernels/core/device.h"

namespace netloom::cli {
namespace {

const char* strategyName(const sweep::SweepPlan& plan) {
  switch (plan.strategy) {
    case proto::GRID: return "grid";
    case proto::RANDOM: return "random search";
    case proto::TPE: return "TPE";
    default: return "TPE with ASHA";
  }
}

// "  7  done      0.9783   30   1.2 s  train.optimizer.lr=0.0031 nodes.fc1.out_features=64"
void printRow(const sweep::SweepPlan& plan, const sweep::TrialRecord& t) {
  char objective[32] = "-";
  if (t.hasObjective) std::snprintf(objective, sizeof objective, "%.4f", t.objective);
  std::string params;
  for (size_t k = 0; k < t.values.size(); ++k)
    params += (k ? " " : "") + plan.targets[k].path + "=" + t.values[k];
  const std::string error = t.error.empty() ? "" : "  (" + t.error + ")";
  std::printf("%5d  %-7s %9s %5d %7.1f s  %s%s\n", t.index, t.status.c_str(), objective, t.epochs,
              t.seconds, params.c_str(), error.c_str());
  std::fflush(stdout);
}

}  // namespace

int runSweepCommand(TrainArgs& a, const proto::Project& project, const std::atomic<bool>& stop) {
  auto plan = sweep::planSweep(project);
  if (!plan) {
    std::fprintf(stderr, "netloom-train: %s: %s\n", a.project.c_str(),
                 plan.error().message.c_str());
    return 2;
  }
  namespace fs = std::filesystem;
  sweep::SweepOptions o;
  o.folder = !a.sweepDir.empty() ? a.sweepDir
                                 : (fs::path(a.opts.projectDir) / "runs" /
                                    ("sweep-" + fs::path(a.project).stem().string()))
                                       .string();
  o.parallel = a.parallel;
  o.cores = a.opts.threads;
  o.base = a.opts;
  o.stop = &stop;
  // A GPU project: one trial on each GPU (the first --parallel of them).
  std::vector<std::string> gpus;
  if (project.train().device().rfind("cuda", 0) == 0)
    for (int k = 0; k < 64; ++k) {
      std::string why;
      if (!openDevice(DeviceId{DeviceKind::Cuda, k}, why)) break;
      if (a.parallel == 0 || int(gpus.size()) < a.parallel)
        gpus.push_back("cuda:" + std::to_string(k));
    }
  auto local = sweep::localTrials(a.parallel > 0 ? a.parallel : plan->parallel, a.opts.threads,
                                  a.opts, gpus);
  o.launcher = local.get();
  std::mutex printing;
  o.onTrial = [&](const sweep::TrialRecord& t) {
    if (a.quiet || !t.ended()) return;
    std::lock_guard<std::mutex> lock(printing);
    printRow(*plan, t);
  };
  const int parallel = local->capacity();
  if (!a.quiet) {
    std::printf("sweep: %d trials, %s, %d at once; objective %s (%s); trials in %s\n", plan->trials,
                strategyName(*plan), parallel, plan->objective.spec().c_str(),
                plan->maximize ? "larger is better" : "smaller is better", o.folder.c_str());
    std::printf("%5s  %-7s %9s %5s %9s  %s\n", "trial", "status", "objective", "epoch", "time",
                "parameters");
  }
  auto result = sweep::runSweep(project, *plan, o);
  if (!result) {
    std::fprintf(stderr, "netloom-train: %s\n", result.error().message.c_str());
    return 1;
  }
  if (!a.sweepJson.empty())
    if (Status st = writeFileAtomic(a.sweepJson, sweep::sweepJson(*plan, *result).dump() + "\n");
        !st) {
      std::fprintf(stderr, "netloom-train: %s\n", st.message().c_str());
      return 1;
    }
  if (result->best < 0) {
    std::fprintf(stderr, "netloom-train: no trial of the sweep reported %s\n",
                 plan->objective.spec().c_str());
    return 1;
  }
  if (!a.quiet) {
    std::printf("best: ");
    printRow(*plan, result->trials[size_t(result->best)]);
  }
  return 0;
}

}  // namespace netloom::cli
