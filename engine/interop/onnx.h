// ONNX interchange: the evaluation graph of a project out as an ONNX model (opset 17,
// IR version 8, weights as initializers), and an ONNX model in as a project with its
// initializers as the project's initial weights. Both go through Debian's libonnx and
// its checker; an op or attribute with no counterpart is refused by name.
#pragma once

#include <string>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

struct OnnxExportOptions {
  std::string initWeights;     // safetensors to export; empty: the project's initial weights
  bool foldBatchNorm = false;  // fold each BatchNorm into the convolution or linear before it
};

// Writes `path` atomically. `projectDir` resolves the project's relative paths.
Status exportOnnx(const proto::Project& project, const std::string& projectDir,
                  const std::string& path, const OnnxExportOptions& options = {});

// Reads `onnxPath` and writes `projectPath` (an .nlproj) and its weights beside it
// (the same name with .safetensors, which the project's train.init_weights names).
// Nothing is written when any node cannot be imported.
Status importOnnx(const std::string& onnxPath, const std::string& projectPath);

// Whether this build has ONNX support (false when libonnx was not found).
bool onnxAvailable();

}  // namespace netloom
