// What each rank holds and how fast it steps under each parallel strategy: a
// project trained a few steps on 1, 2 and 4 ranks (threads of this process over
// shared memory) as data parallelism, ZeRO-1, ZeRO-2 and tensor parallelism, at the
// same global batch. Rank 0's weights, optimizer state and arena (measured from its
// store and its plan) and its step time, each against data parallelism's, and the
// plan's own figure for the weights. Run through bench_parallel.sh.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/io/project_file.h"
#include "engine/parallel/communicator.h"
#include "engine/train/trainer.h"

using namespace netloom;

namespace {

struct Strategy {
  const char* name;
  int tensor, zero;
};

struct Row {
  std::string error;
  TrainSummary s;
};

Row run(const proto::Project& project, const std::string& dir, int ranks, const Strategy& st,
        int globalBatch, int steps) {
  TrainOptions base;
  base.projectDir = dir;
  base.threads = 1;
  base.maxSteps = steps;
  base.epochs = 1000;
  base.batchSize = globalBatch / ranks;
  base.tensorParallel = st.tensor > 1 ? ranks : 0;
  base.zero = st.zero;
  base.checkpointDir = "/tmp/netloom-bench-parallel-checkpoints";
  Row out;
  auto comms = threadRanks(ranks, 600);
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      TrainOptions o = base;
      o.comm = ranks > 1 ? comms[size_t(r)].get() : nullptr;
      TensorGroups g;
      if (o.comm && st.tensor > 1) {
        g = tensorGroups(*o.comm, ranks);
        o.tensorComm = g.tensor.get();
        o.dataComm = g.data.get();
      }
      auto s = runTraining(project, o, [](const proto::TrainEvent&) {});
      if (!s)
        errors[size_t(r)] = s.error().message;
      else if (r == 0)
        out.s = *s;
      comms[size_t(r)].reset();
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) out.error = e;
  return out;
}

double mib(int64_t b) {
  return double(b) / 1048576.0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s PROJECT GLOBAL_BATCH STEPS NAME\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int batch = std::atoi(argv[2]), steps = std::atoi(argv[3]);
  auto project = loadProject(path);
  if (!project) {
    std::fprintf(stderr, "%s\n", project.error().message.c_str());
    return 1;
  }
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  const Strategy strategies[] = {
      {"data", 1, 0}, {"ZeRO-1", 1, 1}, {"ZeRO-2", 1, 2}, {"tensor", 2, 0}};
  std::printf(
      "%s, global batch %d, %d steps (per rank: weights, optimizer state, arena in MiB; "
      "ms per step; ratios to data parallelism at the same ranks)\n",
      argv[4], batch, steps);
  std::printf("%-6s %-8s %9s %9s %9s %9s %9s %8s %8s\n", "ranks", "strategy", "weights", "state",
              "arena", "total", "ms/step", "w ratio", "s ratio");
  for (int ranks : {1, 2, 4}) {
    Row data;
    for (const Strategy& st : strategies) {
      if (ranks == 1 && (st.tensor > 1 || st.zero > 0)) continue;
      Row r = run(*project, dir, ranks, st, batch, steps);
      if (!r.error.empty()) {
        std::printf("%-6d %-8s refused: %s\n", ranks, st.name, r.error.c_str());
        continue;
      }
      if (st.tensor == 1 && st.zero == 0) data = r;
      const TrainSummary& s = r.s;
      const double ms = s.samplesPerSec > 0 ? 1000.0 * batch / s.samplesPerSec : 0;
      std::printf("%-6d %-8s %9.3f %9.3f %9.3f %9.3f %9.2f %8.3f %8.3f\n", ranks, st.name,
                  mib(s.weightBytes), mib(s.stateBytes), mib(s.arenaBytes),
                  mib(s.weightBytes + s.stateBytes + s.arenaBytes), ms,
                  data.s.weightBytes ? double(s.weightBytes) / double(data.s.weightBytes) : 0.0,
                  data.s.stateBytes ? double(s.stateBytes) / double(data.s.stateBytes) : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
