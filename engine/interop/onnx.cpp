// ONNX support as this build has it: the real export and import live in
// onnx_export.cpp and onnx_import.cpp when libonnx was found; without it, both
// answer with an error that says so.
#include "engine/interop/onnx.h"

namespace netloom {

#ifdef NETLOOM_WITH_ONNX
bool onnxAvailable() {
  return true;
}
#else
bool onnxAvailable() {
  return false;
}

Status exportOnnx(const proto::Project&, const std::string&, const std::string&,
                  const OnnxExportOptions&) {
  return makeError("this build of NetLoom has no ONNX support (libonnx was not found)");
}

Status importOnnx(const std::string&, const std::string&) {
  return makeError("this build of NetLoom has no ONNX support (libonnx was not found)");
}
#endif

}  // namespace netloom
