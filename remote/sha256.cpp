#include "remote/sha256.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace netloom::remote {

namespace {

struct DigestFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Digest = std::unique_ptr<EVP_MD_CTX, DigestFree>;

std::string hex(const unsigned char* d, unsigned n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += kHex[d[i] >> 4];
    out += kHex[d[i] & 15];
  }
  return out;
}

// What libcrypto says went wrong (a FIPS-only build refusing the digest, no memory).
Error cryptoError(const std::string& what) {
  char buf[256] = "unknown error";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return makeError(what + ": SHA-256 failed in libcrypto: " + buf);
}

}  // namespace

Result<std::string> sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr) != 1)
    return cryptoError(std::to_string(bytes.size()) + " bytes");
  return hex(digest, n);
}

Result<std::string> sha256File(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) return makeError(path + ": cannot open: " + std::strerror(errno));
  Digest ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return cryptoError(path);
  std::string buf(1 << 20, '\0');
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0;)
    if (EVP_DigestUpdate(ctx.get(), buf.data(), n) != 1) return cryptoError(path);
  if (std::ferror(f.get())) return makeError(path + ": read failed");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &n) != 1) return cryptoError(path);
  return hex(digest, n);
}

}  // namespace netloom::remote
