#include "engine/interop/onnx.h"

namespace netloom {
Status exportOnnx(const proto::Project&, const std::string&, const std::string&,
                  const OnnxExportOptions&) {
  return makeError("ONNX export is not built yet");
}
Status importOnnx(const std::string&, const std::string&) {
  return makeError("ONNX import is not built yet");
}
bool onnxAvailable() { return false; }
}  // namespace netloom
