// A project file as the IDE opens it: the text parser, then the tolerant analysis
// the editor draws from, the strict validation with shape inference a run starts
// with, and the per-node summary (`netloom-train --summary`).
#include <cstdint>
#include <string>

#include "engine/compiler/compile.h"
#include "engine/graph/analyze.h"
#include "engine/io/project_file.h"
#include "engine/train/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netloom;
  auto project =
      parseProject(std::string(reinterpret_cast<const char*>(data), size), "fuzz.nlproj");
  if (!project) return 0;
  // The batch the editor uses: the project's, else 1.
  const int64_t batch = project->train().batch_size() > 0 ? project->train().batch_size() : 1;
  (void)analyzeModel(project->model(), batch);
  (void)validateModel(project->model(), batch);
  (void)summarizeModel(project->model(), batch);
  (void)projectToText(*project);
  return 0;
}
