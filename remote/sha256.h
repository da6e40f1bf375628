// SHA-256 (FIPS 180-4), for naming uploaded dataset files by their content so a
// host keeps one copy that every later job reuses. The digest is OpenSSL's libcrypto,
// which libssh already brings.
#pragma once

#include <string>

#include "engine/util/status.h"

namespace netloom::remote {

// 64 lowercase hex digits.
Result<std::string> sha256Hex(const std::string& bytes);
// The digest of a file's contents; the error names the file.
Result<std::string> sha256File(const std::string& path);

}  // namespace netloom::remote
