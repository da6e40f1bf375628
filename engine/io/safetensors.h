// Weights in the safetensors format: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw little-endian data.
// Files are written atomically (temporary file, fsync, rename).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/util/status.h"
#include "kernels/core/tensor.h"

namespace netloom {

struct NamedTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> data;  // numel * dtypeSize bytes, little-endian
};

Status writeSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata = {});
// Tensors come back in header order. Errors name the file and, where it applies, the
// tensor at fault. `metadata`, when given, receives the "__metadata__" map.
Result<std::vector<NamedTensor>> readSafetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

// Writes `bytes` to `path` via a temporary file in the same folder and a rename, so a
// crash leaves either the old file or the new one, never a torn one. `mode` (such as
// 0600), when given, is the new file's permission bits whatever the umask.
Status writeFileAtomic(const std::string& path, const std::string& bytes, int mode = -1);

}  // namespace netloom
