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

// The exported graph runs from the model's Input nodes to its outputs (ModelDef.outputs,
// else what the loss reads), without losses or metrics, Dropout as Identity and
// BatchNorm on its running statistics; the batch dimension is the symbol "batch". The
// project's data normalisation is not part of it: the model's metadata says it
// ("netloom.normalization"). The weights are `initWeights`, else the project's
// train.init_weights, else the seeded initialisation a run of the project starts from.
// Writes `path` atomically. `projectDir` resolves the project's relative paths.
Status exportOnnx(const proto::Project& project, const std::string& projectDir,
                  const std::string& path, const OnnxExportOptions& options = {});

// Reads `onnxPath` and writes `projectPath` (an .nlproj) and its weights beside it
// (the same name with .safetensors, which the project's train.init_weights names).
// The model has one Input (the ONNX input's shape without the batch dimension), the
// imported nodes and the ONNX outputs as its outputs. An output of [batch, classes]
// gets a SoftmaxCrossEntropy loss and an Accuracy metric on int32 labels (reading the
// logits before a final Softmax); any other output is left for the user to give a
// loss. The data is left for the user to choose, and the layout empty: the IDE lays
// out a project without positions when it opens it. Nothing is written when any node
// or attribute cannot be imported; the error lists every one, by node and op.

Status importOnnx(const std::string& onnxPath, const std::string& projectPath);

// Whether this build has ONNX support (false when libonnx was not found).
bool onnxAvailable();

}  // namespace netloom
