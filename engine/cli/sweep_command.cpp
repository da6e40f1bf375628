#include "engine/cli/sweep_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
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

// --target A,B,...: netloom-job sweep, found beside netloom-train (or in the build's
// remote/ folder, or on PATH), takes over this process.
int sweepElsewhere(const TrainArgs& a) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::string job = "netloom-job";
  for (const fs::path& p : {self / "netloom-job", self / ".." / "remote" / "netloom-job"})
    if (fs::exists(p, ec)) job = p.string();
  std::vector<std::string> args{job, "sweep", a.project, "--hosts", a.target};
  if (a.parallel > 0) args.insert(args.end(), {"--per-host", std::to_string(a.parallel)});
  if (!a.sweepJson.empty()) args.insert(args.end(), {"--sweep-json", a.sweepJson});
  if (!a.sweepDir.empty()) args.insert(args.end(), {"--sweep-dir", a.sweepDir});
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "netloom-train: --target %s needs netloom-job (%s): %s\n", a.target.c_str(),
               job.c_str(), std::strerror(errno));
  return 2;
}

}  // namespace

int runSweepCommand(TrainArgs& a, const proto::Project& project, const std::atomic<bool>& stop) {
  if (!a.target.empty() && a.target != "local") return sweepElsewhere(a);
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
    std::printf("%s\n", sweep::trialRow(*plan, t).c_str());
    std::fflush(stdout);
  };
  const int parallel = local->capacity();
  if (!a.quiet) {
    std::printf("sweep: %d trials, %s, %d at once; objective %s (%s); trials in %s\n", plan->trials,
                strategyName(*plan), parallel, plan->objective.spec().c_str(),
                plan->maximize ? "larger is better" : "smaller is better", o.folder.c_str());
    std::printf("%s\n", sweep::trialHeader().c_str());
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
    std::printf("best: %s\n", sweep::trialRow(*plan, result->trials[size_t(result->best)]).c_str());
  }
  return 0;
}

}  // namespace netloom::cli
