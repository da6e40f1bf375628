// Weights in the safetensors format: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw little-endian data.
// Files are written atomically (engine/io/output_file.h).
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

}  // namespace netloom
