// SHA-256 (FIPS 180-4), for naming uploaded dataset files by their content so a
// host keeps one copy that every later job reuses.
#pragma once

#include <cstdint>
#include <string>

#include "engine/util/status.h"

namespace netloom::remote {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  std::string hexDigest();  // finishes; 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t m_h[8];
  uint8_t m_buf[64];
  size_t m_fill = 0;
  uint64_t m_bytes = 0;
};

std::string sha256Hex(const std::string& bytes);
// The digest of a file's contents; the error names the file.
Result<std::string> sha256File(const std::string& path);

}  // namespace netloom::remote
