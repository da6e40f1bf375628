#include "engine/interop/pytorch_export.h"

namespace netloom {
Status exportPytorch(const proto::Project&, const std::string&, const std::string&) {
  return makeError("PyTorch export is not built yet");
}
}  // namespace netloom
