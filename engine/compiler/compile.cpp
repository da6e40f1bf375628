// The compiler driver: the graph built from the model, then the pass manager's two
// pipelines (engine/compiler/pass.h), rewrite and lower, over it.
#include "engine/compiler/compile.h"

#include <chrono>

#include "engine/compiler/pass.h"

namespace netloom {

Status validateModel(const proto::ModelDef& model, int64_t batch) {
  auto g = buildGraph(model, batch);
  return g ? Status{} : Status{g.error()};
}

namespace {

Result<std::unique_ptr<Program>> compileUnguarded(const proto::ModelDef& model,
                                                  const CompileOptions& opts, ParamStore& store) {
  auto t0 = std::chrono::steady_clock::now();
  const int64_t parts = opts.tensorComm && !opts.wholeBatchPerRank ? opts.tensorComm->size() : 1;
  auto built = buildGraph(model, opts.batch * parts);  // the sbp pass cuts it to this rank's
  if (!built) return built.error();
  auto prog = std::make_unique<Program>();
  prog->graph = std::move(*built);
  prog->batch = opts.batch;
  prog->training = opts.training;
  prog->device = &store.device();
  prog->graphs = opts.graphs;
  prog->precision = opts.precision;
  PassContext c(opts, store, *prog);
  c.context.device = &store.device();
  c.context.autocast = opts.precision != Precision::F32;
  c.context.comm = opts.comm;
  c.context.tensorComm = opts.tensorComm;
  c.context.dataComm = opts.dataComm;
  c.context.stageComm = opts.stageComm;
  c.lower.budget = budgetOrThisProcess(opts.budget);
  // What the passes planned of the budget is given back unless the compile succeeds.
  struct GiveBack {
    Lowering& l;
    ~GiveBack() { l.budget->release(l.planned); }
  } giveBack{c.lower};
  if (Status s = PassManager::standard().run(c); !s) return s.error();
  prog->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  c.lower.planned = 0;  // kept for the program's life
  return std::move(prog);
}

}  // namespace

// What the budget did not foresee (a library's own allocations) still ends as an
// error, not as an exception through the engine's API.
Result<std::unique_ptr<Program>> compile(const proto::ModelDef& model, const CompileOptions& opts,
                                         ParamStore& store) {
  try {
    return compileUnguarded(model, opts, store);
  } catch (const std::bad_alloc&) {
    return makeRefusal("compiling the model at batch " + std::to_string(opts.batch) +
                       " ran out of memory");
  } catch (const std::exception& e) {
    return makeError("compiling the model at batch " + std::to_string(opts.batch) +
                     " failed: " + e.what());
  }
}

}  // namespace netloom
