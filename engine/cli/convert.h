// The conversions netloom-train does instead of training: ONNX export and import,
// and PyTorch code export.
#pragma once

#include <string>

namespace netloom::cli {

struct ConvertArgs {
  std::string project, exportOnnx, importOnnx, to, exportPytorch, initWeights;
  bool foldBn = false;
  // Whether the command line asks for a conversion.
  bool wanted() const {
    return !exportOnnx.empty() || !importOnnx.empty() || !exportPytorch.empty();
  }
};

// Why these arguments do not make one conversion (two at once, --to without
// --import-onnx, ...); empty when they do.
std::string checkConversion(const ConvertArgs& c);

// Runs the conversion `c` asks for; the exit code (0 done, 2 refused, with the reason
// on stderr).
int runConversion(const ConvertArgs& c);

}  // namespace netloom::cli
