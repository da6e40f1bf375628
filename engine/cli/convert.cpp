// netloom-train's conversions. Each names what it read and what it wrote, and refuses
// with the node, op or file at fault; nothing is left half-written.
#include "engine/cli/convert.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/interop/onnx.h"
#include "engine/interop/pytorch_export.h"
#include "engine/io/project_file.h"

namespace netloom::cli {

std::string checkConversion(const ConvertArgs& c) {
  const int conversions = !c.exportOnnx.empty() + !c.importOnnx.empty() + !c.exportPytorch.empty();
  if (conversions > 1) return "give one of --export-onnx, --import-onnx and --export-pytorch";
  if (!c.importOnnx.empty()) {
    if (c.to.empty()) return "--import-onnx needs --to PROJECT.nlproj";
    if (!c.project.empty()) return "--import-onnx makes a project; it reads none";
    if (c.foldBn || !c.initWeights.empty())
      return "--fold-bn and --init-weights go with an export, not --import-onnx";
    return {};
  }
  if (!c.to.empty()) return "--to goes with --import-onnx";
  if (c.project.empty()) return "no project file given";
  if (c.foldBn && c.exportOnnx.empty()) return "--fold-bn goes with --export-onnx";
  return {};
}

int runConversion(const ConvertArgs& c) {
  if (std::string err = checkConversion(c); !err.empty()) {
    std::fprintf(stderr, "netloom-train: %s\n", err.c_str());
    return 2;
  }
  if (!c.importOnnx.empty()) {
    if (Status st = importOnnx(c.importOnnx, c.to); !st) {
      std::fprintf(stderr, "netloom-train: %s\n", st.message().c_str());
      return 2;
    }
    std::printf("netloom-train: imported %s as %s\n", c.importOnnx.c_str(), c.to.c_str());
    return 0;
  }
  auto project = loadProject(c.project);
  if (!project) {
    std::fprintf(stderr, "netloom-train: %s\n", project.error().message.c_str());
    return 2;
  }
  const std::string dir = std::filesystem::absolute(c.project).parent_path().string();
  Status st;
  std::string what, where;
  if (!c.exportOnnx.empty()) {
    OnnxExportOptions options;
    options.initWeights = c.initWeights;
    options.foldBatchNorm = c.foldBn;
    st = exportOnnx(*project, dir, c.exportOnnx, options);
    what = "ONNX";
    where = c.exportOnnx;
  } else {
    if (!c.initWeights.empty()) {
      std::fprintf(stderr,
                   "netloom-train: --init-weights does not go with --export-pytorch: the "
                   "code loads any run's weights with load_state_dict\n");
      return 2;
    }
    st = exportPytorch(*project, dir, c.exportPytorch);
    what = "PyTorch code";
    where = c.exportPytorch;
  }
  if (!st) {
    std::fprintf(stderr, "netloom-train: %s: %s\n", c.project.c_str(), st.message().c_str());
    return 2;
  }
  std::printf("netloom-train: wrote %s of %s to %s\n", what.c_str(), c.project.c_str(),
              where.c_str());
  return 0;
}

}  // namespace netloom::cli
