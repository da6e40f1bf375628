// The Python of model.py and train.py that is the same for every project, kept as
// Python files in engine/interop/python/ and embedded at build time (CMake writes
// python_templates.gen.h from them), so the export needs no files beside the binary:
// - model_runtime.py: reading and writing safetensors;
// - train_runtime.py: NetLoom's random streams, data pipeline, learning-rate schedule
//   and training loop as plain PyTorch;
// - image_runtime.py: image folders and lists, decoded, resized and centre-cropped
//   with the arithmetic of engine/data/image_decode.cpp, so a PNG becomes the same
//   bytes as in NetLoom;
// - layers_runtime.py: the layers NetLoom has that an older PyTorch lacks (RMSNorm,
//   positions, rotary embedding, attention), added to a model.py that uses them.
#include "engine/interop/pytorch_gen.h"
#include "python_templates.gen.h"

namespace netloom::pytorch {

std::string modelRuntime() {
  return templates::model_runtime;
}

std::string trainRuntime() {
  return templates::train_runtime;
}

std::string layersRuntime() {
  return templates::layers_runtime;
}

std::string imageRuntime() {
  return templates::image_runtime;
}

}  // namespace netloom::pytorch
