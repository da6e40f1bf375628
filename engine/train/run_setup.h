// What a run, an evaluation and --explain share inside the trainer: the settings
// checked and resolved, and the programs compiled per batch size. Not an API.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/compiler/compile.h"
#include "engine/data/dataset.h"
#include "engine/train/metric_watch.h"
#include "engine/train/trainer.h"

namespace netloom {

// Programs for one mode, compiled per batch size on demand (the last batch of an
// epoch may be short); all share one parameter store.
class ProgramCache {
 public:
  // Whether its programs split the model over a tensor group (every rank's batch
  // the same size).
  bool splitsModel() const { return m_base.tensorComm || m_base.stageComm; }
  Communicator* dataComm() const { return m_base.dataComm; }
  // Whether this rank counts its evaluation (of the ranks that read the same samples,
  // the first of a tensor group, the last stage of a pipeline).
  bool counts() const {
    if (m_base.tensorComm) return m_base.tensorComm->rank() == 0;
    if (m_base.stageComm) return m_base.stageComm->rank() == m_base.stageComm->size() - 1;
    return true;
  }
  ProgramCache(const proto::Project& p, CompileOptions base, ParamStore& store)
      : m_project(p), m_base(std::move(base)), m_store(store) {}

  Result<Program*> get(int64_t batch) {
    auto it = m_programs.find(batch);
    if (it != m_programs.end()) return it->second.get();
    CompileOptions o = m_base;
    o.batch = batch;
    auto prog = compile(m_project.model(), o, m_store);
    if (!prog) return prog.error();
    Program* raw = prog->get();
    m_programs[batch] = std::move(*prog);
    return raw;
  }

 private:
  const proto::Project& m_project;
  CompileOptions m_base;
  ParamStore& m_store;
  std::map<int64_t, std::unique_ptr<Program>> m_programs;
};

// A project's settings, checked and resolved against the options, with its data loaded.
struct Setup {
  proto::Project project;
  DataSplits data;
  int64_t batch = 32;
  int epochs = 1;
  int threads = 1;
  uint64_t seed = 0;
  CompileOptions trainOpts, evalOpts;
  std::shared_ptr<MemoryBudget> budget;
  std::optional<MetricWatch> best, early;
  std::string checkpointDir;
  Device* device = nullptr;           // train.device, opened
  std::vector<std::string> warnings;  // accepted but suspicious settings, logged at the start
  int checkEvery = 1;                 // steps between finite checks; 0: never
};

Result<Setup> prepare(const proto::Project& project, const TrainOptions& opts);

// Checks the data fits the model's inputs before anything runs; `split` names it.
Status checkDataFits(const Program& prog, const Dataset& data, const std::string& split);

// Compiles, and so plans the memory of, every program the run will use, and plans
// the batches the loaders prepare ahead: all of it is known before the first step,
// so a run that cannot fit is refused before it starts rather than after an epoch.
Status planRun(const Setup& s, ProgramCache& train, ProgramCache& eval);

}  // namespace netloom
